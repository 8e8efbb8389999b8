package procmem

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// driven is a Releaser run by the test one interval at a time: it hands
// over every CPU reading and receives every release, so that a reading
// received proves the interval before it was handled without a release.
type driven struct {
	t        *testing.T
	clk      *testingclock.FakeClock
	cpu      chan time.Duration
	released chan struct{}
	stop     chan struct{}
	started  atomic.Bool
	done     chan error
	total    time.Duration
}

// wait bounds a wait for the Releaser's goroutine; it is not a timing
// assertion, only a failure instead of a hung test.
const wait = 10 * time.Second

func startDriven(t *testing.T, releaseErr error) *driven {
	t.Helper()
	d := &driven{
		t:        t,
		clk:      testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		cpu:      make(chan time.Duration),
		released: make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan error, 1),
	}
	r := NewReleaser(Options{
		Clock:   d.clk,
		Started: d.started.Load,
		CPU: func() (time.Duration, error) {
			select {
			case c := <-d.cpu:
				return c, nil
			case <-d.stop:
				return 0, errors.New("test over")
			}
		},
		Release: func() (Released, error) {
			select {
			case d.released <- struct{}{}:
			case <-d.stop:
			}
			return Released{}, releaseErr
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { d.done <- r.Run(ctx) }()
	t.Cleanup(func() {
		close(d.stop)
		cancel()
		<-d.done
	})
	d.send() // the reading before the first interval; the ticker exists
	return d
}

// send hands over the CPU reading d.total; a release instead fails.
func (d *driven) send() {
	d.t.Helper()
	select {
	case d.cpu <- d.total:
	case <-d.released:
		d.t.Fatal("released the pages at an interval that should not")
	case <-time.After(wait):
		d.t.Fatal("the releaser did not read the CPU")
	}
}

// interval lets an interval pass in which the agent used used CPU and,
// when release, expects the pages to be released at its end.
func (d *driven) interval(used time.Duration, release bool) {
	d.t.Helper()
	d.clk.Step(DefaultInterval)
	d.total += used
	d.send()
	if !release {
		return
	}
	select {
	case <-d.released:
	case <-time.After(wait):
		d.t.Fatal("the pages were not released")
	}
}

// TestReleaserReleasesWhenIdleAfterWork: the binary's pages are released
// at the end of the first idle interval after the start (once started),
// not again while nothing runs, and after a busy spell only once the agent
// has been idle for Quiet (5 minutes: 30 intervals) in a row.
func TestReleaserReleasesWhenIdleAfterWork(t *testing.T) {
	const idle, busy = 100 * time.Millisecond, time.Second // 1 % and 10 % of 10 s
	type tick struct {
		used             time.Duration
		started, release bool
	}
	repeat := func(n int, tk tick) []tick {
		out := make([]tick, n)
		for i := range out {
			out[i] = tk
		}
		return out
	}
	join := func(parts ...[]tick) []tick {
		var out []tick
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		ticks []tick
	}{
		{name: "not before the start is over", ticks: []tick{
			{idle, false, false}, {idle, false, false}, {idle, true, true}, {idle, true, false}, {idle, true, false},
		}},
		{name: "once while nothing runs", ticks: join(
			[]tick{{idle, true, true}},
			repeat(40, tick{idle, true, false}), // 400 s
		)},
		{name: "not while the start is busy", ticks: []tick{
			{busy, true, false}, {busy, true, false}, {idle, true, true},
		}},
		{name: "after a busy spell, once five minutes were quiet", ticks: join(
			[]tick{{idle, true, true}, {busy, true, false}},
			repeat(29, tick{idle, true, false}), // 290 s quiet
			[]tick{{idle, true, true}},          // 300 s
			repeat(5, tick{idle, true, false}),
		)},
		{name: "a busy interval starts the quiet again", ticks: join(
			[]tick{{idle, true, true}, {busy, true, false}},
			repeat(20, tick{idle, true, false}),
			[]tick{{busy, true, false}},
			repeat(29, tick{idle, true, false}),
			[]tick{{idle, true, true}},
		)},
		{name: "just under the idle share is idle", ticks: []tick{
			{DefaultInterval/20 - time.Millisecond, true, true},
		}},
		{name: "the idle share is busy", ticks: []tick{
			{DefaultInterval / 20, true, false}, {idle, true, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDriven(t, nil)
			for _, tk := range tc.ticks {
				d.started.Store(tk.started)
				d.interval(tk.used, tk.release)
			}
			// One more idle interval read proves the last one released
			// nothing it should not have.
			d.clk.Step(DefaultInterval)
			d.send()
		})
	}
}

// TestReleaserStopsAfterAFailure: a kernel that refuses the advice is
// not asked again; Run returns.
func TestReleaserStopsAfterAFailure(t *testing.T) {
	d := startDriven(t, errors.New("invalid argument"))
	d.started.Store(true)
	d.interval(0, true)
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
		d.done <- err // for the clean-up
	case <-time.After(wait):
		t.Fatal("Run goes on after the release failed")
	}
}
