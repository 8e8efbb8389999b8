package podconfig

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func pod(uid, name, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

func withLabel(p *v1.Pod, k, v string) *v1.Pod {
	p = p.DeepCopy()
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}

func withAnnotation(p *v1.Pod, k, v string) *v1.Pod {
	p = p.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
	return p
}

// received counts the updates each Config handed to a test.
var (
	receivedMu sync.Mutex
	received   = map[*Config]int{}
)

// recv reads exactly n updates or fails at the deadline.
func recv(t *testing.T, c *Config, n int) []Update {
	t.Helper()
	var out []Update
	defer func() {
		receivedMu.Lock()
		received[c] += len(out)
		receivedMu.Unlock()
	}()
	deadline := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case u := <-c.Updates():
			out = append(out, u)
		case <-deadline:
			t.Fatalf("got %d updates %v, want %d", len(out), describe(out), n)
		}
	}
	return out
}

// drain reads updates until every update c queued was received, or fails
// at the deadline.
func drain(t *testing.T, c *Config) []Update {
	t.Helper()
	var out []Update
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		queued := c.queued
		c.mu.Unlock()
		receivedMu.Lock()
		got := received[c] + len(out)
		receivedMu.Unlock()
		if got >= queued {
			break
		}
		select {
		case u := <-c.Updates():
			out = append(out, u)
		case <-deadline:
			t.Fatalf("got %d updates %v, %d queued", got, describe(out), queued)
		}
	}
	receivedMu.Lock()
	received[c] += len(out)
	receivedMu.Unlock()
	return out
}

// expectNone fails if c queued more updates than the test received.
func expectNone(t *testing.T, c *Config) {
	t.Helper()
	c.mu.Lock()
	queued := c.queued
	c.mu.Unlock()
	receivedMu.Lock()
	got := received[c]
	receivedMu.Unlock()
	if queued != got {
		t.Fatalf("%d updates queued, %d received", queued, got)
	}
}

// withCondition returns p with a readiness gate for t and, when status is
// not empty, the condition t with that status.
func withCondition(p *v1.Pod, t v1.PodConditionType, status v1.ConditionStatus) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: t}}
	if status != "" {
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: t, Status: status})
	}
	return p
}

// withForeignCondition returns p with condition t (named by no gate).
func withForeignCondition(p *v1.Pod, t v1.PodConditionType, status v1.ConditionStatus) *v1.Pod {
	p = p.DeepCopy()
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: t, Status: status})
	return p
}

func describe(us []Update) []string {
	var s []string
	for _, u := range us {
		s = append(s, fmt.Sprintf("%s %s/%s", u.Op, u.Pod.Name, u.Pod.UID))
	}
	return s
}

