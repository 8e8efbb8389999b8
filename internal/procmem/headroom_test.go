package procmem

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// found is the growth the fake runtime has before Run.
const found = 80

// headroomReading is one interval's CPU reading and the live heap then.
type headroomReading struct {
	cpu  time.Duration
	live uint64
}

// headroomDriven is a Headroom run by the test one interval at a time: it
// hands over every CPU reading (with the live heap to report) and receives
// every change of the heap's growth ("set N") and every "free", so that a
// reading received proves the interval before it was handled without one.
type headroomDriven struct {
	t       *testing.T
	clk     *testingclock.FakeClock
	cpu     chan headroomReading
	did     chan string
	stop    chan struct{}
	done    chan error
	cancel  context.CancelFunc
	total   time.Duration
	live    uint64 // what Live reports, set with each reading; Run's goroutine only
	percent int    // the growth as the fake runtime has it; Run's goroutine only
}

func startHeadroom(t *testing.T, env map[string]string) *headroomDriven {
	t.Helper()
	d := &headroomDriven{
		t:       t,
		clk:     testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		cpu:     make(chan headroomReading),
		did:     make(chan string),
		stop:    make(chan struct{}),
		done:    make(chan error, 1),
		percent: found,
	}
	report := func(what string) {
		select {
		case d.did <- what:
		case <-d.stop:
		}
	}
	h := NewHeadroom(HeadroomOptions{
		Clock: d.clk,
		CPU: func() (time.Duration, error) {
			select {
			case r := <-d.cpu:
				d.live = r.live
				return r.cpu, nil
			case <-d.stop:
				return 0, errors.New("test over")
			}
		},
		Live: func() uint64 { return d.live },
		SetGCPercent: func(p int) int {
			report(fmt.Sprintf("set %d", p))
			prev := d.percent
			d.percent = p
			return prev
		},
		FreeOSMemory: func() { report("free") },
		Getenv:       func(k string) string { return env[k] },
	})
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() { d.done <- h.Run(ctx) }()
	t.Cleanup(func() {
		close(d.stop)
		cancel()
		<-d.done
	})
	return d
}

// send hands over a reading of d.total with live; anything done instead
// fails.
func (d *headroomDriven) send(live uint64) {
	d.t.Helper()
	select {
	case d.cpu <- headroomReading{d.total, live}:
	case what := <-d.did:
		d.t.Fatalf("%q at an interval that should do nothing", what)
	case <-time.After(wait):
		d.t.Fatal("the headroom did not read the CPU")
	}
}

// expect receives what Run does next and checks it is want.
func (d *headroomDriven) expect(want string) {
	d.t.Helper()
	select {
	case what := <-d.did:
		if what != want {
			d.t.Fatalf("%q, want %q", what, want)
		}
	case <-time.After(wait):
		d.t.Fatalf("nothing done, want %q", want)
	}
}

