package podlifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
)

func TestHousekeeping(t *testing.T) {
	tests := []struct {
		name string
		// seen are the sources that delivered; "file" is expected.
		seen      []string
		desired   []*v1.Pod
		known     map[types.UID]podworker.State
		statuses  []*v1.Pod
		relisted  []*runtime.PodStatus
		relistOK  bool
		resources []types.UID
		listErr   error
		failClean map[types.UID]error

		wantWorkers  []string
		wantRemoved  []types.UID
		wantCleaned  []types.UID
		wantStatusRm []types.UID
		wantMirrors  int
	}{
		{
			name:      "nothing before every source delivered",
			relisted:  []*runtime.PodStatus{runningPod("orphan"), stoppedPod("stopped")},
			relistOK:  true,
			statuses:  []*v1.Pod{pod("gone")},
			resources: []types.UID{"gone"},
		},
		{
			name:         "nothing removed before the first successful relist",
			seen:         []string{"file"},
			relisted:     []*runtime.PodStatus{runningPod("orphan"), stoppedPod("stopped")},
			statuses:     []*v1.Pod{pod("gone")},
			resources:    []types.UID{"orphan", "stopped", "gone"},
			wantStatusRm: []types.UID{"gone"},
			wantMirrors:  1,
		},
		{
			name:        "orphan sandbox with no desired pod is killed",
			seen:        []string{"file"},
			relisted:    []*runtime.PodStatus{runningPod("orphan")},
			relistOK:    true,
			resources:   []types.UID{"orphan"},
			wantWorkers: []string{"kill orphan"},
			wantMirrors: 1,
		},
		{
			name:        "orphan container with no desired pod is killed",
			seen:        []string{"file"},
			relisted:    []*runtime.PodStatus{runningContainerPod("orphan")},
			relistOK:    true,
			wantWorkers: []string{"kill orphan"},
			wantMirrors: 1,
		},
		{
			name:        "stopped pod no source wants is removed from the runtime, its resources kept while listed",
			seen:        []string{"file"},
			relisted:    []*runtime.PodStatus{stoppedPod("stopped")},
			relistOK:    true,
			resources:   []types.UID{"stopped"},
			wantRemoved: []types.UID{"stopped"},
			wantMirrors: 1,
		},
		{
			name:        "desired and known pods are left alone",
			seen:        []string{"file"},
			desired:     []*v1.Pod{pod("want"), pod("pending")},
			known:       map[types.UID]podworker.State{"terminating": podworker.StateTerminating, "terminated": podworker.StateTerminated},
			statuses:    []*v1.Pod{pod("want"), pod("terminated")},
			relisted:    []*runtime.PodStatus{runningPod("want"), runningPod("terminating"), stoppedPod("terminated")},
			relistOK:    true,
			resources:   []types.UID{"want", "pending", "terminating", "terminated"},
			wantMirrors: 1,
		},
		{
			name:        "resources of pods still running are never removed, those of pods nowhere are",
			seen:        []string{"file"},
			relisted:    []*runtime.PodStatus{runningPod("orphan"), stoppedPod("stopped")},
			relistOK:    true,
			resources:   []types.UID{"orphan", "stopped", "gone1", "gone2"},
			wantWorkers: []string{"kill orphan"},
			wantRemoved: []types.UID{"stopped"},
			wantCleaned: []types.UID{"gone1", "gone2"},
			wantMirrors: 1,
		},
		{
			name:        "pods listed despite a listing error are cleaned",
			seen:        []string{"file"},
			relistOK:    true,
			resources:   []types.UID{"gone"},
			listErr:     errors.New("cgroups unreadable"),
			wantCleaned: []types.UID{"gone"},
			wantMirrors: 1,
		},
		{
			name:        "a failed cleanup does not stop the others",
			seen:        []string{"file"},
			relistOK:    true,
			resources:   []types.UID{"busy", "gone"},
			failClean:   map[types.UID]error{"busy": errors.New("cgroup busy")},
			wantCleaned: []types.UID{"gone"},
			wantMirrors: 1,
		},
		{
			name:         "status of a pod nobody knows is dropped",
			seen:         []string{"file"},
			desired:      []*v1.Pod{pod("want")},
			known:        map[types.UID]podworker.State{"terminated": podworker.StateTerminated},
			statuses:     []*v1.Pod{pod("want"), pod("terminated"), pod("gone")},
			relistOK:     true,
			wantStatusRm: []types.UID{"gone"},
			wantMirrors:  1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			workers := newFakeWorkers()
			for uid, st := range tc.known {
				workers.set(uid, st)
			}
			statuses := newFakeStatuses()
			for _, p := range tc.statuses {
				statuses.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning})
			}
			remover := &fakeRemover{}
			res := &fakeResources{uids: tc.resources, listErr: tc.listErr, fail: tc.failClean}
			mirrors := &fakeMirrors{}
			desired := &fakeDesired{pods: tc.desired, seen: tc.seen}
			h := NewHousekeeper(HousekeeperOptions{
				Desired: desired, Sources: []string{"file"}, Workers: workers, Statuses: statuses,
				Admitter: NewAdmitter(AdmitterOptions{Desired: desired, Workers: workers, Statuses: statuses}),
				Runtime:  &fakeRuntime{pods: tc.relisted, ok: tc.relistOK},
				Remover:  remover, Resources: res, Mirrors: mirrors,
			})
			h.Once(t.Context())
			if got := workers.log(); !slices.Equal(got, tc.wantWorkers) {
				t.Errorf("worker updates = %q, want %q", got, tc.wantWorkers)
			}
			if !slices.Equal(remover.removed, tc.wantRemoved) {
				t.Errorf("removed from the runtime %v, want %v", remover.removed, tc.wantRemoved)
			}
			if !slices.Equal(res.cleaned, tc.wantCleaned) {
				t.Errorf("resources cleaned %v, want %v", res.cleaned, tc.wantCleaned)
			}
			if !slices.Equal(statuses.removed, tc.wantStatusRm) {
				t.Errorf("statuses removed %v, want %v", statuses.removed, tc.wantStatusRm)
			}
			if mirrors.synced != tc.wantMirrors {
				t.Errorf("mirror syncs = %d, want %d", mirrors.synced, tc.wantMirrors)
			}
		})
	}
}

