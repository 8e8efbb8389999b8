package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podconfig"
)

// syncerEnv is a Syncer on a fake clientset and a fake clock.
type syncerEnv struct {
	s    *Syncer
	m    *Manager
	kube *fake.Clientset
	clk  *clocktesting.FakeClock
}

func newSyncerEnv(t *testing.T, opts SyncerOptions, objs ...runtime.Object) *syncerEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	m := NewManager(clk)
	kube := fake.NewClientset(objs...)
	return &syncerEnv{s: NewSyncer(kubeapifake.Wrap(kube), m, clk, opts), m: m, kube: kube, clk: clk}
}

// round runs one round and returns the API actions it made.
func (e *syncerEnv) round(t *testing.T, full bool) []clienttesting.Action {
	t.Helper()
	e.kube.ClearActions()
	e.s.syncRound(context.Background(), full)
	return e.kube.Actions()
}

func (e *syncerEnv) apiPod(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return p
}

// verbs summarizes actions as "verb" or "verb/subresource".
func verbs(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		v := a.GetVerb()
		if sub := a.GetSubresource(); sub != "" {
			v += "/" + sub
		}
		out = append(out, v)
	}
	return out
}

func countVerb(actions []clienttesting.Action, verb string) int {
	n := 0
	for _, v := range verbs(actions) {
		if v == verb {
			n++
		}
	}
	return n
}

func patches(actions []clienttesting.Action) []clienttesting.PatchAction {
	var out []clienttesting.PatchAction
	for _, a := range actions {
		if p, ok := a.(clienttesting.PatchAction); ok {
			out = append(out, p)
		}
	}
	return out
}

// apiPod returns a pod as the API holds it, bound to the node, pending.
func boundPod(ns, name, uid string) *v1.Pod {
	p := namedPod(ns, name, uid)
	p.Spec.NodeName = "node-a"
	p.Annotations = map[string]string{podconfig.AnnotationConfigSource: podconfig.SourceAPIServer}
	p.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort}
	return p
}

func staticPod(ns, name, uid string) *v1.Pod {
	p := namedPod(ns, name, uid)
	p.Spec.NodeName = "node-a"
	p.Annotations = map[string]string{
		podconfig.AnnotationConfigSource: podconfig.SourceFile,
		podconfig.AnnotationConfigHash:   uid,
	}
	return p
}

func sameVerbs(got, want []string) bool {
	return strings.Join(got, ",") == strings.Join(want, ",")
}

func TestSyncerPatchesOncePerChange(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)

	steps := []struct {
		name   string
		status *v1.PodStatus // nil: no SetPodStatus before the round
		want   []string
	}{
		{name: "first write reads the API object then patches", status: ptr.To(runningStatus(t0)), want: []string{"get", "patch/status"}},
		{name: "nothing changed, nothing sent", want: nil},
		{name: "same status again does not count as a change", status: ptr.To(runningStatus(t0)), want: nil},
		{name: "a real change is one patch without a read", status: ptr.To(func() v1.PodStatus {
			s := runningStatus(t0)
			s.ContainerStatuses[0].Ready = false
			return s
		}()), want: []string{"patch/status"}},
		{name: "and it is not sent twice", want: nil},
	}
	for _, step := range steps {
		if step.status != nil {
			e.m.SetPodStatus(pod, *step.status)
		}
		got := verbs(e.round(t, false))
		if !sameVerbs(got, step.want) {
			t.Fatalf("%s: actions = %v, want %v", step.name, got, step.want)
		}
	}
	api := e.apiPod(t, "default", "web")
	if api.Status.Phase != v1.PodRunning || len(api.Status.ContainerStatuses) != 1 || api.Status.ContainerStatuses[0].Ready {
		t.Errorf("API status = %+v, want Running with one not-ready container", api.Status)
	}
	if api.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("API qosClass = %q, want the API's value kept", api.Status.QOSClass)
	}
}

func TestSyncerPatchCarriesUIDPrecondition(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	e.m.SetPodStatus(pod, runningStatus(t0))
	ps := patches(e.round(t, false))
	if len(ps) != 1 {
		t.Fatalf("patches = %d, want 1", len(ps))
	}
	p := ps[0]
	if p.GetPatchType() != types.StrategicMergePatchType || p.GetSubresource() != "status" || p.GetName() != "web" || p.GetNamespace() != "default" {
		t.Errorf("patch = %s %s/%s/%s, want strategic merge of default/web/status", p.GetPatchType(), p.GetNamespace(), p.GetName(), p.GetSubresource())
	}
	var body struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		t.Fatalf("decode patch %s: %v", p.GetPatch(), err)
	}
	if body.Metadata.UID != "uid-1" {
		t.Errorf("patch metadata.uid = %q, want uid-1 (patch %s)", body.Metadata.UID, p.GetPatch())
	}
	if body.Status["phase"] != string(v1.PodRunning) {
		t.Errorf("patch status.phase = %v, want Running (patch %s)", body.Status["phase"], p.GetPatch())
	}
}