func TestSetDiff(t *testing.T) {
	a := pod("a", "pa", "img:1")
	b := pod("b", "pb", "img:1")
	c := pod("c", "pc", "img:1")
	a2 := pod("a", "pa", "img:2")
	const gate = "example.com/gate"
	gateFalse := withCondition(a, gate, v1.ConditionFalse)
	gateTrue := withCondition(a, gate, v1.ConditionTrue)
	gateMissing := withCondition(a, gate, "")
	readyFlip := withForeignCondition(gateTrue, v1.PodReady, v1.ConditionTrue)
	otherFlip := withForeignCondition(gateTrue, "example.com/other", v1.ConditionTrue)
	// kubectl debug adds an ephemeral container through the
	// ephemeralcontainers subresource: the spec changes.
	debugged := a.DeepCopy()
	debugged.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "img:1"}}}

	tests := []struct {
		name  string
		first []*v1.Pod // delivered and drained first, if any
		next  []*v1.Pod
		want  []string // updates produced by next
	}{
		{name: "first set adds all", next: []*v1.Pod{a, b}, want: []string{"add pa/a", "add pb/b"}},
		{name: "identical set produces nothing", first: []*v1.Pod{a, b}, next: []*v1.Pod{a, b}},
		{name: "new uid is added", first: []*v1.Pod{a}, next: []*v1.Pod{a, c}, want: []string{"add pc/c"}},
		{name: "missing uid is removed", first: []*v1.Pod{a, b}, next: []*v1.Pod{b}, want: []string{"remove pa/a"}},
		{name: "spec change is update", first: []*v1.Pod{a}, next: []*v1.Pod{a2}, want: []string{"update pa/a"}},
		{name: "ephemeral container added is update", first: []*v1.Pod{a}, next: []*v1.Pod{debugged}, want: []string{"update pa/a"}},
		{name: "label change is update", first: []*v1.Pod{a}, next: []*v1.Pod{withLabel(a, "x", "y")}, want: []string{"update pa/a"}},
		{name: "annotation change is update", first: []*v1.Pod{a}, next: []*v1.Pod{withAnnotation(a, "x", "y")}, want: []string{"update pa/a"}},
		{name: "seen change is not update", first: []*v1.Pod{withAnnotation(a, AnnotationConfigSeen, "t1")}, next: []*v1.Pod{withAnnotation(a, AnnotationConfigSeen, "t2")}},
		{name: "gate condition turning True is update", first: []*v1.Pod{gateFalse}, next: []*v1.Pod{gateTrue}, want: []string{"update pa/a"}},
		{name: "gate condition turning False is update", first: []*v1.Pod{gateTrue}, next: []*v1.Pod{gateFalse}, want: []string{"update pa/a"}},
		{name: "gate condition appearing is update", first: []*v1.Pod{gateMissing}, next: []*v1.Pod{gateTrue}, want: []string{"update pa/a"}},
		{name: "unchanged gate condition is not update", first: []*v1.Pod{gateTrue}, next: []*v1.Pod{gateTrue}},
		{name: "other status change is not update", first: []*v1.Pod{gateTrue}, next: []*v1.Pod{readyFlip}},
		{name: "condition named by no gate is not update", first: []*v1.Pod{gateTrue}, next: []*v1.Pod{otherFlip}},
		{name: "removes come before adds", first: []*v1.Pod{a}, next: []*v1.Pod{b}, want: []string{"remove pa/a", "add pb/b"}},
		{name: "empty set removes all", first: []*v1.Pod{a, b}, next: []*v1.Pod{}, want: []string{"remove pa/a", "remove pb/b"}},
		{name: "nil pod and pod without uid ignored", next: []*v1.Pod{nil, pod("", "x", "i"), a}, want: []string{"add pa/a"}},
		{name: "duplicate uid in one set ignored", next: []*v1.Pod{a, a2}, want: []string{"add pa/a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := New(t.Context())
			if tt.first != nil {
				cfg.Set(SourceFile, tt.first)
				recv(t, cfg, len(tt.first))
			}
			cfg.Set(SourceFile, tt.next)
			got := describe(recv(t, cfg, len(tt.want)))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("updates = %v, want %v", got, tt.want)
			}
			expectNone(t, cfg)
		})
	}
}

// An update still waiting when the pod is removed folds into the removal,
// which carries the last version.
func TestRemoveCarriesLastVersion(t *testing.T) {
	cfg := New(t.Context())
	a := pod("a", "pa", "img:1")
	cfg.Set(SourceFile, []*v1.Pod{a})
	if us := recv(t, cfg, 1); us[0].Op != OpAdd {
		t.Fatalf("first update = %v, want add", describe(us))
	}
	cfg.Set(SourceFile, []*v1.Pod{withLabel(a, "v", "2")})
	cfg.Set(SourceFile, nil)
	us := drain(t, cfg)
	last := us[len(us)-1]
	if last.Op != OpRemove || last.Pod.Labels["v"] != "2" {
		t.Fatalf("last update = %v labels %v, want the removal of the last version", last.Op, last.Pod.Labels)
	}
}

