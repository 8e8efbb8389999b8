package eviction

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podworker"
)

type fakeSummary struct {
	mu   sync.Mutex
	s    *statsapi.Summary
	err  error
	full int // Summary calls: every pod's stats
}

func (f *fakeSummary) Summary(context.Context, bool) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.full++
	return f.s, f.err
}

// SummaryOf is the summary with the pods pick leaves out dropped.
func (f *fakeSummary) SummaryOf(_ context.Context, pick func(types.UID) bool) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.s == nil || f.err != nil {
		return f.s, f.err
	}
	s := *f.s
	s.Pods = nil
	for _, ps := range f.s.Pods {
		if pick != nil && pick(types.UID(ps.PodRef.UID)) {
			s.Pods = append(s.Pods, ps)
		}
	}
	return &s, nil
}

// set makes the node's memory available and the pods' usage.
func (f *fakeSummary) set(availMi uint64, use map[string]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{AvailableBytes: u64(availMi << 20), WorkingSetBytes: u64((1024 - availMi) << 20)},
	}}
	for _, ps := range usageStats(use) {
		s.Pods = append(s.Pods, ps)
	}
	f.s = s
}

type fakePods []*v1.Pod

func (f fakePods) Pods() []*v1.Pod { return f }

type fakeWorkers struct {
	mu      sync.Mutex
	states  map[types.UID]podworker.State
	cleaned map[types.UID]bool
	updates []podworker.Update
}

func (f *fakeWorkers) Cleaned(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, known := f.states[uid]
	return !known || f.cleaned[uid]
}

// clean marks a pod terminated and cleaned up.
func (f *fakeWorkers) clean(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[uid] = podworker.StateTerminated
	f.cleaned[uid] = true
}

func (f *fakeWorkers) State(uid types.UID) (podworker.State, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.states[uid]
	return st, ok
}

func (f *fakeWorkers) Update(u podworker.Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, u)
	f.states[u.Pod.UID] = podworker.StateTerminating
}

func (f *fakeWorkers) set(uid types.UID, st podworker.State) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.states[uid] = st
}

type fakeStatuses struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.m[uid]
	return st, ok
}

func (f *fakeStatuses) SetPodStatus(pod *v1.Pod, st v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[pod.UID] = st
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (f *fakeRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := ""
	switch o := obj.(type) {
	case *v1.Pod:
		name = "pod/" + o.Name
	case *v1.ObjectReference:
		name = o.Kind + "/" + o.Name
	}
	f.events = append(f.events, fmt.Sprintf("%s %s %s: %s", name, typ, reason, fmt.Sprintf(format, args...)))
}

type harness struct {
	t       *testing.T
	clk     *testclock.FakeClock
	summary *fakeSummary
	workers *fakeWorkers
	status  *fakeStatuses
	rec     *fakeRecorder
	m       *Manager
}

func newHarness(t *testing.T, cfg Config, transition time.Duration, pods ...*v1.Pod) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		clk:     testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		summary: &fakeSummary{},
		workers: &fakeWorkers{states: map[types.UID]podworker.State{}, cleaned: map[types.UID]bool{}},
		status:  &fakeStatuses{m: map[types.UID]v1.PodStatus{}},
		rec:     &fakeRecorder{},
	}
	for _, p := range pods {
		h.workers.states[p.UID] = podworker.StateSyncing
	}
	h.m = New(Options{
		Thresholds:        mustThresholds(t, cfg),
		TransitionPeriod:  transition,
		MaxPodGracePeriod: 20,
		Summary:           h.summary,
		Pods:              fakePods(pods),
		Workers:           h.workers,
		Statuses:          h.status,
		Recorder:          h.rec,
		Node:              &v1.ObjectReference{Kind: "Node", Name: "n1"},
		Clock:             h.clk,
	})
	return h
}