// TestHeadroomFollowsTheAgentsCPUAndHeap: the agent starts busy (the
// runtime's default growth); the quiet growth applies, and the free heap is
// given back, once the last 10 s (10 intervals) used under 5 % of a CPU
// with none at 10 % or more and the live heap is 6 MiB or more; a busy
// interval, or a live heap a quarter under 6 MiB, restores the busy growth
// at once; what Run found is restored when it returns.
func TestHeadroomFollowsTheAgentsCPUAndHeap(t *testing.T) {
	const (
		idle   = 10 * time.Millisecond  // 1 % of 1 s
		warm   = 80 * time.Millisecond  // 8 %: not busy, but not idle either
		busy   = 100 * time.Millisecond // 10 %
		large  = DefaultQuietMinLive
		small  = DefaultQuietMinLive - 1
		shrunk = DefaultQuietMinLive/4*3 - 1
	)
	quiet := []string{"set 50", "free"}
	type tick struct {
		used time.Duration
		live uint64
		want []string // what is done at the end of the interval
	}
	for _, tc := range []struct {
		name  string
		ticks []tick
	}{
		{name: "quiet after ten idle seconds with a large heap, and it stays", ticks: join(
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
			repeat(30, tick{idle, large, nil}),
		)},
		{name: "a small heap keeps the runtime's growth, a heap grown large then gets the quiet one", ticks: join(
			repeat(30, tick{idle, small, nil}),
			[]tick{{idle, large, quiet}},
		)},
		{name: "busy at the start keeps the runtime's growth", ticks: join(
			repeat(5, tick{busy, large, nil}),
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
		)},
		{name: "a busy interval restores the busy growth at once, and the quiet count starts again", ticks: join(
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
			[]tick{{busy, large, []string{"set 100"}}, {busy, large, nil}},
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
		)},
		{name: "a busy interval before the quiet growth restarts the count", ticks: join(
			repeat(8, tick{idle, large, nil}),
			[]tick{{busy, large, nil}},
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
		)},
		{name: "not quiet while the last ten seconds used 5 % or more", ticks: join(
			repeat(6, tick{warm, large, nil}), // 480 ms
			repeat(4, tick{idle, large, nil}), // 520 ms in the last 10 s: not quiet
			[]tick{{idle, large, quiet}},      // 450 ms
			repeat(5, tick{warm, large, nil}), // quiet stays: only a busy interval ends it
			[]tick{{busy, large, []string{"set 100"}}},
		)},
		{name: "a heap a quarter under the threshold restores the busy growth, one just under does not", ticks: join(
			repeat(9, tick{idle, large, nil}),
			[]tick{{idle, large, quiet}},
			repeat(5, tick{idle, small, nil}),
			[]tick{{idle, shrunk, []string{"set 100"}}},
			repeat(5, tick{idle, small, nil}),
			[]tick{{idle, large, quiet}},
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startHeadroom(t, nil)
			d.send(0)           // the reading before the first interval
			d.expect("set 100") // the busy growth at the start; the ticker exists
			for _, tk := range tc.ticks {
				d.clk.Step(DefaultHeadroomInterval)
				d.total += tk.used
				d.send(tk.live)
				for _, w := range tk.want {
					d.expect(w)
				}
			}
			// One more interval read proves the last one did nothing it
			// should not have.
			last := tc.ticks[len(tc.ticks)-1]
			d.clk.Step(DefaultHeadroomInterval)
			d.send(last.live)
			// On return, the growth found at the start comes back.
			d.cancel()
			close(d.stop) // the restoring call does not wait for the test
			err := <-d.done
			if d.percent != found {
				t.Errorf("growth %d after Run returned, want the %d it found", d.percent, found)
			}
			d.done <- err
			d.stop = make(chan struct{}) // for the clean-up
		})
	}
}

// TestHeadroomLeavesTheOperatorsSetting: with GOGC or GOMEMLIMIT set, Run
// neither reads the CPU nor sets the growth, and returns at once.
func TestHeadroomLeavesTheOperatorsSetting(t *testing.T) {
	for _, env := range []map[string]string{
		{"GOGC": "200"},
		{"GOGC": "off"},
		{"GOMEMLIMIT": "64MiB"},
	} {
		d := startHeadroom(t, env)
		select {
		case err := <-d.done:
			if err != nil {
				t.Errorf("%v: Run returned %v, want nil", env, err)
			}
			d.done <- err // for the clean-up
		case <-d.cpu:
			t.Fatalf("%v: Run read the CPU", env)
		case what := <-d.did:
			t.Fatalf("%v: Run did %q", env, what)
		case <-time.After(wait):
			t.Fatalf("%v: Run did not return", env)
		}
	}
}

// TestLiveHeap: the live heap is read from the runtime's metrics.
func TestLiveHeap(t *testing.T) {
	runtime.GC() // the metric is set by a collection
	if liveHeap() == 0 {
		t.Error("live heap 0: the runtime metric was not read")
	}
}