// Changes of a UID that still waits fold into the waiting one, so at most
// a removal and a re-add wait per UID. The Config's context is done, so
// nothing is delivered and the queue is what Set left.
func TestCoalescing(t *testing.T) {
	add := func(uid, label string) Update {
		return Update{Op: OpAdd, Pod: withLabel(pod(uid, "p"+uid, "i"), "v", label)}
	}
	upd := func(uid, label string) Update {
		return Update{Op: OpUpdate, Pod: withLabel(pod(uid, "p"+uid, "i"), "v", label)}
	}
	rm := func(uid, label string) Update {
		return Update{Op: OpRemove, Pod: withLabel(pod(uid, "p"+uid, "i"), "v", label)}
	}
	tests := []struct {
		name string
		in   []Update
		want []string // op uid v
	}{
		{"updates fold into the add", []Update{add("a", "1"), upd("a", "2"), upd("a", "3")}, []string{"add a 3"}},
		{"updates fold into an update", []Update{upd("a", "1"), upd("a", "2")}, []string{"update a 2"}},
		{"a removal replaces an update", []Update{upd("a", "1"), rm("a", "2")}, []string{"remove a 2"}},
		{"a removal cancels an add", []Update{add("a", "1"), upd("a", "2"), rm("a", "2")}, nil},
		{"a re-add waits behind the removal", []Update{rm("a", "1"), add("a", "2"), upd("a", "3")}, []string{"remove a 1", "add a 3"}},
		{"remove, re-add, remove", []Update{rm("a", "1"), add("a", "2"), rm("a", "2")}, []string{"remove a 1"}},
		{"other UIDs keep their order", []Update{add("a", "1"), add("b", "1"), upd("a", "2"), rm("b", "1"), add("c", "1")}, []string{"add a 2", "add c 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			cfg := New(ctx)
			cfg.mu.Lock()
			for _, u := range tc.in {
				cfg.enqueue(u)
			}
			var got []string
			for _, u := range cfg.queue {
				got = append(got, fmt.Sprintf("%s %s %s", u.Op, u.Pod.UID, u.Pod.Labels["v"]))
			}
			queued := cfg.queued
			cfg.mu.Unlock()
			if !slices.Equal(got, tc.want) {
				t.Errorf("queue = %q, want %q", got, tc.want)
			}
			if queued != len(tc.want) {
				t.Errorf("queued = %d, want %d", queued, len(tc.want))
			}
		})
	}
}

func TestAnnotationsFilled(t *testing.T) {
	cfg := New(t.Context())
	fc := clocktesting.NewFakePassiveClock(time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC))
	cfg.clock = fc
	cfg.Set(SourceHTTP, []*v1.Pod{pod("a", "pa", "i")})
	u := recv(t, cfg, 1)[0]
	if got := u.Pod.Annotations[AnnotationConfigSource]; got != SourceHTTP {
		t.Errorf("source annotation = %q, want %q", got, SourceHTTP)
	}
	seen := u.Pod.Annotations[AnnotationConfigSeen]
	if seen != "2024-01-02T03:04:05.000000006Z" {
		t.Errorf("seen annotation = %q", seen)
	}
	// An update keeps the first-seen time.
	fc.SetTime(fc.Now().Add(time.Hour))
	cfg.Set(SourceHTTP, []*v1.Pod{withLabel(pod("a", "pa", "i"), "x", "y")})
	u = recv(t, cfg, 1)[0]
	if u.Op != OpUpdate || u.Pod.Annotations[AnnotationConfigSeen] != seen {
		t.Errorf("update %v seen = %q, want %q", u.Op, u.Pod.Annotations[AnnotationConfigSeen], seen)
	}
	// A source's own annotation is kept.
	cfg.Set(SourceFile, []*v1.Pod{withAnnotation(pod("b", "pb", "i"), AnnotationConfigSeen, "given")})
	u = recv(t, cfg, 1)[0]
	if u.Pod.Annotations[AnnotationConfigSeen] != "given" {
		t.Errorf("seen = %q, want the source's value", u.Pod.Annotations[AnnotationConfigSeen])
	}
	if !IsStatic(u.Pod) {
		t.Error("file pod not reported static")
	}
}

