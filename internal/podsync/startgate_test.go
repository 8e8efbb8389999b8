package podsync

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/podworker"
)

func TestStartGate(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := t.Context()

	t.Run("bounded, and a leave twice gives back one slot", func(t *testing.T) {
		g := newStartGate(2, time.Minute, clk)
		a, err := g.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, err := g.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.slots) != 2 {
			t.Fatalf("slots taken = %d, want 2", len(g.slots))
		}
		a()
		a()
		if len(g.slots) != 1 {
			t.Fatalf("slots taken after one pod left twice = %d, want 1", len(g.slots))
		}
		b()
		if len(g.slots) != 0 {
			t.Fatalf("slots taken after both left = %d, want 0", len(g.slots))
		}
	})

	t.Run("a waiting pod gives up when its context ends", func(t *testing.T) {
		g := newStartGate(1, time.Minute, clk)
		leave, err := g.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer leave()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := g.enter(cctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("enter with the gate full and the context done = %v, want context.Canceled", err)
		}
	})

	t.Run("a slot held past the hold goes to the next pod", func(t *testing.T) {
		g := newStartGate(1, 5*time.Second, clk)
		first, err := g.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		entered := make(chan func(), 1)
		go func() {
			leave, err := g.enter(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			entered <- leave
		}()
		clk.Step(4 * time.Second)
		select {
		case <-entered:
			t.Fatal("the next pod entered before the first pod's hold ended")
		default:
		}
		clk.Step(time.Second)
		second := <-entered
		// The first pod's own leave, later, takes nothing from the second.
		first()
		if len(g.slots) != 1 {
			t.Fatalf("slots taken = %d, want 1 (the second pod's)", len(g.slots))
		}
		second()
	})

	t.Run("nil gate", func(t *testing.T) {
		var g *startGate
		leave, err := g.enter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leave()
		if newStartGate(-1, time.Second, clk) != nil {
			t.Error("a negative number of slots must mean no gate")
		}
	})
}

func TestSyncPodWaitsForAStartSlot(t *testing.T) {
	h := newHarness(t)
	h.syncer.starts = newStartGate(1, time.Minute, h.clock)
	other, err := h.syncer.starts.enter(h.ctx)
	if err != nil {
		t.Fatal(err)
	}

	// With the only slot taken, a new pod creates nothing; its sync ends
	// when the pod is given up.
	pod := syncPod()
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := h.syncer.SyncPod(ctx, podworker.UpdateSync, pod)
		done <- err
	}()
	for h.syncer.starts.waiting.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("SyncPod ended (%v) without waiting for the start slot", err)
		default:
			goruntime.Gosched()
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("SyncPod with no start slot = %v, want context.Canceled", err)
	}
	if n := len(h.fake.Sandboxes()); n != 0 {
		t.Fatalf("sandboxes created without a start slot = %d, want 0", n)
	}

	// Once the slot is free the pod starts, and gives it back.
	other()
	h.sync(pod)
	if n := len(h.fake.Sandboxes()); n != 1 {
		t.Fatalf("sandboxes = %d, want 1", n)
	}
	initC := h.running("init")
	if len(h.syncer.starts.slots) != 0 {
		t.Fatal("the pod kept its start slot after its sync")
	}

	// A pod whose sandbox runs starts its next containers without a slot.
	other, err = h.syncer.starts.enter(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other()
	h.fake.SetExit(initC.ID, 0, "")
	h.sync(pod)
	h.running("app")
	if st, _ := h.status.GetPodStatus(pod.UID); st.Phase != v1.PodRunning {
		t.Errorf("phase = %s, want Running", st.Phase)
	}
}