// A killed orphan carries the grace period its containers were started
// with, so the workers stop it as it was meant to be stopped.
func TestHousekeepingOrphanGrace(t *testing.T) {
	workers := newFakeWorkers()
	rp := runningContainerPod("orphan")
	rp.Containers[0].Annotations = map[string]string{runtime.AnnotationGrace: "3"}
	h := NewHousekeeper(HousekeeperOptions{
		Desired: &fakeDesired{}, Workers: workers, Statuses: newFakeStatuses(),
		Runtime: &fakeRuntime{pods: []*runtime.PodStatus{rp}, ok: true},
	})
	h.Once(t.Context())
	if len(workers.updates) != 1 {
		t.Fatalf("updates = %q, want one kill", workers.log())
	}
	u := workers.updates[0]
	if g := u.Pod.Spec.TerminationGracePeriodSeconds; u.Type != podworker.UpdateKill || g == nil || *g != 3 {
		t.Errorf("update = %s grace %v, want kill with grace 3", u.Type, g)
	}
	if got := h.podCounts().Working; len(got) != 1 {
		t.Errorf("working pods = %v, want the orphan counted as runtime only", got)
	}
}

// A pod deleted from its source is terminated by its worker, then, once
// terminated and forgotten, removed from the runtime, and once the runtime
// no longer lists it its resources are released.
func TestDeletedPodTerminatedThenRemoved(t *testing.T) {
	ctx := t.Context()
	workers := newFakeWorkers()
	statuses := newFakeStatuses()
	desired := &fakeDesired{seen: []string{"file"}}
	adm := NewAdmitter(AdmitterOptions{Desired: desired, Workers: workers, Statuses: statuses})
	d := NewDispatcher(adm, workers, &fakeProbes{}, &fakeStartup{})
	rt := &fakeRuntime{ok: true}
	remover := &fakeRemover{}
	res := &fakeResources{uids: []types.UID{"a"}}
	h := NewHousekeeper(HousekeeperOptions{
		Desired: desired, Sources: []string{"file"}, Workers: workers, Statuses: statuses, Admitter: adm,
		Runtime: rt, Remover: remover, Resources: res,
	})

	d.Handle(ctx, podconfig.Update{Op: podconfig.OpAdd, Pod: pod("a")})
	desired.pods = []*v1.Pod{pod("a")}
	rt.pods = []*runtime.PodStatus{runningPod("a")}
	h.Once(ctx)
	if len(remover.removed)+len(res.cleaned) != 0 {
		t.Fatalf("a desired pod was removed: runtime %v, resources %v", remover.removed, res.cleaned)
	}

	// Removed from its source: the worker is told to stop it.
	desired.pods = nil
	d.Handle(ctx, podconfig.Update{Op: podconfig.OpRemove, Pod: pod("a")})
	if got, want := workers.log(), []string{"create a", "kill a"}; !slices.Equal(got, want) {
		t.Fatalf("worker updates = %q, want %q", got, want)
	}
	// While its worker terminates it, housekeeping leaves it alone.
	h.Once(ctx)
	if len(remover.removed)+len(res.cleaned) != 0 || len(workers.updates) != 2 {
		t.Fatalf("a terminating pod was touched: runtime %v, resources %v, updates %q", remover.removed, res.cleaned, workers.log())
	}

	// Terminated and forgotten by its worker: the runtime's leftovers go,
	// the resources stay while the runtime still lists it.
	workers.forget("a")
	rt.pods = []*runtime.PodStatus{stoppedPod("a")}
	h.Once(ctx)
	if !slices.Equal(remover.removed, []types.UID{"a"}) || len(res.cleaned) != 0 {
		t.Fatalf("after termination: runtime removed %v (want [a]), resources %v (want none)", remover.removed, res.cleaned)
	}
	rt.pods = nil
	h.Once(ctx)
	if !slices.Equal(res.cleaned, []types.UID{"a"}) {
		t.Fatalf("resources cleaned %v, want [a]", res.cleaned)
	}
	if len(workers.updates) != 2 {
		t.Errorf("the removed pod was started again: %q", workers.log())
	}
}