func TestSourcesAreIndependent(t *testing.T) {
	cfg := New(t.Context())
	cfg.Set(SourceFile, []*v1.Pod{pod("a", "pa", "i")})
	cfg.Set(SourceHTTP, []*v1.Pod{pod("b", "pb", "i")})
	recv(t, cfg, 2)
	// Emptying one source leaves the other's pods alone.
	cfg.Set(SourceHTTP, nil)
	got := describe(recv(t, cfg, 1))
	if fmt.Sprint(got) != "[remove pb/b]" {
		t.Fatalf("updates = %v", got)
	}
	pods := cfg.Pods()
	if len(pods) != 1 || pods[0].UID != "a" {
		t.Fatalf("Pods() = %v, want only a", pods)
	}
	// A UID owned by another source is ignored.
	cfg.Set(SourceHTTP, []*v1.Pod{pod("a", "other", "i")})
	expectNone(t, cfg)
	if n := len(cfg.Pods()); n != 1 {
		t.Fatalf("Pods() has %d pods, want 1", n)
	}
}

func TestSeenAllSources(t *testing.T) {
	cfg := New(t.Context())
	if !cfg.SeenAllSources() {
		t.Error("no expected sources should be seen")
	}
	if cfg.SeenAllSources(SourceFile) {
		t.Error("file seen before Set")
	}
	cfg.Set(SourceFile, nil)
	if !cfg.SeenAllSources(SourceFile) {
		t.Error("file not seen after empty Set")
	}
	if cfg.SeenAllSources(SourceFile, SourceAPIServer) {
		t.Error("api seen before Set")
	}
}

func TestPodsAreCopies(t *testing.T) {
	cfg := New(t.Context())
	in := pod("a", "pa", "i")
	cfg.Set(SourceFile, []*v1.Pod{in})
	u := recv(t, cfg, 1)[0]
	in.Spec.Containers[0].Image = "changed-by-source"
	u.Pod.Spec.Containers[0].Image = "changed-by-consumer"
	got := cfg.Pods()
	if got[0].Spec.Containers[0].Image != "i" {
		t.Fatalf("stored pod changed to %q", got[0].Spec.Containers[0].Image)
	}
	got[0].Spec.Containers[0].Image = "changed-by-reader"
	if cfg.Pods()[0].Spec.Containers[0].Image != "i" {
		t.Fatal("Pods() returned the stored object")
	}
}

// apply applies us to the set of UIDs a consumer knows, failing on a
// change that does not fit it (an add of a known UID, an update or removal
// of an unknown one).
func apply(t *testing.T, known map[types.UID]bool, us []Update) {
	t.Helper()
	for _, u := range us {
		switch u.Op {
		case OpAdd:
			if known[u.Pod.UID] {
				t.Fatalf("add of known UID %s in %v", u.Pod.UID, describe(us))
			}
			known[u.Pod.UID] = true
		case OpUpdate, OpRemove:
			if !known[u.Pod.UID] {
				t.Fatalf("%s of unknown UID %s in %v", u.Op, u.Pod.UID, describe(us))
			}
			if u.Op == OpRemove {
				delete(known, u.Pod.UID)
			}
		}
	}
}

// TestSetNeverBlocks queues many changes without a reader: Set returns,
// the changes coalesce to a few, and what arrives ends in the last set.
func TestSetNeverBlocks(t *testing.T) {
	cfg := New(t.Context())
	const n = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			cfg.Set(SourceFile, []*v1.Pod{pod(fmt.Sprint(i), fmt.Sprint("p", i), "i")})
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Set blocked without a reader")
	}
	cfg.mu.Lock()
	waiting := len(cfg.queue)
	cfg.mu.Unlock()
	// At most the removal of one delivered pod and the add of the last.
	if waiting > 2 {
		t.Errorf("%d changes wait for the reader, want at most 2", waiting)
	}
	us := drain(t, cfg)
	known := map[types.UID]bool{}
	apply(t, known, us)
	if len(known) != 1 || !known[types.UID(fmt.Sprint(n-1))] {
		t.Fatalf("after %v the reader knows %v, want only %d", describe(us), known, n-1)
	}
}

