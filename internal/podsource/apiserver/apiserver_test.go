package apiserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/podconfig"
)

const node = "node-a"

// testTimeout bounds every wait for an asynchronous delivery.
const testTimeout = 10 * time.Second

func mkPod(uid, name, nodeName string, mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func mirror(p *v1.Pod) {
	p.Annotations = map[string]string{podconfig.AnnotationConfigMirror: "hash"}
}

func annotated(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func phase(ph v1.PodPhase) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Status.Phase = ph }
}

// recorder is a sink that keeps the set after every delivery (the full
// set, or the last set with a delta applied) and every delivery itself.
type recorder struct {
	mu     sync.Mutex
	cur    map[types.UID]*v1.Pod
	sets   [][]*v1.Pod
	deltas []delta
	notify chan struct{}
}

// delta is one delivery: full for Set, else the UIDs Apply named.
type delta struct {
	full             bool
	changed, removed []string
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) Set(pods []*v1.Pod) {
	r.mu.Lock()
	r.cur = map[types.UID]*v1.Pod{}
	for _, p := range pods {
		r.cur[p.UID] = p
	}
	r.deltas = append(r.deltas, delta{full: true, changed: uids(pods)})
	r.recordLocked()
}

func (r *recorder) Apply(changed []*v1.Pod, removed []types.UID) {
	r.mu.Lock()
	d := delta{changed: uids(changed), removed: []string{}}
	for _, uid := range removed {
		delete(r.cur, uid)
		d.removed = append(d.removed, string(uid))
	}
	for _, p := range changed {
		r.cur[p.UID] = p
	}
	r.deltas = append(r.deltas, d)
	r.recordLocked()
}

// recordLocked keeps the current set, unlocks and notifies.
func (r *recorder) recordLocked() {
	set := slices.Collect(maps.Values(r.cur))
	sortByUID(set)
	r.sets = append(r.sets, set)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// sink is the recorder as the source's sink.
func (r *recorder) sink() Sink { return r }

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets)
}

// waitFor waits until a delivered set satisfies ok and returns it, or fails
// at the deadline.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]*v1.Pod) bool) []*v1.Pod {
	t.Helper()
	deadline := time.After(testTimeout)
	checked := 0
	for {
		r.mu.Lock()
		sets := r.sets[checked:]
		checked = len(r.sets)
		r.mu.Unlock()
		for _, s := range sets {
			if ok(s) {
				return s
			}
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no delivered set %s; last: %v", what, uids(r.latest()))
		}
	}
}

func (r *recorder) latest() []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	return r.sets[len(r.sets)-1]
}

func uids(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	return out
}

func hasUIDs(want ...string) func([]*v1.Pod) bool {
	return func(pods []*v1.Pod) bool { return slices.Equal(uids(pods), want) }
}

// start runs src until the test ends and checks that Run then returns nil.
func start(t *testing.T, src *Source) context.Context {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		case <-time.After(testTimeout):
			t.Errorf("Run did not return after cancel")
		}
	})
	return ctx
}

func TestFieldSelectorOnListAndWatch(t *testing.T) {
	kube := fake.NewClientset(mkPod("a", "a", node))
	var mu sync.Mutex
	var lists, watches []string
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists = append(lists, a.GetNamespace()+"|"+a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	watchStarted := make(chan struct{}, 1)
	kube.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		watches = append(watches, a.GetNamespace()+"|"+a.(k8stesting.WatchAction).GetWatchRestrictions().Fields.String())
		mu.Unlock()
		select {
		case watchStarted <- struct{}{}:
		default:
		}
		return false, nil, nil
	})
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	start(t, src)
	rec.waitFor(t, "with pod a", hasUIDs("a"))
	select {
	case <-watchStarted:
	case <-time.After(testTimeout):
		t.Fatal("the informer never watched")
	}

	want := "|spec.nodeName=" + node
	mu.Lock()
	defer mu.Unlock()
	if len(lists) == 0 || len(watches) == 0 {
		t.Fatalf("lists %q, watches %q: want at least one of each", lists, watches)
	}
	for _, got := range append(slices.Clone(lists), watches...) {
		if got != want {
			t.Errorf("request namespace|fieldSelector = %q, want %q", got, want)
		}
	}
}