// Run does a pass per period, tells the loop, and ends with its context.
func TestHousekeeperRun(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	loop := &fakeLoop{entered: make(chan struct{}, 4)}
	mirrors := &fakeMirrors{}
	h := NewHousekeeper(HousekeeperOptions{
		Desired: &fakeDesired{seen: []string{"file"}}, Sources: []string{"file"}, Workers: newFakeWorkers(),
		Statuses: newFakeStatuses(), Mirrors: mirrors, Loop: loop, Clock: clk,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- h.Run(ctx) }()
	for range 2 {
		waitTicker(t, clk)
		clk.Step(HousekeepingPeriod)
		<-loop.entered
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if mirrors.synced < 1 {
		t.Errorf("mirror syncs = %d, want at least 1", mirrors.synced)
	}
}

type fakeLoop struct{ entered chan struct{} }

func (f *fakeLoop) Enter() { f.entered <- struct{}{} }

// waitTicker waits until Run's ticker exists.
func waitTicker(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the housekeeping ticker was not made")
		}
		<-time.After(time.Millisecond)
	}
}

func TestOrphanPod(t *testing.T) {
	rp := &runtime.PodStatus{
		UID: "u1", Name: "web-node", Namespace: "default",
		Containers: []*runtime.ContainerStatus{
			{Name: "c", Annotations: map[string]string{runtime.AnnotationGrace: "7"}},
		},
	}
	pod := OrphanPod(rp)
	if pod.UID != "u1" || pod.Name != "web-node" || pod.Namespace != "default" {
		t.Errorf("identity = %s/%s %s", pod.Namespace, pod.Name, pod.UID)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 7 {
		t.Errorf("grace = %v, want 7 from the container annotation", g)
	}
	if g := OrphanPod(&runtime.PodStatus{UID: "u2"}).Spec.TerminationGracePeriodSeconds; g != nil {
		t.Errorf("grace without annotation = %d, want unset (the default applies)", *g)
	}
}

func TestPodRuns(t *testing.T) {
	tests := []struct {
		name string
		rp   *runtime.PodStatus
		want bool
	}{
		{"nothing", &runtime.PodStatus{}, false},
		{"ready sandbox", &runtime.PodStatus{Sandboxes: []*runtime.SandboxStatus{{State: runtime.SandboxReady}}}, true},
		{"stopped sandbox, exited container", &runtime.PodStatus{
			Sandboxes:  []*runtime.SandboxStatus{{State: runtime.SandboxNotReady}},
			Containers: []*runtime.ContainerStatus{{State: runtime.ContainerExited}},
		}, false},
		{"running container", &runtime.PodStatus{Containers: []*runtime.ContainerStatus{{State: runtime.ContainerRunning}}}, true},
		{"created container", &runtime.PodStatus{Containers: []*runtime.ContainerStatus{{State: runtime.ContainerCreated}}}, true},
	}
	for _, tt := range tests {
		if got := PodRuns(tt.rp); got != tt.want {
			t.Errorf("%s: PodRuns = %v, want %v", tt.name, got, tt.want)
		}
	}
}