func TestConcurrentSources(t *testing.T) {
	cfg := New(t.Context())
	var wg sync.WaitGroup
	for _, src := range []string{SourceFile, SourceHTTP, SourceAPIServer} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				cfg.Set(src, []*v1.Pod{pod(src+fmt.Sprint(i%3), "p", "i")})
				_ = cfg.Pods()
				_ = cfg.SeenAllSources(src)
			}
		}()
	}
	// Read while the sources change, then the rest.
	var us []Update
	stop, readDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			select {
			case u := <-cfg.Updates():
				us = append(us, u)
			case <-stop:
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readDone
	receivedMu.Lock()
	received[cfg] += len(us)
	receivedMu.Unlock()
	us = append(us, drain(t, cfg)...)
	known := map[types.UID]bool{}
	apply(t, known, us)
	want := map[types.UID]bool{}
	for _, src := range []string{SourceFile, SourceHTTP, SourceAPIServer} {
		want[types.UID(src+fmt.Sprint(49%3))] = true
	}
	if !maps.Equal(known, want) {
		t.Fatalf("the reader knows %v, want %v", known, want)
	}
	if n := len(cfg.Pods()); n != 3 {
		t.Fatalf("Pods() = %d, want 3", n)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpAdd: "add", OpUpdate: "update", OpRemove: "remove", Op(0): "unknown"} {
		if op.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(op), op.String(), want)
		}
	}
}

func TestAddsInCreationOrder(t *testing.T) {
	c := New(t.Context())
	old, mid, young := pod("c", "old", "img"), pod("a", "mid", "img"), pod("b", "young", "img")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old.CreationTimestamp = metav1.NewTime(base)
	mid.CreationTimestamp = metav1.NewTime(base.Add(time.Second))
	young.CreationTimestamp = metav1.NewTime(base.Add(2 * time.Second))
	// Sources deliver in UID order; admission must see creation order.
	c.Set("api", []*v1.Pod{mid, young, old})
	var got []string
	for _, u := range recv(t, c, 3) {
		got = append(got, u.Pod.Name)
	}
	if want := []string{"old", "mid", "young"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("add order = %v, want %v", got, want)
	}
}

// TestDeliveryEndsWithContext: once the context given to New is done, the
// goroutine delivering queued updates to a consumer that stopped reading
// ends, and later changes start none.
func TestDeliveryEndsWithContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	cfg := New(ctx)
	cfg.Set(SourceFile, []*v1.Pod{pod("a", "pa", "img"), pod("b", "pb", "img")})
	recv(t, cfg, 1) // the consumer reads one update, then stops (shutdown)
	cancel()
	cfg.Set(SourceFile, []*v1.Pod{pod("c", "pc", "img")})
}