func TestFirstDeliveryOnlyAfterInitialList(t *testing.T) {
	kube := fake.NewClientset(mkPod("a", "a", node), mkPod("b", "b", node), mkPod("c", "c", node))
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil, nil
	})
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	start(t, src)

	select {
	case <-entered:
	case <-time.After(testTimeout):
		close(release)
		t.Fatal("the informer never listed")
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("%d deliveries before the initial list returned, want 0", n)
	}
	if src.HasSynced() {
		t.Error("HasSynced() = true before the initial list returned")
	}
	close(release)

	rec.waitFor(t, "after the initial list", func([]*v1.Pod) bool { return true })
	rec.mu.Lock()
	first := rec.sets[0]
	rec.mu.Unlock()
	if got := uids(first); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("first delivery = %v, want the complete initial list [a b c]", got)
	}
	if !src.HasSynced() {
		t.Error("HasSynced() = false after the first delivery")
	}
}

func TestDeliversFullSetOnEveryChange(t *testing.T) {
	kube := fake.NewClientset(
		mkPod("a", "a", node),
		mkPod("m", "static-node-a", node, mirror),
		mkPod("o", "other", "node-b"),
		mkPod("t", "done", node, phase(v1.PodSucceeded)),
		mkPod("u", "unscheduled", ""),
	)
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	ctx := start(t, src)
	pods := kube.CoreV1().Pods("default")

	// Mirror pods, pods of other nodes and unscheduled pods are left out;
	// terminal pods are delivered.
	rec.waitFor(t, "[a t]", hasUIDs("a", "t"))
	if got := uids(src.MirrorPods()); !slices.Equal(got, []string{"m"}) {
		t.Errorf("MirrorPods() = %v, want [m]", got)
	}

	if _, err := pods.Create(ctx, mkPod("b", "b", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "[a b t] after add", hasUIDs("a", "b", "t"))

	upd := mkPod("a", "a", node, func(p *v1.Pod) { p.Labels = map[string]string{"v": "2"} })
	if _, err := pods.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "with the updated pod a", func(set []*v1.Pod) bool {
		return len(set) == 3 && set[0].Labels["v"] == "2"
	})

	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "[b t] after delete", hasUIDs("b", "t"))

	// A new mirror pod changes MirrorPods but not the set; the events are
	// applied in order, so once c is delivered the mirror pod is cached.
	if _, err := pods.Create(ctx, mkPod("m2", "static2-node-a", node, mirror), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "static-node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, mkPod("c", "c", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "[b c t]", hasUIDs("b", "c", "t"))
	if got := uids(src.MirrorPods()); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("MirrorPods() = %v, want [m2]", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, set := range rec.sets {
		for _, p := range set {
			if isMirror(p) || p.Spec.NodeName != node {
				t.Errorf("delivered pod %s (node %q) must not be desired", p.UID, p.Spec.NodeName)
			}
		}
	}
}

func TestAnnotationsWithoutMutatingCache(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	t1 := t0.Add(time.Minute)
	clk := clocktesting.NewFakePassiveClock(t0)
	kube := fake.NewClientset(mkPod("a", "a", node,
		annotated(podconfig.AnnotationConfigSource, podconfig.SourceFile),
		annotated(podconfig.AnnotationConfigSeen, "forged"),
		annotated("user", "x")))
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	src.clock = clk
	ctx := start(t, src)

	set := rec.waitFor(t, "[a]", hasUIDs("a"))
	want := map[string]string{
		podconfig.AnnotationConfigSource: SourceName,
		podconfig.AnnotationConfigSeen:   t0.Format(time.RFC3339Nano),
		"user":                           "x",
	}
	if got := set[0].Annotations; !equalMaps(got, want) {
		t.Errorf("annotations = %v, want %v", got, want)
	}
	if podconfig.IsStatic(set[0]) {
		t.Error("an API pod that claims another source is reported static")
	}

	// The receiver owns its copy.
	set[0].Annotations["user"] = "changed"
	set[0].Spec.Containers[0].Image = "changed"
	obj, exists, err := src.informer.GetStore().GetByKey("default/a")
	if err != nil || !exists {
		t.Fatalf("cached pod default/a: exists %v, err %v", exists, err)
	}
	cached := obj.(*v1.Pod)
	wantCached := map[string]string{
		podconfig.AnnotationConfigSource: podconfig.SourceFile,
		podconfig.AnnotationConfigSeen:   "forged",
		"user":                           "x",
	}
	if !equalMaps(cached.Annotations, wantCached) || cached.Spec.Containers[0].Image != "busybox" {
		t.Errorf("cached pod was modified: annotations %v, image %s", cached.Annotations, cached.Spec.Containers[0].Image)
	}

	// The first-seen time of a known UID survives later deliveries; a new
	// UID gets the time it was first seen.
	clk.SetTime(t1)
	if _, err := kube.CoreV1().Pods("default").Create(ctx, mkPod("b", "b", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	set = rec.waitFor(t, "[a b]", hasUIDs("a", "b"))
	if got := set[0].Annotations[podconfig.AnnotationConfigSeen]; got != t0.Format(time.RFC3339Nano) {
		t.Errorf("pod a seen = %s, want %s", got, t0.Format(time.RFC3339Nano))
	}
	if got := set[1].Annotations[podconfig.AnnotationConfigSeen]; got != t1.Format(time.RFC3339Nano) {
		t.Errorf("pod b seen = %s, want %s", got, t1.Format(time.RFC3339Nano))
	}
	if set[1].Annotations[podconfig.AnnotationConfigSource] != SourceName {
		t.Errorf("pod b source annotation = %q, want %q", set[1].Annotations[podconfig.AnnotationConfigSource], SourceName)
	}
}

func TestBurstIsCoalesced(t *testing.T) {
	kube := fake.NewClientset(mkPod("a", "a", node))
	var calls atomic.Int32
	inFirst := make(chan struct{})
	unblock := make(chan struct{})
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, blockingSink{rec: rec, first: func() {
		if calls.Add(1) == 1 {
			close(inFirst)
			<-unblock
		}
	}})
	ctx := start(t, src)

	select {
	case <-inFirst:
	case <-time.After(testTimeout):
		t.Fatal("no first delivery")
	}
	// The handler must not block while the sink does.
	poked := make(chan struct{})
	go func() {
		a := mkPod("a", "a", node)
		for range 50 {
			src.mark(a)
		}
		close(poked)
	}()
	select {
	case <-poked:
	case <-time.After(testTimeout):
		close(unblock)
		t.Fatal("the event handler blocked while the sink was busy")
	}
	close(unblock)
	rec.waitFor(t, "coalesced", func([]*v1.Pod) bool { return rec.calls() >= 2 })

	if _, err := kube.CoreV1().Pods("default").Create(ctx, mkPod("s", "s", node), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "[a s]", hasUIDs("a", "s"))
	if n := calls.Load(); n != 3 {
		t.Errorf("%d deliveries, want 3 (first, one for the burst, one for the new pod)", n)
	}
}

// blockingSink calls first before each delivery to rec.
type blockingSink struct {
	rec   *recorder
	first func()
}

func (b blockingSink) Set(pods []*v1.Pod) {
	b.first()
	b.rec.Set(pods)
}

func (b blockingSink) Apply(changed []*v1.Pod, removed []types.UID) {
	b.first()
	b.rec.Apply(changed, removed)
}

func TestRunEndsWithoutDeliveryWhenListFails(t *testing.T) {
	kube := fake.NewClientset(mkPod("a", "a", node))
	listed := make(chan struct{}, 1)
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case listed <- struct{}{}:
		default:
		}
		return true, nil, context.DeadlineExceeded
	})
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	select {
	case <-listed:
	case <-time.After(testTimeout):
		t.Fatal("the informer never listed")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Run did not return after cancel")
	}
	if n := rec.calls(); n != 0 {
		t.Errorf("%d deliveries without a successful list, want 0", n)
	}
	if src.HasSynced() {
		t.Error("HasSynced() = true without a successful list")
	}
}