func TestSyncerBatchesChanges(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	rounds := make(chan struct{}, 10)
	e.s.afterRound = func() { rounds <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	<-rounds // the initial round, nothing to do

	for i := range 5 {
		st := runningStatus(t0)
		st.ContainerStatuses[0].RestartCount = int32(i)
		e.m.SetPodStatus(pod, st)
	}
	waitForWaiters(t, e.clk, 2) // the resync ticker and the batch timer
	e.kube.ClearActions()
	e.clk.Step(DefaultBatchPeriod)
	<-rounds
	acts := e.kube.Actions()
	if n := countVerb(acts, "patch/status"); n != 1 {
		t.Fatalf("patches after 5 quick changes = %d, want 1 (actions %v)", n, verbs(acts))
	}
	if got := e.apiPod(t, "default", "web").Status.ContainerStatuses[0].RestartCount; got != 4 {
		t.Errorf("API restartCount = %d, want the last value 4", got)
	}

	// A full reconcile with nothing changed sends nothing.
	e.kube.ClearActions()
	e.clk.Step(DefaultResyncPeriod - DefaultBatchPeriod)
	<-rounds
	if acts := e.kube.Actions(); len(acts) != 0 {
		t.Errorf("resync with no change made %v", verbs(acts))
	}
}

// A change after a quiet period is written at once; a change within the
// batch period after that round waits for the end of the period.
func TestSyncerWritesLoneChangeAtOnce(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	rounds := make(chan struct{}, 10)
	e.s.afterRound = func() { rounds <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	<-rounds                    // the initial round, nothing to do
	waitForWaiters(t, e.clk, 1) // the resync ticker
	e.clk.Step(DefaultBatchPeriod)

	e.m.SetPodStatus(pod, runningStatus(t0))
	select { // no clock step: the round runs at once
	case <-rounds:
	case <-time.After(10 * time.Second):
		t.Fatal("no round after a lone change without the clock moving")
	}
	if n := countVerb(e.kube.Actions(), "patch/status"); n != 1 {
		t.Fatalf("patches after a lone change = %d, want 1 (actions %v)", n, verbs(e.kube.Actions()))
	}

	e.kube.ClearActions()
	notReady := runningStatus(t0)
	notReady.ContainerStatuses[0].Ready = false
	e.m.SetPodStatus(pod, notReady)
	waitForWaiters(t, e.clk, 2) // the resync ticker and the batch timer
	select {
	case <-rounds:
		t.Fatalf("a second change within the batch period was written at once (actions %v)", verbs(e.kube.Actions()))
	default:
	}
	e.clk.Step(DefaultBatchPeriod)
	<-rounds
	if n := countVerb(e.kube.Actions(), "patch/status"); n != 1 {
		t.Errorf("patches at the end of the batch period = %d, want 1 (actions %v)", n, verbs(e.kube.Actions()))
	}
}

// waitForWaiters waits until clk has n timers or tickers waiting.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clk.Waiters() == n, nil
	})
	if err != nil {
		t.Fatalf("clock waiters = %d, want %d", clk.Waiters(), n)
	}
}

func TestSyncerStaticPodStatusGoesToMirror(t *testing.T) {
	static := staticPod("kube-system", "etcd-node-a", "static-uid")
	mirror := static.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations[podconfig.AnnotationConfigMirror] = "static-uid"
	var (
		mu      sync.Mutex
		present bool
	)
	opts := SyncerOptions{
		MirrorPod: func(p *v1.Pod) (*v1.Pod, bool) {
			mu.Lock()
			defer mu.Unlock()
			if p.UID != static.UID {
				t.Errorf("MirrorPod called with %s, want the static pod", p.UID)
			}
			return mirror, present
		},
		CanDelete: func(types.UID) bool { return true },
	}
	e := newSyncerEnv(t, opts, mirror)
	e.m.SetPodStatus(static, runningStatus(t0))

	if acts := e.round(t, false); len(acts) != 0 {
		t.Fatalf("without a mirror pod: actions %v, want none", verbs(acts))
	}
	mu.Lock()
	present = true
	mu.Unlock()
	ps := patches(e.round(t, false))
	if len(ps) != 1 || ps[0].GetName() != "etcd-node-a" || ps[0].GetNamespace() != "kube-system" {
		t.Fatalf("patches = %v, want one on kube-system/etcd-node-a", ps)
	}
	if !strings.Contains(string(ps[0].GetPatch()), `"uid":"mirror-uid"`) {
		t.Errorf("patch %s does not carry the mirror's UID", ps[0].GetPatch())
	}
	if got := e.apiPod(t, "kube-system", "etcd-node-a").Status.Phase; got != v1.PodRunning {
		t.Errorf("mirror phase = %q, want Running", got)
	}

	// A static pod is never deleted through the API, even when its pod
	// object claims a deletion.
	del := static.DeepCopy()
	del.DeletionTimestamp = &metav1.Time{Time: t0}
	e.m.SetPodStatus(del, terminatedStatus(v1.PodSucceeded, 0))
	if n := countVerb(e.round(t, false), "delete"); n != 0 {
		t.Errorf("static pod: %d deletes, want 0", n)
	}
}

