package podsync

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of the start gate.
const (
	// startSlotsPerCPU is how many pods per CPU may create their sandbox
	// and start their first containers at once.
	startSlotsPerCPU = 2
	// minStartSlots is the least number of slots.
	minStartSlots = 4
	// startSlotHold is the longest a pod keeps its slot.
	startSlotHold = 5 * time.Second
)

// defaultStartSlots is the number of start slots on this machine.
func defaultStartSlots() int {
	return max(minStartSlots, startSlotsPerCPU*runtime.NumCPU())
}

// startGate bounds how many new pods create their sandbox and start their
// first containers at once, in the order they come.
//
// Without it a burst of new pods starts all of them together: the runtime
// (its shims, runc, the CNI plugins) shares the CPUs among all, and each
// pod is Running only when nearly all are (100 pods on 2 CPUs: half of
// them Running after 16.4 s, all after 18.0 s). A few at a time, the first
// pods are Running early and the last no later, since the CPUs stay as
// busy.
//
// A pod keeps its slot at most hold: a start that waits on something slow
// (an image pull, a CNI plugin timing out) lets the next pod in, so that
// no pod waits on another's trouble for longer than that.
//
// The nil *startGate lets every pod in at once.
type startGate struct {
	slots chan struct{}
	hold  time.Duration
	clock clock.Clock
	// waiting counts the pods waiting for a slot.
	waiting atomic.Int32
}

func newStartGate(slots int, hold time.Duration, clk clock.Clock) *startGate {
	if slots <= 0 {
		return nil
	}
	return &startGate{slots: make(chan struct{}, slots), hold: hold, clock: clk}
}

// enter waits for a slot, in the order the pods asked (a channel's
// waiting senders go first come, first served), until ctx is done. The
// returned leave gives the slot back; it may be called more than once, and
// the slot goes back by itself after the gate's hold.
func (g *startGate) enter(ctx context.Context) (leave func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	g.waiting.Add(1)
	select {
	case g.slots <- struct{}{}:
		g.waiting.Add(-1)
	case <-ctx.Done():
		g.waiting.Add(-1)
		return nil, ctx.Err()
	}
	var once sync.Once
	done := make(chan struct{})
	leave = func() {
		once.Do(func() {
			<-g.slots
			close(done)
		})
	}
	t := g.clock.NewTimer(g.hold)
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			leave()
		case <-done:
		}
	}()
	return leave, nil
}