func TestApplyDelta(t *testing.T) {
	a := pod("a", "pa", "img:1")
	b := pod("b", "pb", "img:1")
	c := pod("c", "pc", "img:1")
	a2 := pod("a", "pa", "img:2")
	const gate = "example.com/gate"
	gateFalse := withCondition(a, gate, v1.ConditionFalse)
	gateTrue := withCondition(a, gate, v1.ConditionTrue)
	readyFlip := withForeignCondition(gateTrue, v1.PodReady, v1.ConditionTrue)

	tests := []struct {
		name    string
		first   []*v1.Pod // the full set, delivered and drained first
		changed []*v1.Pod
		removed []types.UID
		want    []string // updates produced by the delta
		// wantPods are the UIDs wanted afterwards.
		wantPods []string
	}{
		{name: "new pod is added", first: []*v1.Pod{a}, changed: []*v1.Pod{c}, want: []string{"add pc/c"}, wantPods: []string{"a", "c"}},
		{name: "unchanged pod produces nothing", first: []*v1.Pod{a, b}, changed: []*v1.Pod{a}, wantPods: []string{"a", "b"}},
		{name: "spec change is update", first: []*v1.Pod{a, b}, changed: []*v1.Pod{a2}, want: []string{"update pa/a"}, wantPods: []string{"a", "b"}},
		{name: "gate condition change is update", first: []*v1.Pod{gateFalse}, changed: []*v1.Pod{gateTrue}, want: []string{"update pa/a"}, wantPods: []string{"a"}},
		{name: "other status change is not update", first: []*v1.Pod{gateTrue}, changed: []*v1.Pod{readyFlip}, wantPods: []string{"a"}},
		{name: "removed uid is removed", first: []*v1.Pod{a, b}, removed: []types.UID{"a"}, want: []string{"remove pa/a"}, wantPods: []string{"b"}},
		{name: "unknown uid removed is nothing", first: []*v1.Pod{a}, removed: []types.UID{"x"}, wantPods: []string{"a"}},
		{name: "removes come before adds", first: []*v1.Pod{a}, changed: []*v1.Pod{b}, removed: []types.UID{"a"}, want: []string{"remove pa/a", "add pb/b"}, wantPods: []string{"b"}},
		{name: "removed and wanted again unchanged is nothing", first: []*v1.Pod{a}, changed: []*v1.Pod{a}, removed: []types.UID{"a"}, wantPods: []string{"a"}},
		{name: "removed and wanted again changed is update", first: []*v1.Pod{a}, changed: []*v1.Pod{a2}, removed: []types.UID{"a"}, want: []string{"update pa/a"}, wantPods: []string{"a"}},
		{name: "nil pod and pod without uid ignored", first: []*v1.Pod{b}, changed: []*v1.Pod{nil, pod("", "x", "i"), a}, want: []string{"add pa/a"}, wantPods: []string{"a", "b"}},
		{name: "duplicate uid in one delta ignored", changed: []*v1.Pod{a, a2}, want: []string{"add pa/a"}, wantPods: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := New(t.Context())
			cfg.Set(SourceAPIServer, tt.first)
			recv(t, cfg, len(tt.first))
			cfg.Apply(SourceAPIServer, tt.changed, tt.removed)
			got := describe(recv(t, cfg, len(tt.want)))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("updates = %v, want %v", got, tt.want)
			}
			expectNone(t, cfg)
			var pods []string
			for _, p := range cfg.Pods() {
				pods = append(pods, string(p.UID))
			}
			if !slices.Equal(pods, tt.wantPods) {
				t.Errorf("pods wanted = %v, want %v", pods, tt.wantPods)
			}
		})
	}
}

// TestApplyKeepsSeenAndOwner: an update by delta keeps the first-seen
// time, a pod of another source is not taken over, and a removal by delta
// releases the UID.
func TestApplyKeepsSeenAndOwner(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	cfg := New(t.Context())
	cfg.clock = clk
	a := pod("a", "pa", "img:1")
	cfg.Set(SourceAPIServer, []*v1.Pod{a})
	first := recv(t, cfg, 1)[0].Pod.Annotations[AnnotationConfigSeen]
	clk.Step(time.Minute)
	cfg.Apply(SourceAPIServer, []*v1.Pod{withLabel(a, "v", "2")}, nil)
	if u := recv(t, cfg, 1)[0]; u.Op != OpUpdate || u.Pod.Annotations[AnnotationConfigSeen] != first || u.Pod.Annotations[AnnotationConfigSource] != SourceAPIServer {
		t.Errorf("update %v annotations %v, want an update seen at %s from %s", u.Op, u.Pod.Annotations, first, SourceAPIServer)
	}
	f := pod("f", "pf", "img:1")
	cfg.Set(SourceFile, []*v1.Pod{f})
	recv(t, cfg, 1)
	cfg.Apply(SourceAPIServer, []*v1.Pod{f}, []types.UID{"f"})
	expectNone(t, cfg)
	cfg.Apply(SourceAPIServer, nil, []types.UID{"a"})
	recv(t, cfg, 1)
	cfg.Set(SourceFile, []*v1.Pod{f, a})
	if u := recv(t, cfg, 1)[0]; u.Op != OpAdd || u.Pod.UID != "a" {
		t.Errorf("after the removal by delta the file source's %v of %s, want add of a", u.Op, u.Pod.UID)
	}
	if cfg.SeenAllSources(SourceHTTP) {
		t.Error("SeenAllSources(http) without any delivery")
	}
}