func TestSyncerNeverRegressesTerminalPhaseInAPI(t *testing.T) {
	pod := boundPod("default", "job", "uid-1")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	ready := metav1.NewTime(t0.Add(-time.Hour))
	pod.Status = v1.PodStatus{
		Phase:     v1.PodSucceeded,
		Reason:    "Done",
		StartTime: &ready,
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: ready},
			{Type: "example.com/Custom", Status: v1.ConditionTrue, LastTransitionTime: ready},
		},
	}
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	// The Manager starts afresh, as after a restart, from a pod without
	// status and computes Pending.
	local := pod.DeepCopy()
	local.Status = v1.PodStatus{}
	e.m.SetPodStatus(local, v1.PodStatus{
		Phase:      v1.PodPending,
		Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}},
	})
	e.round(t, false)
	api := e.apiPod(t, "default", "job")
	if api.Status.Phase != v1.PodSucceeded || api.Status.Reason != "Done" {
		t.Errorf("API phase = %q reason %q, want Succeeded/Done kept", api.Status.Phase, api.Status.Reason)
	}
	if c := findCondition(api.Status.Conditions, v1.PodScheduled); c == nil || !c.LastTransitionTime.Equal(&ready) {
		t.Errorf("PodScheduled = %+v, want transition time %v kept", c, ready)
	}
	if c := findCondition(api.Status.Conditions, "example.com/Custom"); c == nil {
		t.Errorf("foreign condition dropped: %+v", api.Status.Conditions)
	}
	if api.Status.StartTime == nil || !api.Status.StartTime.Equal(&ready) {
		t.Errorf("startTime = %v, want %v kept", api.Status.StartTime, ready)
	}
}

func TestSyncerAPIErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name string
		// verb and err make the fake API fail every such call.
		verb string
		err  error
		// retried: a later round (after the backoff) calls the API again.
		retried bool
		// informer: the caller gives a GetPod that does not know the pod.
		informer bool
	}{
		{name: "forbidden get of a pod the informer no longer has", verb: "get", err: apierrors.NewForbidden(gr, "web", errors.New("no relationship found between node and this object")), informer: true},
		{name: "forbidden get without an informer is retried", verb: "get", err: apierrors.NewForbidden(gr, "web", errors.New("denied")), retried: true},
		{name: "pod gone on patch", verb: "patch", err: apierrors.NewNotFound(gr, "web")},
		{name: "pod gone on get", verb: "get", err: apierrors.NewNotFound(gr, "web")},
		{name: "UID precondition fails", verb: "patch", err: apierrors.NewConflict(gr, "web", errors.New("precondition failed: UID"))},
		{name: "server error is retried", verb: "patch", err: apierrors.NewInternalError(errors.New("etcd timeout")), retried: true},
		{name: "get error is retried", verb: "get", err: apierrors.NewServiceUnavailable("busy"), retried: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := boundPod("default", "web", "uid-1")
			var opts SyncerOptions
			if tt.informer {
				opts.GetPod = func(string, string) (*v1.Pod, bool) { return nil, false }
			}
			e := newSyncerEnv(t, opts, pod)
			e.kube.PrependReactor(tt.verb, "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			e.m.SetPodStatus(pod, runningStatus(t0))
			if n := len(e.round(t, false)); n == 0 {
				t.Fatalf("first round made no call")
			}
			// Right away: forgotten pods and pods in backoff are skipped.
			if acts := e.round(t, false); len(acts) != 0 {
				t.Errorf("second round: %v, want no call", verbs(acts))
			}
			e.clk.Step(2 * retryBase)
			st := runningStatus(t0)
			st.ContainerStatuses[0].RestartCount = 1
			e.m.SetPodStatus(pod, st)
			acts := e.round(t, true)
			if tt.retried && len(acts) == 0 {
				t.Errorf("after the backoff: no call, want a retry")
			}
			if !tt.retried && len(acts) != 0 {
				t.Errorf("forgotten pod: %v, want no call", verbs(acts))
			}
			if _, ok := e.m.GetPodStatus(pod.UID); !ok {
				t.Errorf("pod removed from the Manager, want it kept (it is not deleting)")
			}
		})
	}
}

func TestSyncerBackoffGrows(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	e.kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	e.m.SetPodStatus(pod, runningStatus(t0))
	wantWaits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, want := range wantWaits {
		retry := e.s.syncRound(context.Background(), false)
		if got := retry.Sub(e.clk.Now()); got != want {
			t.Fatalf("failure %d: retry in %v, want %v", i+1, got, want)
		}
		e.clk.Step(want)
	}
}