func (h *harness) pass() {
	h.t.Helper()
	if err := h.m.Synchronize(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) killed() []string {
	h.workers.mu.Lock()
	defer h.workers.mu.Unlock()
	var out []string
	for _, u := range h.workers.updates {
		g := "nil"
		if u.GracePeriod != nil {
			g = fmt.Sprint(*u.GracePeriod)
		}
		out = append(out, fmt.Sprintf("%s/%s/keep=%v/grace=%s", u.Pod.Name, u.Type, u.Keep, g))
	}
	return out
}

func TestHardThresholdEvictsOnePodAtATime(t *testing.T) {
	hog, calm, crit := testPod("hog", 0, "10Mi"), testPod("calm", 0, "500Mi"), testPod("crit", systemCriticalPriority, "")
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, 5*time.Minute, crit, calm, hog)
	before := testutil.ToFloat64(metrics.Evictions.WithLabelValues("memory.available"))

	h.summary.set(500, map[string]uint64{"hog": 300 << 20, "calm": 100 << 20, "crit": 900 << 20})
	h.pass()
	if got := h.killed(); len(got) != 0 || h.m.MemoryPressure() {
		t.Fatalf("above the threshold: kills %v, memory pressure %v", got, h.m.MemoryPressure())
	}

	h.summary.set(50, map[string]uint64{"hog": 300 << 20, "calm": 100 << 20, "crit": 900 << 20})
	h.clk.Step(10 * time.Second)
	h.pass()
	if got := fmt.Sprint(h.killed()); got != "[hog/kill/keep=true/grace=1]" {
		t.Fatalf("kills = %s, want the hog with grace 1 (critical pod spared)", got)
	}
	if !h.m.MemoryPressure() || h.m.DiskPressure() || h.m.PIDPressure() {
		t.Errorf("pressure = %v/%v/%v, want memory only", h.m.MemoryPressure(), h.m.DiskPressure(), h.m.PIDPressure())
	}
	st, _ := h.status.GetPodStatus("hog")
	wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. " +
		"Container c was using 300Mi, request is 10Mi, has larger consumption of memory. "
	if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != wantMsg {
		t.Errorf("status = %s %q %q, want Failed Evicted %q", st.Phase, st.Reason, st.Message, wantMsg)
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Type != v1.DisruptionTarget || st.Conditions[0].Reason != "TerminationByKubelet" {
		t.Errorf("conditions = %+v, want DisruptionTarget by the kubelet", st.Conditions)
	}
	wantEvents := "[Node/n1 Warning EvictionThresholdMet: Attempting to reclaim memory pod/hog Warning Evicted: " + wantMsg + "]"
	if got := fmt.Sprint(h.rec.events); got != wantEvents {
		t.Errorf("events = %s\nwant %s", got, wantEvents)
	}
	if got := testutil.ToFloat64(metrics.Evictions.WithLabelValues("memory.available")) - before; got != 1 {
		t.Errorf("kubelet_evictions{memory.available} grew by %v, want 1", got)
	}

	// The hog is still stopping: no second eviction.
	h.clk.Step(time.Second)
	h.pass()
	if got := len(h.killed()); got != 1 {
		t.Fatalf("evicted %d pods while the first one stops, want 1", got)
	}
	// Stopped but its volumes and cgroup not yet released: still waiting.
	h.workers.set("hog", podworker.StateTerminated)
	h.clk.Step(time.Second)
	h.pass()
	if got := len(h.killed()); got != 1 {
		t.Fatalf("evicted %d pods before the first one was cleaned up, want 1", got)
	}
	// Cleaned up: the next decision waits for fresh stats.
	h.workers.clean("hog")
	h.clk.Step(time.Second)
	h.pass()
	if got := len(h.killed()); got != 1 {
		t.Fatalf("evicted %d pods right after the clean-up, want 1", got)
	}
	h.clk.Step(settlePeriod)
	h.pass()
	if got := fmt.Sprint(h.killed()); got != "[hog/kill/keep=true/grace=1 calm/kill/keep=true/grace=1]" {
		t.Fatalf("kills = %s, want calm next", got)
	}
	// A victim that does not stop is waited for at most the cleanup timeout.
	h.clk.Step(DefaultCleanupTimeout - time.Second)
	h.pass()
	if got := len(h.killed()); got != 2 {
		t.Fatalf("evicted %d pods before the cleanup timeout, want 2", got)
	}
	h.clk.Step(2 * time.Second)
	h.pass()
	// Only the critical pod is left: it is never evicted.
	if got := len(h.killed()); got != 2 {
		t.Fatalf("evicted %d pods, want 2 (critical pod spared): %v", got, h.killed())
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	pod := testPod("p", 0, "")
	long := int64(60)
	pod.Spec.TerminationGracePeriodSeconds = &long
	h := newHarness(t, Config{
		Soft:            map[string]string{"memory.available": "300Mi"},
		SoftGracePeriod: map[string]string{"memory.available": "1m"},
	}, 0, pod)
	h.summary.set(200, map[string]uint64{"p": 100 << 20})
	h.pass()
	if !h.m.MemoryPressure() {
		t.Errorf("no memory pressure while a soft threshold is met")
	}
	h.clk.Step(59 * time.Second)
	h.pass()
	if got := h.killed(); len(got) != 0 {
		t.Fatalf("evicted within the grace period: %v", got)
	}
	h.clk.Step(time.Second)
	h.pass()
	// Soft: evictionMaxPodGracePeriod (20) caps the pod's own 60.
	if got := fmt.Sprint(h.killed()); got != "[p/kill/keep=true/grace=20]" {
		t.Fatalf("kills = %s, want p with grace 20", got)
	}
}

func TestPressureTransitionPeriodAndMinimumReclaim(t *testing.T) {
	pods := []*v1.Pod{testPod("a", 0, ""), testPod("b", 0, "")}
	h := newHarness(t, Config{
		Hard:           map[string]string{"memory.available": "100Mi"},
		MinimumReclaim: map[string]string{"memory.available": "100Mi"},
	}, time.Minute, pods...)
	use := map[string]uint64{"a": 300 << 20, "b": 200 << 20}
	h.summary.set(90, use)
	h.pass()
	if got := len(h.killed()); got != 1 {
		t.Fatalf("evicted %d, want 1", got)
	}
	h.workers.clean("a")
	// Above the threshold but within the minimum reclaim: still met.
	h.summary.set(150, use)
	h.clk.Step(time.Second)
	h.pass() // sees a cleaned up
	h.clk.Step(settlePeriod)
	h.pass()
	if got := fmt.Sprint(h.killed()); got != "[a/kill/keep=true/grace=1 b/kill/keep=true/grace=1]" {
		t.Fatalf("kills = %s, want b evicted within the minimum reclaim", got)
	}
	// Recovered past the minimum reclaim: no more evictions, but the
	// condition stays for the transition period.
	h.summary.set(500, use)
	h.clk.Step(time.Second)
	h.pass()
	if !h.m.MemoryPressure() {
		t.Errorf("memory pressure dropped before the transition period")
	}
	// Last observed a second before the recovery: held 58 s more.
	h.clk.Step(58 * time.Second)
	h.pass()
	if !h.m.MemoryPressure() {
		t.Errorf("memory pressure dropped before the transition period")
	}
	h.clk.Step(time.Second)
	h.pass()
	if h.m.MemoryPressure() {
		t.Errorf("memory pressure kept after the transition period")
	}
	if r := h.m.Admit(testPod("be", 0, "")); !r.Admit {
		t.Errorf("best-effort pod refused without pressure: %s", r.Message)
	}
	if got := len(h.killed()); got != 2 {
		t.Errorf("evicted %d, want 2", got)
	}
}

func TestAdmitFollowsThePressure(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, time.Minute)
	h.summary.set(50, nil)
	h.pass()
	r := h.m.Admit(testPod("be", 0, ""))
	if r.Admit || r.Reason != "Evicted" || r.Message != "The node had condition: [MemoryPressure]. " {
		t.Errorf("best effort under memory pressure: %+v", r)
	}
	if r := h.m.Admit(testPod("bu", 0, "10Mi")); !r.Admit {
		t.Errorf("burstable refused under memory pressure: %+v", r)
	}
}

func TestSummaryErrorSkipsThePass(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, time.Minute, testPod("a", 0, ""))
	h.summary.err = fmt.Errorf("runtime down")
	if err := h.m.Synchronize(context.Background()); err == nil {
		t.Fatal("Synchronize succeeded without stats")
	}
	if len(h.killed()) != 0 || h.m.MemoryPressure() {
		t.Errorf("acted without stats")
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	for _, cfg := range []Config{{}, {Hard: map[string]string{"memory.available": "100Mi"}}} {
		h := newHarness(t, cfg, 0)
		h.summary.set(500, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.m.Run(ctx) }()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
	}
}

func TestVictimForgottenOnceStoppedWithoutPressure(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, 0, testPod("a", 0, ""))
	h.summary.set(50, map[string]uint64{"a": 1 << 20})
	h.pass()
	if h.m.victim != "a" {
		t.Fatalf("victim = %q, want a", h.m.victim)
	}
	h.summary.set(500, nil)
	h.clk.Step(time.Second)
	h.pass()
	if h.m.victim != "a" {
		t.Errorf("victim forgotten while it stops")
	}
	h.workers.clean("a")
	h.clk.Step(time.Second)
	h.pass()
	if h.m.victim != "" {
		t.Errorf("victim %q kept after it stopped: Run would keep its fast pace", h.m.victim)
	}
}
