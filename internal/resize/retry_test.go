package resize

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeMetrics records what the Manager reports.
type fakeMetrics struct {
	mu         sync.Mutex
	requested  []Change
	durations  []bool
	infeasible []string
	accepted   []string
	deferred   int
	infeas     int
	inProgress int
}

func newFakeMetrics() *fakeMetrics { return &fakeMetrics{} }

func (f *fakeMetrics) RequestedResize(r, req, op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requested = append(f.requested, Change{r, req, op})
}

func (f *fakeMetrics) ResizeDuration(_ time.Duration, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.durations = append(f.durations, ok)
}

func (f *fakeMetrics) InfeasibleResize(d string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.infeasible = append(f.infeasible, d)
}

func (f *fakeMetrics) DeferredAccepted(tr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = append(f.accepted, tr)
}

func (f *fakeMetrics) SetPending(d, i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deferred, f.infeas = d, i
}

func (f *fakeMetrics) SetInProgress(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inProgress = n
}

func (f *fakeMetrics) snapshot() fakeMetrics {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeMetrics{
		requested: slices.Clone(f.requested), durations: slices.Clone(f.durations), infeasible: slices.Clone(f.infeasible),
		accepted: slices.Clone(f.accepted), deferred: f.deferred, infeas: f.infeas, inProgress: f.inProgress,
	}
}

// fakeMemory reports usages by container ID, and "pod" for the pod
// cgroup; a missing entry cannot be read.
type fakeMemory struct {
	mu    sync.Mutex
	usage map[string]int64
}

func (f *fakeMemory) PodMemoryUsage(_ context.Context, _ *v1.Pod) (int64, error) {
	return f.get("pod")
}

func (f *fakeMemory) ContainerMemoryUsage(_ context.Context, _ *v1.Pod, id string) (int64, error) {
	return f.get(id)
}

func (f *fakeMemory) get(k string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.usage[k]
	if !ok {
		return 0, fmt.Errorf("no usage for %s", k)
	}
	return v, nil
}

// podNamed is a one-container pod with its own UID.
func podNamed(uid string, r res4) *v1.Pod {
	p := mkPod(ctr{name: "app", r: r})
	p.UID, p.Name = types.UID(uid), uid
	return p
}

// mustSync syncs pod as its worker would, with its spec now what the API
// says.
func (h *harness) mustSync(t *testing.T, pod *v1.Pod) {
	t.Helper()
	h.set(pod)
	if _, err := h.sync(t, pod); err != nil {
		t.Fatalf("sync %s: %v", pod.Name, err)
	}
}

// drain returns the UIDs asked to sync so far.
func (h *harness) drain() []types.UID {
	var out []types.UID
	for {
		select {
		case uid := <-h.resynced:
			out = append(out, uid)
		default:
			return out
		}
	}
}

func allocatedCPU(h *harness, uid types.UID) string {
	a, _ := h.store.Get(uid)
	q := a["app"].Requests[v1.ResourceCPU]
	return q.String()
}