// While the API server does not answer, a failed write waits at most the
// resync period, and the first successful write after the outage makes
// every other failed pod retry in the next round: a status that changed
// during an outage is not held back by a backoff grown during it.
func TestSyncerRecoversAfterAPIOutage(t *testing.T) {
	a, b := boundPod("default", "a", "uid-a"), boundPod("default", "b", "uid-b")
	e := newSyncerEnv(t, SyncerOptions{}, a, b)
	var mu sync.Mutex
	down := true
	e.kube.PrependReactor("*", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return true, nil, errors.New(`Patch "https://127.0.0.1:6443/api/v1/namespaces/default/pods/a/status": dial tcp 127.0.0.1:6443: connect: connection refused`)
		}
		return false, nil, nil
	})
	e.m.SetPodStatus(a, runningStatus(t0))
	e.m.SetPodStatus(b, runningStatus(t0))
	// A 60 s outage: every retry fails; none waits longer than the resync.
	for elapsed := time.Duration(0); elapsed < 60*time.Second; {
		retry := e.s.syncRound(context.Background(), false)
		wait := retry.Sub(e.clk.Now())
		if wait <= 0 || wait > DefaultResyncPeriod {
			t.Fatalf("%v into the outage: retry in %v, want within (0, %v]", elapsed, wait, DefaultResyncPeriod)
		}
		e.clk.Step(wait)
		elapsed += wait
	}
	mu.Lock()
	down = false
	mu.Unlock()
	// Pod b changes after the API server is back: its write succeeds, and
	// pod a, still in its backoff, follows in the next round.
	e.clk.Step(time.Second)
	e.s.records[a.UID].retryAt = e.clk.Now().Add(DefaultResyncPeriod)
	st := runningStatus(t0)
	st.ContainerStatuses[0].RestartCount = 1
	e.m.SetPodStatus(b, st)
	e.kube.ClearActions()
	e.s.syncRound(context.Background(), false)
	e.s.syncRound(context.Background(), false)
	var patchedA bool
	for _, p := range patches(e.kube.Actions()) {
		patchedA = patchedA || p.GetName() == a.Name
	}
	if !patchedA {
		t.Fatalf("two rounds after the API server answered again: %v, none for pod a", verbs(e.kube.Actions()))
	}
	for _, p := range []*v1.Pod{a, b} {
		if got := e.apiPod(t, "default", p.Name); got.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s in the API: phase %q, want Running", p.Name, got.Status.Phase)
		}
	}
}

// An answer about the pod (a server error) keeps the full backoff.
func TestSyncerBackoffGrowsPastResyncOnServerErrors(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	e.kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	e.m.SetPodStatus(pod, runningStatus(t0))
	var wait time.Duration
	for range 6 {
		retry := e.s.syncRound(context.Background(), false)
		wait = retry.Sub(e.clk.Now())
		e.clk.Step(wait)
	}
	if wait != 32*time.Second {
		t.Errorf("sixth retry in %v, want 32s", wait)
	}
}

func TestSyncerDeletesAfterTermination(t *testing.T) {
	deleted := metav1.NewTime(t0)
	pod := boundPod("default", "web", "uid-1")
	pod.DeletionTimestamp = &deleted
	pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	var (
		mu        sync.Mutex
		canDelete bool
	)
	e := newSyncerEnv(t, SyncerOptions{CanDelete: func(uid types.UID) bool {
		mu.Lock()
		defer mu.Unlock()
		return canDelete && uid == "uid-1"
	}}, pod)
	e.m.SetPodStatus(pod, runningStatus(t0))

	acts := e.round(t, false)
	if n := countVerb(acts, "delete"); n != 0 {
		t.Fatalf("deleted before the workers finished: %v", verbs(acts))
	}
	e.m.SetPodStatus(pod, terminatedStatus(v1.PodSucceeded, 0))
	if n := countVerb(e.round(t, false), "delete"); n != 0 {
		t.Fatalf("deleted before the workers finished")
	}

	mu.Lock()
	canDelete = true
	mu.Unlock()
	acts = e.round(t, false)
	if !sameVerbs(verbs(acts), []string{"delete"}) {
		t.Fatalf("actions = %v, want one delete (the final status was already sent)", verbs(acts))
	}
	d := acts[0].(clienttesting.DeleteAction)
	opts := d.GetDeleteOptions()
	if d.GetName() != "web" {
		t.Errorf("deleted %s, want web", d.GetName())
	}
	if g := opts.GracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("delete grace period = %v, want 0", ptr.Deref(g, -1))
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "uid-1" {
		t.Errorf("delete preconditions = %+v, want UID uid-1", opts.Preconditions)
	}
	if _, ok := e.m.GetPodStatus("uid-1"); ok {
		t.Errorf("pod still in the Manager after deletion")
	}
	if _, err := e.kube.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still in the API: %v", err)
	}
}