func TestRunTwice(t *testing.T) {
	rec := newRecorder()
	src := New(kubeapifake.Wrap(fake.NewClientset()), node, rec.sink())
	ctx := start(t, src)
	rec.waitFor(t, "empty", hasUIDs())
	if err := src.Run(ctx); err == nil {
		t.Error("second Run() = nil, want an error")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// Pod reads one pod of the node from the cache, with the status the API
// holds now, including status-only changes that deliver no new set
// contents downstream.
func TestPodReadsCurrentStatus(t *testing.T) {
	kube := fake.NewClientset(
		mkPod("a", "a", node),
		mkPod("m", "static-node-a", node, mirror),
		mkPod("o", "other", "node-b"),
	)
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	ctx := start(t, src)
	rec.waitFor(t, "[a]", hasUIDs("a"))

	tests := []struct {
		name   string
		wantOK bool
	}{
		{"a", true},
		{"static-node-a", true},
		{"other", false}, // bound to another node
		{"missing", false},
	}
	for _, tt := range tests {
		p, ok := src.Pod("default", tt.name)
		if ok != tt.wantOK || (ok && p.Name != tt.name) {
			t.Errorf("Pod(default, %s) = %v, %v; want ok %v", tt.name, p, ok, tt.wantOK)
		}
	}

	upd := mkPod("a", "a", node, phase(v1.PodRunning))
	if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "pod a Running", func(set []*v1.Pod) bool {
		return len(set) == 1 && set[0].Status.Phase == v1.PodRunning
	})
	p, ok := src.Pod("default", "a")
	if !ok || p.Status.Phase != v1.PodRunning {
		t.Fatalf("Pod(default, a) = %v, %v; want the Running status", p, ok)
	}
	// A copy: changing it leaves the cache alone.
	p.Status.Phase = v1.PodFailed
	if again, _ := src.Pod("default", "a"); again.Status.Phase != v1.PodRunning {
		t.Errorf("the cache changed with the returned copy: phase %q", again.Status.Phase)
	}
}

// TestDeliversOnlyTheChangedPods: after the full set, each event delivers
// the pod it names (or its UID, gone), however many pods the node has.
func TestDeliversOnlyTheChangedPods(t *testing.T) {
	for _, n := range []int{1, 10, 100} {
		for _, tc := range []struct {
			name   string
			change func(ctx context.Context, pods typedPods) error
			want   delta
		}{
			{
				name:   "add",
				change: func(ctx context.Context, pods typedPods) error { return create(ctx, pods, mkPod("new", "new", node)) },
				want:   delta{changed: []string{"new"}, removed: []string{}},
			},
			{
				name: "update",
				change: func(ctx context.Context, pods typedPods) error {
					_, err := pods.Update(ctx, mkPod("p0", "p0", node, annotated("v", "2")), metav1.UpdateOptions{})
					return err
				},
				want: delta{changed: []string{"p0"}, removed: []string{}},
			},
			{
				name: "status update",
				change: func(ctx context.Context, pods typedPods) error {
					_, err := pods.UpdateStatus(ctx, mkPod("p0", "p0", node, phase(v1.PodRunning)), metav1.UpdateOptions{})
					return err
				},
				want: delta{changed: []string{"p0"}, removed: []string{}},
			},
			{
				name:   "delete",
				change: func(ctx context.Context, pods typedPods) error { return pods.Delete(ctx, "p0", metav1.DeleteOptions{}) },
				want:   delta{changed: []string{}, removed: []string{"p0"}},
			},
			{
				name: "turned mirror pod",
				change: func(ctx context.Context, pods typedPods) error {
					_, err := pods.Update(ctx, mkPod("p0", "p0", node, mirror), metav1.UpdateOptions{})
					return err
				},
				want: delta{changed: []string{}, removed: []string{"p0"}},
			},
			{
				name: "mirror pod added",
				change: func(ctx context.Context, pods typedPods) error {
					return create(ctx, pods, mkPod("m", "m", node, mirror))
				},
			},
			{
				name: "same name, new UID",
				change: func(ctx context.Context, pods typedPods) error {
					if err := pods.Delete(ctx, "p0", metav1.DeleteOptions{}); err != nil {
						return err
					}
					return create(ctx, pods, mkPod("p0-2", "p0", node))
				},
				// The delete and the add may come in one delta or two.
				want: delta{changed: []string{"p0-2"}, removed: []string{"p0"}},
			},
		} {
			t.Run(fmt.Sprintf("%s of %d pods", tc.name, n), func(t *testing.T) {
				var objs []runtime.Object
				var all []string
				for i := range n {
					uid := fmt.Sprintf("p%d", i)
					objs = append(objs, mkPod(uid, uid, node))
					all = append(all, uid)
				}
				slices.Sort(all)
				kube := fake.NewClientset(objs...)
				rec := newRecorder()
				src := New(kubeapifake.Wrap(kube), node, rec.sink())
				ctx := start(t, src)
				rec.waitFor(t, "the full set", hasUIDs(all...))
				if err := tc.change(ctx, kube.CoreV1().Pods("default")); err != nil {
					t.Fatal(err)
				}
				if tc.want.changed == nil {
					// Nothing desired changed: a later add shows that
					// nothing was delivered before it.
					if err := create(ctx, kube.CoreV1().Pods("default"), mkPod("later", "later", node)); err != nil {
						t.Fatal(err)
					}
					rec.waitFor(t, "with pod later", func(set []*v1.Pod) bool { return slices.Contains(uids(set), "later") })
					tc.want = delta{changed: []string{"later"}, removed: []string{}}
				}
				var got delta
				deadline := time.After(testTimeout)
				for {
					rec.mu.Lock()
					var merged delta
					for _, d := range rec.deltas[1:] {
						merged.changed = append(merged.changed, d.changed...)
						merged.removed = append(merged.removed, d.removed...)
					}
					rec.mu.Unlock()
					got = delta{changed: append([]string{}, merged.changed...), removed: append([]string{}, merged.removed...)}
					if len(got.changed)+len(got.removed) >= len(tc.want.changed)+len(tc.want.removed) {
						break
					}
					select {
					case <-rec.notify:
					case <-deadline:
						t.Fatalf("deliveries after the full set %+v, want %+v", got, tc.want)
					}
				}
				if !slices.Equal(got.changed, tc.want.changed) || !slices.Equal(got.removed, tc.want.removed) {
					t.Errorf("deliveries after the full set: changed %v removed %v, want changed %v removed %v", got.changed, got.removed, tc.want.changed, tc.want.removed)
				}
			})
		}
	}
}

type typedPods = kubeapi.PodInterface

func create(ctx context.Context, pods typedPods, p *v1.Pod) error {
	_, err := pods.Create(ctx, p, metav1.CreateOptions{})
	return err
}

// TestOnUpdateSeesEveryUpdatedPod: the function given to OnUpdate sees
// each pod of the node the watch updates, mirror pods included, as the
// cache holds it after the update.
func TestOnUpdateSeesEveryUpdatedPod(t *testing.T) {
	kube := fake.NewClientset(
		mkPod("a", "a", node),
		mkPod("m", "static-node-a", node, mirror),
	)
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	seen := make(chan string, 10)
	src.OnUpdate(func(p *v1.Pod) { seen <- p.Name + " " + string(p.Status.Phase) })
	ctx := start(t, src)
	rec.waitFor(t, "[a]", hasUIDs("a"))

	for _, p := range []*v1.Pod{mkPod("a", "a", node, phase(v1.PodRunning)), mkPod("m", "static-node-a", node, mirror, phase(v1.PodFailed))} {
		if _, err := kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < 2 {
		select {
		case s := <-seen:
			got = append(got, s)
		case <-time.After(testTimeout):
			t.Fatalf("OnUpdate saw %v, want both updates", got)
		}
	}
	slices.Sort(got)
	if want := []string{"a Running", "static-node-a Failed"}; !slices.Equal(got, want) {
		t.Errorf("OnUpdate saw %v, want %v", got, want)
	}
}

// TestRetryWhenBack: the source's list goes through the wait given to
// RetryWhenBack, with the time its request started.
func TestRetryWhenBack(t *testing.T) {
	kube := fake.NewClientset(mkPod("a", "a", node))
	var lists, waits atomic.Int32
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			return true, nil, fmt.Errorf("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	rec := newRecorder()
	src := New(kubeapifake.Wrap(kube), node, rec.sink())
	var sinceSeen atomic.Bool
	src.RetryWhenBack(func(ctx context.Context, since time.Time) bool {
		waits.Add(1)
		sinceSeen.Store(!since.IsZero() && !since.After(time.Now()))
		return true
	})
	start(t, src)
	rec.waitFor(t, "[a]", hasUIDs("a"))
	if got := lists.Load(); got != 2 {
		t.Errorf("lists = %d, want 2", got)
	}
	if got := waits.Load(); got != 1 {
		t.Errorf("waits = %d, want 1", got)
	}
	if !sinceSeen.Load() {
		t.Error("the wait was not given when the failed request started")
	}
}
