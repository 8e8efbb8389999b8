package procmem

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of the Releaser's options.
const (
	// DefaultInterval is how often the Releaser measures the agent's CPU.
	DefaultInterval = 10 * time.Second
	// DefaultIdleCPU is the share of one CPU under which an interval is
	// idle: an agent with 100 pods running uses about 1 %, a burst of pod
	// starts 10 % and more.
	DefaultIdleCPU = 0.05
	// DefaultQuiet is how long the agent must have been idle after a busy
	// spell before the pages that spell used are released from the page
	// cache too: every page used again is then read back from the disk, a
	// page at a time, so pages a node is likely to need soon (a deletion
	// after a burst of starts) stay cached until then. The start's pages,
	// never used again, are released at once.
	DefaultQuiet = 5 * time.Minute
)

// Options configure a Releaser.
type Options struct {
	Clock clock.WithTicker
	// Started tells whether the agent's start is over (every pod source
	// seen); nothing is released before.
	Started func() bool
	// Interval, IdleCPU and Quiet: see the defaults.
	Interval time.Duration
	IdleCPU  float64
	Quiet    time.Duration
	// CPU is the process's CPU time so far; Release releases and Drop
	// drops. They default to the real ones (getrusage, Release and Drop).
	CPU     func() (time.Duration, error)
	Release func() (Released, error)
	Drop    func() (Released, error)
}

// Releaser gives back the binary's pages: it releases them when the agent
// is idle after its start; after each busy spell it drops them at the
// first idle interval (they stay cached: what is used again comes back
// cheaply) and releases them after five quiet minutes.
type Releaser struct {
	opts Options
}

// NewReleaser returns a Releaser; zero options take their defaults.
func NewReleaser(o Options) *Releaser {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.IdleCPU <= 0 {
		o.IdleCPU = DefaultIdleCPU
	}
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	if o.CPU == nil {
		o.CPU = ownCPU
	}
	if o.Release == nil {
		o.Release = Release
	}
	if o.Drop == nil {
		o.Drop = Drop
	}
	if o.Started == nil {
		o.Started = func() bool { return true }
	}
	return &Releaser{opts: o}
}

// Run measures the agent's CPU every interval. Once the agent has started,
// the first idle interval (less than IdleCPU of one CPU) releases the
// binary's pages (the start's); after that, the first idle interval after
// a busy spell drops them, and a quiet spell (idle intervals in a row) of
// Quiet after it releases them. An advice that fails (an old kernel) is
// logged, and no advice is tried again. It returns when ctx is done.
func (r *Releaser) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	t := r.opts.Clock.NewTicker(r.opts.Interval)
	defer t.Stop()
	prev, err := r.opts.CPU()
	if err != nil {
		logger.Info("Warning: cannot read heartlet's CPU time; its binary's pages stay resident", "err", err)
		return nil
	}
	// busy: an interval was busy since the last advice (the start counts);
	// cached: pages were dropped, and not released since.
	busy, startReleased, cached := true, false, false
	var quiet time.Duration
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		cur, err := r.opts.CPU()
		if err != nil {
			logger.Info("Warning: cannot read heartlet's CPU time; its binary's pages stay resident", "err", err)
			return nil
		}
		idle := float64(cur-prev) < r.opts.IdleCPU*float64(r.opts.Interval)
		prev = cur
		if !idle {
			busy, quiet = true, 0
			continue
		}
		quiet += r.opts.Interval
		if !r.opts.Started() {
			continue
		}
		var advice string
		var advise func() (Released, error)
		switch {
		case !startReleased || (cached && quiet >= r.opts.Quiet):
			advice, advise = "Released", r.opts.Release
		case busy:
			advice, advise = "Dropped", r.opts.Drop
		default:
			continue
		}
		rel, err := advise()
		if err != nil {
			logger.Info("Warning: cannot give back heartlet's binary's pages; they stay resident", "advice", advice, "err", err)
			return nil
		}
		cached = advice == "Dropped"
		busy, startReleased = false, true
		logger.V(2).Info(advice+" the binary's resident pages", "mappedBytes", rel.Mapped, "rssFileBefore", rel.Before, "rssFileAfter", rel.After)
	}
}

// ownCPU is the process's user and system CPU time.
func ownCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
