package procmem

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// driven is a Releaser run by the test one interval at a time: it hands
// over every CPU reading and receives every advice ("release" or "drop"),
// so that a reading received proves the interval before it was handled
// without one.
type driven struct {
	t       *testing.T
	clk     *testingclock.FakeClock
	cpu     chan reading
	advised chan string
	stop    chan struct{}
	// started goes with each reading the test hands over; seen, used by
	// the Releaser's goroutine only, is what Started then reports: the
	// value of the interval it handles, whatever the test sets for the next.
	started bool
	seen    bool
	done    chan error
	total   time.Duration
}

// reading is one CPU reading and whether the start is over by then.
type reading struct {
	cpu     time.Duration
	started bool
}

// wait bounds a wait for the Releaser's goroutine; it is not a timing
// assertion, only a failure instead of a hung test.
const wait = 10 * time.Second

func startDriven(t *testing.T, releaseErr, dropErr error) *driven {
	t.Helper()
	d := &driven{
		t:       t,
		clk:     testingclock.NewFakeClock(time.Unix(1_000_000, 0)),
		cpu:     make(chan reading),
		advised: make(chan string),
		stop:    make(chan struct{}),
		done:    make(chan error, 1),
	}
	r := NewReleaser(Options{
		Clock:   d.clk,
		Started: func() bool { return d.seen },
		CPU: func() (time.Duration, error) {
			select {
			case r := <-d.cpu:
				d.seen = r.started
				return r.cpu, nil
			case <-d.stop:
				return 0, errors.New("test over")
			}
		},
		Release: func() (Released, error) { return d.advise("release", releaseErr) },
		Drop:    func() (Released, error) { return d.advise("drop", dropErr) },
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

func (d *driven) advise(kind string, err error) (Released, error) {
	select {
	case d.advised <- kind:
	case <-d.stop:
	}
	return Released{}, err
}

// send hands over the CPU reading d.total; an advice instead fails.
func (d *driven) send() {
	d.t.Helper()
	select {
	case d.cpu <- reading{d.total, d.started}:
	case a := <-d.advised:
		d.t.Fatalf("advice %q at an interval that should have none", a)
	case <-time.After(wait):
		d.t.Fatal("the releaser did not read the CPU")
	}
}

// interval lets an interval pass in which the agent used used CPU and,
// when want is not empty, expects that advice at its end.
func (d *driven) interval(used time.Duration, want string) {
	d.t.Helper()
	d.clk.Step(DefaultInterval)
	d.total += used
	d.send()
	if want == "" {
		return
	}
	select {
	case a := <-d.advised:
		if a != want {
			d.t.Fatalf("advice %q, want %q", a, want)
		}
	case <-time.After(wait):
		d.t.Fatalf("no advice, want %q", want)
	}
}

// repeat is n times tk.
func repeat[T any](n int, tk T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = tk
	}
	return out
}

// join is the parts one after the other.
func join[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestReleaserReleasesWhenIdleAfterWork: the binary's pages are released
// at the end of the first idle interval after the start (once started),
// and not again while nothing runs; after a busy spell they are dropped at
// the first idle interval, and released once the agent has been idle for
// Quiet (5 minutes: 30 intervals) in a row.
func TestReleaserReleasesWhenIdleAfterWork(t *testing.T) {
	const idle, busy = 100 * time.Millisecond, time.Second // 1 % and 10 % of 10 s
	const release, drop = "release", "drop"
	type tick struct {
		used    time.Duration
		started bool
		want    string
	}
	for _, tc := range []struct {
		name  string
		ticks []tick
	}{
		{name: "not before the start is over", ticks: []tick{
			{idle, false, ""}, {idle, false, ""}, {idle, true, release}, {idle, true, ""}, {idle, true, ""},
		}},
		{name: "once while nothing runs", ticks: join(
			[]tick{{idle, true, release}},
			repeat(40, tick{idle, true, ""}), // 400 s
		)},
		{name: "not while the start is busy", ticks: []tick{
			{busy, true, ""}, {busy, true, ""}, {idle, true, release},
		}},
		{name: "a busy spell before the start is over: released, not dropped", ticks: []tick{
			{idle, false, ""}, {busy, false, ""}, {idle, false, ""}, {idle, true, release}, {idle, true, ""},
		}},
		{name: "after a busy spell dropped at once, released once five minutes were quiet", ticks: join(
			[]tick{{idle, true, release}, {busy, true, ""}, {busy, true, ""}, {idle, true, drop}},
			repeat(28, tick{idle, true, ""}), // 290 s quiet
			[]tick{{idle, true, release}},    // 300 s
			repeat(35, tick{idle, true, ""}),
		)},
		{name: "a busy interval drops again and starts the quiet again", ticks: join(
			[]tick{{idle, true, release}, {busy, true, ""}, {idle, true, drop}},
			repeat(19, tick{idle, true, ""}),
			[]tick{{busy, true, ""}, {idle, true, drop}},
			repeat(28, tick{idle, true, ""}),
			[]tick{{idle, true, release}},
		)},
		{name: "just under the idle share is idle", ticks: []tick{
			{DefaultInterval/20 - time.Millisecond, true, release},
		}},
		{name: "the idle share is busy", ticks: []tick{
			{DefaultInterval / 20, true, ""}, {idle, true, release},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDriven(t, nil, nil)
			for _, tk := range tc.ticks {
				d.started = tk.started
				d.interval(tk.used, tk.want)
			}
			// One more idle interval read proves the last one advised
			// nothing it should not have.
			d.clk.Step(DefaultInterval)
			d.send()
		})
	}
}

// TestReleaserStopsAfterAFailure: a kernel that refuses an advice is not
// asked again; Run returns.
func TestReleaserStopsAfterAFailure(t *testing.T) {
	const busy = time.Second
	for _, tc := range []struct {
		name              string
		releaseErr, dErr  error
		before            []time.Duration // CPU of the intervals before the failing one
		beforeWant, fails string
	}{
		{name: "release", releaseErr: errors.New("invalid argument"), fails: "release"},
		{name: "drop", dErr: errors.New("invalid argument"), before: []time.Duration{0, busy}, beforeWant: "release", fails: "drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDriven(t, tc.releaseErr, tc.dErr)
			d.started = true
			for i, used := range tc.before {
				want := ""
				if i == 0 {
					want = tc.beforeWant
				}
				d.interval(used, want)
			}
			d.interval(0, tc.fails)
			select {
			case err := <-d.done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
				d.done <- err // for the clean-up
			case <-time.After(wait):
				t.Fatal("Run goes on after the advice failed")
			}
		})
	}
}