func TestSyncerSendsFinalStatusBeforeDelete(t *testing.T) {
	deleted := metav1.NewTime(t0)
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{
		CanDelete: func(types.UID) bool { return true },
		// The deletion is only visible in the API's copy.
		GetPod: func(ns, name string) (*v1.Pod, bool) {
			p := pod.DeepCopy()
			p.DeletionTimestamp = &deleted
			return p, ns == "default" && name == "web"
		},
	}, pod)
	e.m.SetPodStatus(pod, terminatedStatus(v1.PodFailed, 1))
	acts := e.round(t, false)
	if !sameVerbs(verbs(acts), []string{"patch/status", "delete"}) {
		t.Fatalf("actions = %v, want the final status patch then the delete", verbs(acts))
	}
	if !strings.Contains(string(patches(acts)[0].GetPatch()), `"phase":"Failed"`) {
		t.Errorf("final patch %s lacks the terminal phase", patches(acts)[0].GetPatch())
	}
}

// The workers may finish a pod, and set its final status, after a round
// has read the pod's status and before it asks whether the pod may be
// deleted: the final status is still written before the delete.
func TestSyncerFinalStatusSetDuringTheRound(t *testing.T) {
	deleted := metav1.NewTime(t0)
	pod := boundPod("default", "web", "uid-1")
	pod.DeletionTimestamp = &deleted
	var (
		e                 *syncerEnv
		stopping, stopped bool
	)
	e = newSyncerEnv(t, SyncerOptions{CanDelete: func(types.UID) bool {
		if stopping && !stopped {
			// The pod worker: the containers are stopped, the final
			// status set, then the pod is terminated.
			stopped = true
			e.m.SetPodStatus(pod, terminatedStatus(v1.PodFailed, 137))
		}
		return stopped
	}}, pod)
	e.m.SetPodStatus(pod, runningStatus(t0))
	e.round(t, false) // the Running status
	stopping = true
	acts := e.round(t, false)
	if !sameVerbs(verbs(acts), []string{"patch/status", "delete"}) {
		t.Fatalf("actions = %v, want the final status patch then the delete", verbs(acts))
	}
	if p := string(patches(acts)[0].GetPatch()); !strings.Contains(p, `"phase":"Failed"`) {
		t.Errorf("the patch before the delete, %s, is not the final status", p)
	}
}

func TestSyncerDeleteErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name        string
		err         error
		wantRemoved bool
	}{
		{name: "already gone", err: apierrors.NewNotFound(gr, "web"), wantRemoved: true},
		{name: "replaced by another pod", err: apierrors.NewConflict(gr, "web", errors.New("uid")), wantRemoved: true},
		{name: "server error keeps the pod for a retry", err: apierrors.NewInternalError(errors.New("boom"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deleted := metav1.NewTime(t0)
			pod := boundPod("default", "web", "uid-1")
			pod.DeletionTimestamp = &deleted
			e := newSyncerEnv(t, SyncerOptions{CanDelete: func(types.UID) bool { return true }}, pod)
			e.kube.PrependReactor("delete", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			e.m.SetPodStatus(pod, terminatedStatus(v1.PodSucceeded, 0))
			if n := countVerb(e.round(t, false), "delete"); n != 1 {
				t.Fatalf("deletes = %d, want 1", n)
			}
			if _, ok := e.m.GetPodStatus(pod.UID); ok == tt.wantRemoved {
				t.Errorf("pod in Manager = %v, want %v", ok, !tt.wantRemoved)
			}
			if !tt.wantRemoved {
				e.clk.Step(2 * retryBase)
				if n := countVerb(e.round(t, false), "delete"); n != 1 {
					t.Errorf("retry deletes = %d, want 1", n)
				}
			}
		})
	}
}

// newCachedSyncerEnv is a syncerEnv for pod whose GetPod returns what
// the returned function last set, as an informer cache would.
func newCachedSyncerEnv(t *testing.T, pod *v1.Pod) (*syncerEnv, func(*v1.Pod)) {
	t.Helper()
	var (
		mu     sync.Mutex
		cached *v1.Pod
	)
	e := newSyncerEnv(t, SyncerOptions{GetPod: func(ns, name string) (*v1.Pod, bool) {
		mu.Lock()
		defer mu.Unlock()
		return cached, cached != nil
	}}, pod)
	return e, func(p *v1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		cached = p
	}
}

func TestSyncerReconcileRewritesOverwrittenStatus(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e, setCache := newCachedSyncerEnv(t, pod)
	setCache(pod.DeepCopy())
	e.m.SetPodStatus(pod, runningStatus(t0))
	if n := countVerb(e.round(t, false), "patch/status"); n != 1 {
		t.Fatalf("first round patches = %d, want 1", n)
	}
	if n := countVerb(e.round(t, false), "get"); n != 0 {
		t.Errorf("the cache was given, yet the pod was read %d times", n)
	}

	// The cache catches up: nothing to reconcile.
	setCache(e.apiPod(t, "default", "web"))
	if acts := e.round(t, true); len(acts) != 0 {
		t.Errorf("reconcile of an up-to-date pod: %v", verbs(acts))
	}

	// Someone else overwrites the status.
	overwritten := e.apiPod(t, "default", "web")
	overwritten.Status.Phase = v1.PodPending
	overwritten.Status.ContainerStatuses = nil
	if _, err := e.kube.CoreV1().Pods("default").UpdateStatus(context.Background(), overwritten, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setCache(overwritten)
	if acts := e.round(t, false); len(acts) != 0 {
		t.Errorf("an ordinary round reconciled: %v", verbs(acts))
	}
	if n := countVerb(e.round(t, true), "patch/status"); n != 1 {
		t.Fatalf("reconcile patches = %d, want 1", n)
	}
	if got := e.apiPod(t, "default", "web").Status.Phase; got != v1.PodRunning {
		t.Errorf("phase after reconcile = %q, want Running", got)
	}
}

// TestSyncerRecheck: a pod the informer reports changed by another
// writer is reconciled in the next ordinary round; the Syncer's own
// writes coming back through the informer cost no round.
func TestSyncerRecheck(t *testing.T) {
	tests := []struct {
		name string
		// change makes the API's pod differ from the last write as some
		// other writer would; it returns the pod the informer reports.
		change     func(t *testing.T, e *syncerEnv) *v1.Pod
		wantPatch  bool
		wantQueued bool
	}{
		{
			name: "node controller marks the pod not ready",
			change: func(t *testing.T, e *syncerEnv) *v1.Pod {
				p := e.apiPod(t, "default", "web")
				for i := range p.Status.Conditions {
					if p.Status.Conditions[i].Type == v1.PodReady {
						p.Status.Conditions[i].Status = v1.ConditionFalse
						p.Status.Conditions[i].Reason = "NodeNotReady"
					}
				}
				p.ResourceVersion = "8"
				return p
			},
			wantPatch:  true,
			wantQueued: true,
		},
		{
			name: "a label changes, the status does not",
			change: func(t *testing.T, e *syncerEnv) *v1.Pod {
				p := e.apiPod(t, "default", "web")
				p.Labels = map[string]string{"tier": "web"}
				p.ResourceVersion = "8"
				return p
			},
			wantQueued: true,
		},
		{
			name: "the Syncer's own write comes back",
			change: func(t *testing.T, e *syncerEnv) *v1.Pod {
				p := e.apiPod(t, "default", "web")
				p.ResourceVersion = "7"
				return p
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := boundPod("default", "web", "uid-1")
			e, setCache := newCachedSyncerEnv(t, pod)
			// The fake keeps no resourceVersion on objects: writes return "7".
			e.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				handled, obj, err := clienttesting.ObjectReaction(e.kube.Tracker())(a)
				if p, ok := obj.(*v1.Pod); ok && err == nil {
					p.ResourceVersion = "7"
				}
				return handled, obj, err
			})
			setCache(pod.DeepCopy())
			e.m.SetPodStatus(pod, runningStatus(t0))
			if n := countVerb(e.round(t, false), "patch/status"); n != 1 {
				t.Fatalf("first round patches = %d, want 1", n)
			}

			changed := tt.change(t, e)
			if _, err := e.kube.CoreV1().Pods("default").Update(context.Background(), changed, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			setCache(changed)
			e.s.Recheck(changed)
			if queued := len(e.s.trigger) == 1; queued != tt.wantQueued {
				t.Errorf("round triggered = %v, want %v", queued, tt.wantQueued)
			}
			n := countVerb(e.round(t, false), "patch/status")
			if got := n == 1; got != tt.wantPatch {
				t.Fatalf("patches in the ordinary round after Recheck = %d, want patch %v", n, tt.wantPatch)
			}
			if got := readyOf(e.apiPod(t, "default", "web")); got != v1.ConditionTrue {
				t.Errorf("Ready in the API after the round = %q, want True", got)
			}
			if n := countVerb(e.round(t, false), "patch/status"); n != 0 {
				t.Errorf("the round after patches %d times, want 0", n)
			}
		})
	}
}

func readyOf(p *v1.Pod) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status
		}
	}
	return ""
}

// TestSyncerReadsTheCachedPodOnly: the pod GetPod returns is the cache's
// own object; writing and reconciling statuses never changes it, whatever
// it holds (an older status, conditions, a deletion mark).
func TestSyncerReadsTheCachedPodOnly(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	shared := pod.DeepCopy()
	shared.Status = v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}
	deleted := metav1.NewTime(t0)
	shared.DeletionTimestamp = &deleted
	snapshot := shared.DeepCopy()
	e := newSyncerEnv(t, SyncerOptions{GetPod: func(ns, name string) (*v1.Pod, bool) { return shared, true }}, pod)
	e.m.SetPodStatus(pod, runningStatus(t0))
	if n := countVerb(e.round(t, false), "patch/status"); n != 1 {
		t.Fatalf("patches = %d, want 1", n)
	}
	e.m.SetPodStatus(pod, terminatedStatus(v1.PodFailed, 1))
	e.round(t, false)
	e.round(t, true)
	if !reflect.DeepEqual(shared, snapshot) {
		t.Errorf("the cached pod changed:\n got %+v\nwant %+v", shared, snapshot)
	}
}