// A deferred resize is accepted as soon as another pod's resize lowers
// its requests (upstream's pod_resized trigger), without the deferred
// pod's own sync, and its worker is asked to sync to apply it.
func TestRetryWhenAnotherResizeLowersRequests(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	other := podNamed("other", res4{"1", "1", "64Mi", "128Mi"})
	h.start(t, other)
	pod := podNamed("pod", res4{"100m", "200m", "64Mi", "128Mi"})
	h.start(t, pod)

	big := resized(pod, "app", res4{"1500m", "2", "64Mi", "128Mi"})
	h.mustSync(t, big)
	if c := condition(h, big, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred {
		t.Fatalf("PodResizePending = %+v, want Deferred", c)
	}
	if m := h.metrics.snapshot(); m.deferred != 1 || m.infeas != 0 {
		t.Errorf("pending gauges deferred=%d infeasible=%d, want 1 0", m.deferred, m.infeas)
	}
	h.drain()

	small := resized(other, "app", res4{"200m", "1", "64Mi", "128Mi"})
	h.mustSync(t, small)
	if got := allocatedCPU(h, pod.UID); got != "1500m" {
		t.Errorf("allocated cpu of the deferred pod = %s, want 1500m once the other pod shrank", got)
	}
	if got := h.drain(); !slices.Equal(got, []types.UID{pod.UID}) {
		t.Errorf("asked to sync %v, want [%s]", got, pod.UID)
	}
	if c := condition(h, big, v1.PodResizePending); c != nil {
		t.Errorf("PodResizePending stayed: %+v", c)
	}
	if c := condition(h, big, v1.PodResizeInProgress); c == nil {
		t.Error("no PodResizeInProgress for the accepted resize before its sync applies it")
	}
	m := h.metrics.snapshot()
	if !slices.Equal(m.accepted, []string{TriggerPodResized}) {
		t.Errorf("deferred accepted by %v, want [%s]", m.accepted, TriggerPodResized)
	}
	if m.deferred != 0 || m.inProgress != 1 {
		t.Errorf("gauges deferred=%d inProgress=%d, want 0 1", m.deferred, m.inProgress)
	}
	// The pod's own sync applies it.
	h.mustSync(t, big)
	if c := condition(h, big, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress after the sync applied it: %+v", c)
	}
}

// waitTimer waits until Run waits on the fake clock.
func waitTimer(h *harness) {
	for !h.clock.HasWaiters() {
		runtime.Gosched()
	}
}

// A pod that stops for good (Forget) frees what it held: Run retries the
// deferred resizes at once (pod_terminated), and the others periodically:
// the first after 30 s, then every 3 minutes (periodic_retry).
func TestRetryOnTerminationAndPeriodically(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	other := podNamed("other", res4{"1", "1", "64Mi", "128Mi"})
	h.start(t, other)
	pod := podNamed("pod", res4{"100m", "200m", "64Mi", "128Mi"})
	h.start(t, pod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	big := resized(pod, "app", res4{"1500m", "2", "64Mi", "128Mi"})
	h.mustSync(t, big)
	h.drain()
	h.m.Forget(other.UID)
	if got := <-h.resynced; got != pod.UID {
		t.Fatalf("asked to sync %s, want %s", got, pod.UID)
	}
	if got := allocatedCPU(h, pod.UID); got != "1500m" {
		t.Errorf("allocated cpu = %s after the other pod stopped, want 1500m", got)
	}
	if m := h.metrics.snapshot(); !slices.Equal(m.accepted, []string{TriggerPodTerminated}) {
		t.Errorf("deferred accepted by %v, want [%s]", m.accepted, TriggerPodTerminated)
	}

	// A third pod's resize is deferred; room appears without any event
	// (the node's allocatable is not watched): the periodic retry takes it.
	third := podNamed("third", res4{"100m", "200m", "64Mi", "128Mi"})
	h.start(t, third)
	grow := resized(third, "app", res4{"600m", "1", "64Mi", "128Mi"})
	h.mustSync(t, grow)
	if c := condition(h, grow, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred {
		t.Fatalf("PodResizePending = %+v, want Deferred", c)
	}
	small := resized(big, "app", res4{"1", "2", "64Mi", "128Mi"})
	h.set(small) // only its spec changes: no sync of it, no retry
	if err := h.store.Set(small.UID, FromPod(small)); err != nil {
		t.Fatal(err)
	}
	waitTimer(h)
	h.clock.Step(retryDelay - time.Second)
	if got := h.drain(); len(got) != 0 {
		t.Errorf("asked to sync %v before the period ran out", got)
	}
	h.clock.Step(time.Second)
	if got := <-h.resynced; got != third.UID {
		t.Fatalf("asked to sync %s, want %s", got, third.UID)
	}
	if got := allocatedCPU(h, third.UID); got != "600m" {
		t.Errorf("allocated cpu = %s after the periodic retry, want 600m", got)
	}
	if m := h.metrics.snapshot(); !slices.Equal(m.accepted, []string{TriggerPodTerminated, TriggerPeriodic}) {
		t.Errorf("deferred accepted by %v", m.accepted)
	}
}

// The first periodic retry comes 30 s after Run starts.
func TestRetryFirstPeriod(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	other := podNamed("other", res4{"1", "1", "64Mi", "128Mi"})
	h.start(t, other)
	pod := podNamed("pod", res4{"100m", "200m", "64Mi", "128Mi"})
	h.start(t, pod)
	h.mustSync(t, resized(pod, "app", res4{"1500m", "2", "64Mi", "128Mi"}))
	// The other pod's allocation shrinks behind the Manager's back.
	small := resized(other, "app", res4{"500m", "1", "64Mi", "128Mi"})
	h.set(small)
	if err := h.store.Set(small.UID, FromPod(small)); err != nil {
		t.Fatal(err)
	}
	h.drain()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	waitTimer(h)
	h.clock.Step(initialRetryDelay - time.Second)
	if !h.clock.HasWaiters() || len(h.drain()) != 0 {
		t.Fatal("retried before 30 s")
	}
	h.clock.Step(time.Second)
	if got := <-h.resynced; got != pod.UID {
		t.Fatalf("asked to sync %s, want %s", got, pod.UID)
	}
	if got := allocatedCPU(h, pod.UID); got != "1500m" {
		t.Errorf("allocated cpu = %s, want 1500m", got)
	}
}

// When freed room fits only one of several deferred resizes, upstream's
// order decides which: higher pod priority first, then Guaranteed before
// Burstable, then the one deferred longest.
func TestRetryPriorityOrder(t *testing.T) {
	prio := func(n int32) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.Priority = &n } }
	for _, tc := range []struct {
		name string
		// a and b are deferred in this order (a first, one second apart).
		a, b   res4
		ma, mb func(*v1.Pod)
		want   string
	}{
		{name: "the longest deferred first", a: res4{"900m", "1", "64Mi", "128Mi"}, b: res4{"900m", "1", "64Mi", "128Mi"}, want: "a"},
		{name: "higher priority first", a: res4{"900m", "1", "64Mi", "128Mi"}, b: res4{"900m", "1", "64Mi", "128Mi"}, ma: prio(1), mb: prio(100), want: "b"},
		{name: "guaranteed before burstable", a: res4{"900m", "1", "64Mi", "128Mi"}, b: res4{"900m", "900m", "128Mi", "128Mi"}, want: "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, list("2", "4Gi"))
			hog := podNamed("hog", res4{"1500m", "", "64Mi", ""})
			h.start(t, hog)
			start := func(name string, r res4, mut func(*v1.Pod)) *v1.Pod {
				p := podNamed(name, r)
				p.Spec.Containers[0].Resources = res4{"100m", r.cpuLim, r.memReq, r.memLim}.reqs()
				if r.cpuLim == r.cpuReq && r.memLim == r.memReq {
					p.Spec.Containers[0].Resources = res4{"100m", "100m", r.memReq, r.memLim}.reqs()
				}
				if mut != nil {
					mut(p)
				}
				h.start(t, p)
				return p
			}
			a, b := start("a", tc.a, tc.ma), start("b", tc.b, tc.mb)
			// Both fit the node alone but not beside the hog: deferred.
			h.mustSync(t, resized(a, "app", tc.a))
			h.clock.Step(time.Second)
			h.mustSync(t, resized(b, "app", tc.b))
			for _, p := range []*v1.Pod{a, b} {
				if c := condition(h, p, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred {
					t.Fatalf("%s: PodResizePending = %+v, want Deferred", p.Name, c)
				}
			}
			h.drain()
			// The hog shrinks to leave room for one of them.
			h.mustSync(t, resized(hog, "app", res4{"700m", "", "64Mi", ""}))
			got := h.drain()
			if len(got) != 1 || string(got[0]) != tc.want {
				t.Fatalf("asked to sync %v, want only %s", got, tc.want)
			}
			loser := a
			if tc.want == "a" {
				loser = b
			}
			if c := condition(h, loser, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred {
				t.Errorf("%s: PodResizePending = %+v, want still Deferred", loser.Name, c)
			}
		})
	}
}

// Lowering a memory limit below what is used now fails as upstream
// reports it, without writing the limit, and is retried; once the usage
// is below the new limit it goes through.
func TestMemoryUsageBeforeLoweringALimit(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := podNamed("pod", res4{"100m", "200m", "64Mi", "256Mi"})
	h.start(t, pod)
	cid := id(pod, "app")
	h.mem.usage[cid] = 200 << 20
	h.mem.usage["pod"] = 200 << 20
	down := resized(pod, "app", res4{"100m", "200m", "64Mi", "128Mi"})
	h.set(down)
	_, err := h.sync(t, down)
	want := fmt.Sprintf(`attempting to set container "app" memory limit (%d) below current usage (%d)`, 128<<20, 200<<20)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("sync = %v, want %q", err, want)
	}
	if len(h.node.log) != 0 {
		t.Errorf("wrote %v although the usage is above the new limit", h.node.log)
	}
	c := condition(h, down, v1.PodResizeInProgress)
	if c == nil || c.Reason != ReasonError || !strings.Contains(c.Message, want) {
		t.Fatalf("PodResizeInProgress = %+v, want reason Error with %q", c, want)
	}

	// The container fits, the pod as a whole does not (another process
	// in the pod cgroup, such as the sandbox's, uses the rest).
	h.mem.usage[cid] = 100 << 20
	_, err = h.sync(t, down)
	wantPod := "Aborting attempt to set pod memory limit less than current memory usage for pod pod"
	if err == nil || !strings.Contains(err.Error(), wantPod) {
		t.Fatalf("sync = %v, want %q", err, wantPod)
	}
	if slices.Contains(h.node.log, "pod memory") {
		t.Errorf("the pod cgroup's limit was written: %v", h.node.log)
	}

	h.mem.usage["pod"] = 110 << 20
	if _, err := h.sync(t, down); err != nil {
		t.Fatalf("sync below the usage: %v", err)
	}
	// The container already runs at its new limit: the pod cgroup, left
	// behind by the failed attempt, is written all the same.
	if !slices.Contains(h.node.log, "pod memory") {
		t.Errorf("the pod cgroup's memory limit was not written after the failed attempt: %v", h.node.log)
	}
	if got := h.node.resources[cid].GetMemoryLimitInBytes(); got != 128<<20 {
		t.Errorf("memory limit %d, want 128Mi", got)
	}
	if c := condition(h, down, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress stayed: %+v", c)
	}
	m := h.metrics.snapshot()
	if !slices.Equal(m.durations, []bool{false, false, true}) {
		t.Errorf("resize duration observations (success) %v, want [false false true]", m.durations)
	}

	// A usage that cannot be read leaves the check to the kernel for a
	// container.
	delete(h.mem.usage, cid)
	lower := resized(down, "app", res4{"100m", "200m", "64Mi", "120Mi"})
	h.mem.usage["pod"] = 0
	h.set(lower)
	if _, err := h.sync(t, lower); err != nil {
		t.Fatalf("sync without a readable container usage: %v", err)
	}
}

// Each requested change is counted once, by resource, requirement and
// operation; an infeasible resize is counted with upstream's
// reason_detail.
func TestResizeMetrics(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := podNamed("pod", res4{"100m", "", "64Mi", "128Mi"})
	h.start(t, pod)
	next := resized(pod, "app", res4{"200m", "1", "", "64Mi"})
	h.mustSync(t, next)
	h.mustSync(t, next)
	want := []Change{{"cpu", "requests", "increase"}, {"cpu", "limits", "add"}, {"memory", "requests", "remove"}, {"memory", "limits", "decrease"}}
	if m := h.metrics.snapshot(); !slices.Equal(m.requested, want) {
		t.Errorf("requested %v, want %v", m.requested, want)
	}
	huge := resized(next, "app", res4{"3", "4", "", "64Mi"})
	h.mustSync(t, huge)
	h.mustSync(t, huge)
	m := h.metrics.snapshot()
	if !slices.Equal(m.infeasible, []string{DetailInsufficientAllocatable}) {
		t.Errorf("infeasible %v, want one %s", m.infeasible, DetailInsufficientAllocatable)
	}
	if m.infeas != 1 || m.deferred != 0 {
		t.Errorf("pending gauges deferred=%d infeasible=%d, want 0 1", m.deferred, m.infeas)
	}
	h.m.Forget(pod.UID)
	if m := h.metrics.snapshot(); m.infeas != 0 || m.inProgress != 0 {
		t.Errorf("gauges after Forget: infeasible=%d inProgress=%d", m.infeas, m.inProgress)
	}
}

func TestChanges(t *testing.T) {
	a := Allocation{"c": res4{"100m", "1", "64Mi", "128Mi"}.reqs(), "gone": res4{"1", "", "", ""}.reqs()}
	for _, tc := range []struct {
		name string
		next Allocation
		want []Change
	}{
		{"same", Allocation{"c": res4{"100m", "1", "64Mi", "128Mi"}.reqs()}, nil},
		{"same value, other unit", Allocation{"c": res4{"0.1", "1000m", "64Mi", "134217728"}.reqs()}, nil},
		{"all four", Allocation{"c": res4{"", "2", "32Mi", "0"}.reqs()}, []Change{
			{"cpu", "requests", "remove"}, {"cpu", "limits", "increase"}, {"memory", "requests", "decrease"}, {"memory", "limits", "remove"}}},
		{"a new container is not a resize", Allocation{"new": res4{"1", "", "", ""}.reqs()}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Changes(a, tc.next); !slices.Equal(got, tc.want) {
				t.Errorf("Changes = %v, want %v", got, tc.want)
			}
		})
	}
}
