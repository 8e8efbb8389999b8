package podlifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/pleg"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/status"
)

// fakeLister is the runtime as the PLEG lists it; err makes listing fail.
type fakeLister struct {
	mu   sync.Mutex
	pods []*runtime.PodStatus
	err  error
}

func (f *fakeLister) ListPods(context.Context) ([]*runtime.PodStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods, f.err
}

func (f *fakeLister) set(err error, pods ...*runtime.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.err = pods, err
}

// TestHousekeepingWaitsForRelist attacks the orphan cleanup: a pod that
// no source wants any more but still runs (deleted while heartlet was
// down) must keep its directories and volumes until housekeeping knows
// what runs, that is until the PLEG's first successful relist, and while
// the runtime cannot be listed, when the last relist may be stale.
func TestHousekeepingWaitsForRelist(t *testing.T) {
	ctx := t.Context()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	lister := &fakeLister{}
	lister.set(nil, runningPod("orphan"))
	pl := pleg.New(lister, time.Second, clk)
	desired := podconfig.New(ctx)
	desired.Set(podconfig.SourceFile, []*v1.Pod{})
	workers := podworker.New(nil, clk, 0)
	statuses := status.NewManager(clk)
	dirs := &fakeResources{uids: []types.UID{"orphan", "gone"}}
	h := NewHousekeeper(HousekeeperOptions{
		Desired: desired, Sources: []string{podconfig.SourceFile}, Workers: workers, Runtime: pl,
		Statuses: statuses, Resources: dirs, // no remover: nothing here is stopped, so nothing is removed
		Admitter: NewAdmitter(AdmitterOptions{Statuses: statuses, Workers: workers, Desired: desired}),
	})

	h.Once(ctx)
	if len(dirs.cleaned) != 0 {
		t.Fatalf("before the first relist housekeeping removed the directories of %v; nothing is known of what runs yet", dirs.cleaned)
	}

	// The first relist: the orphan runs and keeps its directory (it is
	// stopped first); the directory of a pod that is nowhere goes.
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = pl.Run(ctx)
	}()
	t.Cleanup(func() { <-ran })
	waitTimer(t, clk)
	h.Once(ctx)
	if !slices.Equal(dirs.cleaned, []types.UID{"gone"}) {
		t.Fatalf("after a relist removed %v, want [gone]", dirs.cleaned)
	}
	if !workers.Known("orphan") {
		t.Error("the running orphan was not handed to the workers to stop")
	}

	// The runtime fails while a pod started outside the last relist runs:
	// nothing is removed until a relist succeeds again.
	dirs.cleaned = nil
	dirs.uids = []types.UID{"new"}
	lister.set(errors.New("runtime unreachable"), runningPod("orphan"), runningPod("new"))
	clk.Step(time.Second)
	waitTimer(t, clk)
	h.Once(ctx)
	if len(dirs.cleaned) != 0 {
		t.Fatalf("while the runtime fails housekeeping removed the directories of %v", dirs.cleaned)
	}
	lister.set(nil, runningPod("orphan"), runningPod("new"))
	clk.Step(time.Second)
	waitTimer(t, clk)
	h.Once(ctx)
	if len(dirs.cleaned) != 0 {
		t.Fatalf("after the runtime recovered housekeeping removed the directories of running %v", dirs.cleaned)
	}
}

// waitTimer waits until the PLEG waits for its next relist.
func waitTimer(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the PLEG did not relist")
		}
		<-time.After(time.Millisecond)
	}
}