func TestSyncerForgetsRemovedPods(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	e.m.SetPodStatus(pod, runningStatus(t0))
	e.round(t, false)
	if len(e.s.records) != 1 {
		t.Fatalf("records = %d, want 1", len(e.s.records))
	}
	e.m.RemovePod(pod.UID)
	if acts := e.round(t, false); len(acts) != 0 {
		t.Errorf("removed pod: %v", verbs(acts))
	}
	if len(e.s.records) != 0 {
		t.Errorf("records = %d after the pod was removed, want 0", len(e.s.records))
	}
}

func TestMergeStatus(t *testing.T) {
	old := metav1.NewTime(t0.Add(-time.Hour))
	now := metav1.NewTime(t0)
	tests := []struct {
		name  string
		api   v1.PodStatus
		cur   v1.PodStatus
		check func(t *testing.T, got v1.PodStatus)
	}{
		{
			name: "unchanged condition keeps the API's transition time",
			api:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: old}}},
			cur:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}}},
			check: func(t *testing.T, got v1.PodStatus) {
				if c := findCondition(got.Conditions, v1.PodReady); c == nil || !c.LastTransitionTime.Equal(&old) {
					t.Errorf("Ready = %+v, want transition %v", c, old)
				}
			},
		},
		{
			name: "changed condition takes the new transition time",
			api:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: old}}},
			cur:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}}},
			check: func(t *testing.T, got v1.PodStatus) {
				if c := findCondition(got.Conditions, v1.PodReady); c == nil || c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&now) {
					t.Errorf("Ready = %+v, want True at %v", c, now)
				}
			},
		},
		{
			name: "foreign conditions stay as the API has them, in order",
			api: v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: "example.com/Gate", Status: v1.ConditionFalse},
				{Type: v1.PodReady, Status: v1.ConditionFalse},
			}},
			cur: v1.PodStatus{Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue},
				{Type: "example.com/Gate", Status: v1.ConditionTrue},
			}},
			check: func(t *testing.T, got v1.PodStatus) {
				if len(got.Conditions) != 2 || got.Conditions[0].Type != "example.com/Gate" || got.Conditions[0].Status != v1.ConditionFalse || got.Conditions[1].Status != v1.ConditionTrue {
					t.Errorf("conditions = %+v, want API's Gate=False then Ready=True", got.Conditions)
				}
			},
		},
		{
			name: "disruption target from the API is kept when the agent has none",
			api:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "PreemptionByScheduler"}}},
			cur:  v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
			check: func(t *testing.T, got v1.PodStatus) {
				if c := findCondition(got.Conditions, v1.DisruptionTarget); c == nil || c.Reason != "PreemptionByScheduler" {
					t.Errorf("conditions = %+v, want the disruption target kept", got.Conditions)
				}
			},
		},
		{
			name: "terminal phase in the API wins",
			api:  v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "low memory"},
			cur:  v1.PodStatus{Phase: v1.PodRunning},
			check: func(t *testing.T, got v1.PodStatus) {
				if got.Phase != v1.PodFailed || got.Reason != "Evicted" || got.Message != "low memory" {
					t.Errorf("phase = %q %q %q, want Failed Evicted", got.Phase, got.Reason, got.Message)
				}
			},
		},
		{
			name: "non-terminal phase in the API is replaced",
			api:  v1.PodStatus{Phase: v1.PodRunning},
			cur:  v1.PodStatus{Phase: v1.PodSucceeded},
			check: func(t *testing.T, got v1.PodStatus) {
				if got.Phase != v1.PodSucceeded {
					t.Errorf("phase = %q, want Succeeded", got.Phase)
				}
			},
		},
		{
			name: "fields of other components are kept",
			api:  v1.PodStatus{NominatedNodeName: "node-b", QOSClass: v1.PodQOSBurstable, ObservedGeneration: 3, StartTime: &old},
			cur:  v1.PodStatus{StartTime: &now},
			check: func(t *testing.T, got v1.PodStatus) {
				if got.NominatedNodeName != "node-b" || got.QOSClass != v1.PodQOSBurstable || got.ObservedGeneration != 3 {
					t.Errorf("got %+v, want nominated node, QoS class and generation kept", got)
				}
				if got.StartTime == nil || !got.StartTime.Equal(&old) {
					t.Errorf("startTime = %v, want %v", got.StartTime, old)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := tt.api.DeepCopy()
			got := mergeStatus(&tt.api, &tt.cur)
			tt.check(t, got)
			if !statusEqual(api, &tt.api) {
				t.Errorf("mergeStatus modified the API status")
			}
		})
	}
}