// TestApplyCostDoesNotGrowWithPods: a delta of one pod allocates the same
// whether its source wants 10 pods or 1000, where a full Set of the same
// change allocates in proportion to the set.
func TestApplyCostDoesNotGrowWithPods(t *testing.T) {
	allocs := func(n int, full bool) float64 {
		cfg := New(t.Context())
		var pods []*v1.Pod
		for i := range n {
			pods = append(pods, pod(fmt.Sprint(i), fmt.Sprint("p", i), "img:1"))
		}
		cfg.Set(SourceAPIServer, pods)
		recv(t, cfg, n)
		one := []*v1.Pod{pods[0]}
		return testing.AllocsPerRun(20, func() {
			if full {
				cfg.Set(SourceAPIServer, pods)
			} else {
				cfg.Apply(SourceAPIServer, one, nil)
			}
		})
	}
	if small, large := allocs(10, false), allocs(1000, false); large > small {
		t.Errorf("Apply of one unchanged pod: %v allocations with 10 pods, %v with 1000", small, large)
	}
	if small, large := allocs(10, true), allocs(1000, true); large < 10*small {
		t.Errorf("Set of the same pods: %v allocations with 10 pods, %v with 1000: the comparison above measures nothing", small, large)
	}
}

// TestSharedPods: SharedPods lists what Pods lists, without copies, and a
// pod it returned is not changed by a later update (the update replaces it).
func TestSharedPods(t *testing.T) {
	cfg := New(t.Context())
	a, b := pod("a", "pa", "img:1"), pod("b", "pb", "img:1")
	cfg.Set(SourceFile, []*v1.Pod{b})
	cfg.Set(SourceAPIServer, []*v1.Pod{a})
	recv(t, cfg, 2)
	first, again := cfg.SharedPods(), cfg.SharedPods()
	if got := describe(updates(first)); fmt.Sprint(got) != "[add pa/a add pb/b]" {
		t.Fatalf("SharedPods() = %v, want pa, pb", got)
	}
	for i := range first {
		if first[i] != again[i] {
			t.Errorf("SharedPods() returned a new copy of %s", first[i].UID)
		}
	}
	copies := cfg.Pods()
	for i := range first {
		if copies[i] == first[i] || copies[i].UID != first[i].UID {
			t.Errorf("Pods()[%d] = %p %s, SharedPods()[%d] = %p %s: want an equal copy", i, copies[i], copies[i].UID, i, first[i], first[i].UID)
		}
	}
	cfg.Apply(SourceAPIServer, []*v1.Pod{pod("a", "pa", "img:2")}, nil)
	recv(t, cfg, 1)
	if img := first[0].Spec.Containers[0].Image; img != "img:1" {
		t.Errorf("a pod SharedPods returned changed with an update: image %s", img)
	}
	if img := cfg.SharedPods()[0].Spec.Containers[0].Image; img != "img:2" {
		t.Errorf("SharedPods() after the update: image %s, want img:2", img)
	}
}

func updates(pods []*v1.Pod) []Update {
	var out []Update
	for _, p := range pods {
		out = append(out, Update{Op: OpAdd, Pod: p})
	}
	return out
}