func TestStatusPatchOnlyUIDWhenEqual(t *testing.T) {
	st := runningStatus(t0)
	patch, err := statusPatch("uid-9", &st, &st)
	if err != nil {
		t.Fatal(err)
	}
	if string(patch) != `{"metadata":{"uid":"uid-9"}}` {
		t.Errorf("patch = %s, want only the UID precondition", patch)
	}
}

func TestSyncerTriggerStartsRound(t *testing.T) {
	deleted := metav1.NewTime(t0)
	pod := boundPod("default", "web", "uid-1")
	pod.DeletionTimestamp = &deleted
	var (
		mu        sync.Mutex
		canDelete bool
	)
	e := newSyncerEnv(t, SyncerOptions{CanDelete: func(types.UID) bool {
		mu.Lock()
		defer mu.Unlock()
		return canDelete
	}}, pod)
	e.m.SetPodStatus(pod, terminatedStatus(v1.PodSucceeded, 0))
	rounds := make(chan struct{}, 10)
	e.s.afterRound = func() { rounds <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.s.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	<-rounds // the initial round sends the status, does not delete
	if _, ok := e.m.GetPodStatus(pod.UID); !ok {
		t.Fatalf("pod removed before the workers finished")
	}

	mu.Lock()
	canDelete = true
	mu.Unlock()
	e.s.Trigger()
	waitForWaiters(t, e.clk, 2)
	e.clk.Step(DefaultBatchPeriod)
	<-rounds
	if _, ok := e.m.GetPodStatus(pod.UID); ok {
		t.Errorf("pod still in the Manager after a triggered round")
	}
	if n := countVerb(e.kube.Actions(), "delete"); n != 1 {
		t.Errorf("deletes = %d, want 1", n)
	}
}

// kubelet_pod_status_sync_duration_seconds runs from the oldest change not
// yet written to the write that carries it.
func TestSyncerStatusSyncDuration(t *testing.T) {
	pod := boundPod("default", "web", "uid-1")
	e := newSyncerEnv(t, SyncerOptions{}, pod)
	observed := func() (uint64, float64) {
		var m dto.Metric
		if err := metrics.PodStatusSyncDuration.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	n0, s0 := observed()

	e.m.SetPodStatus(pod, runningStatus(t0))
	e.clk.Step(time.Second)
	notReady := runningStatus(t0)
	notReady.ContainerStatuses[0].Ready = false
	e.m.SetPodStatus(pod, notReady) // coalesced with the first change
	e.clk.Step(500 * time.Millisecond)
	e.round(t, false)
	n, sum := observed()
	if n-n0 != 1 || sum-s0 != 1.5 {
		t.Errorf("after the first write: %d observations, %v s; want 1, 1.5 s", n-n0, sum-s0)
	}
	e.clk.Step(time.Minute)
	e.round(t, false) // nothing to write: nothing observed
	e.m.SetPodStatus(pod, runningStatus(t0))
	e.clk.Step(250 * time.Millisecond)
	e.round(t, false)
	n, sum = observed()
	if n-n0 != 2 || sum-s0 != 1.75 {
		t.Errorf("after the second write: %d observations, %v s; want 2, 1.75 s", n-n0, sum-s0)
	}
}

// TestSyncerRoundCostDoesNotGrowWithPods: a round started by one pod's
// change copies only that pod; the others, already written, cost a look
// at their version, and, while they are being deleted but their workers
// have not finished, a look at whether they may be deleted. The
// allocations of such a round with 400 pods stay within a small margin of
// those with 4 (copying every pod and status, as a full round does, takes
// thousands more).
func TestSyncerRoundCostDoesNotGrowWithPods(t *testing.T) {
	allocs := func(n int, deleting bool) float64 {
		var objs []runtime.Object
		var pods []*v1.Pod
		for i := range n {
			p := boundPod("default", fmt.Sprintf("p%d", i), fmt.Sprintf("uid-%d", i))
			if deleting {
				p.DeletionTimestamp = &metav1.Time{Time: t0}
			}
			objs, pods = append(objs, p), append(pods, p)
		}
		var opts SyncerOptions
		if deleting {
			opts.CanDelete = func(types.UID) bool { return false }
		}
		e := newSyncerEnv(t, opts, objs...)
		for _, p := range pods {
			e.m.SetPodStatus(p, runningStatus(t0))
		}
		e.round(t, false)
		restarts := int32(0)
		return testing.AllocsPerRun(20, func() {
			restarts++
			st := runningStatus(t0)
			st.ContainerStatuses[0].RestartCount = restarts
			e.m.SetPodStatus(pods[0], st)
			e.s.syncRound(context.Background(), false)
		})
	}
	for _, deleting := range []bool{false, true} {
		few, many := allocs(4, deleting), allocs(400, deleting)
		if many > few+100 {
			t.Errorf("deleting=%v: allocations of a round after one change: %.0f with 400 pods, %.0f with 4; want about the same", deleting, many, few)
		}
	}
}
