package procmem

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of the Headroom's options.
const (
	// DefaultHeadroomInterval is how often the Headroom measures the
	// agent's CPU: a burst of pod starts is seen within a second.
	DefaultHeadroomInterval = time.Second
	// DefaultBusyCPU is the share of one CPU at or over which an interval
	// is busy: a burst of pod starts uses 10 % and more; an agent with 100
	// pods running, about 1 % in the mean and at most a few % in a second.
	DefaultBusyCPU = 0.10
	// DefaultQuietAfter is the span over which the agent must have used
	// less than IdleCPU (the Releaser's share) of one CPU, without a busy
	// interval, to be quiet.
	DefaultQuietAfter = 10 * time.Second
	// DefaultBusyPercent is the heap's growth while the agent is busy or
	// its heap small: the Go runtime's own default (GOGC=100).
	DefaultBusyPercent = 100
	// DefaultQuietPercent is the heap's growth once the agent is quiet
	// with a large heap: with 100 pods running the live heap is 8–10 MB,
	// and a collection every few seconds instead of every five costs about
	// 60 ms of CPU a minute for 5–6 MiB less resident memory.
	DefaultQuietPercent = 50
	// DefaultQuietMinLive is the live heap under which the quiet growth
	// does not apply: an idle agent's heap (3 MB live) has little headroom
	// to give back, and more collections would cost more than they save.
	DefaultQuietMinLive = 6 << 20
)

// HeadroomOptions configure a Headroom.
type HeadroomOptions struct {
	Clock clock.WithTicker
	// Interval, BusyCPU, IdleCPU (DefaultIdleCPU), QuietAfter,
	// BusyPercent, QuietPercent and QuietMinLive: see the defaults.
	Interval     time.Duration
	BusyCPU      float64
	IdleCPU      float64
	QuietAfter   time.Duration
	BusyPercent  int
	QuietPercent int
	QuietMinLive uint64
	// CPU is the process's CPU time so far, Live the heap live after the
	// last collection, SetGCPercent sets the heap's growth and returns the
	// previous one, FreeOSMemory collects and gives back the free heap,
	// Getenv reads the environment. They default to the real ones.
	CPU          func() (time.Duration, error)
	Live         func() uint64
	SetGCPercent func(int) int
	FreeOSMemory func()
	Getenv       func(string) string
}

// Headroom sets how far the Go heap grows past what was live at the last
// collection before the next one (GOGC) by how busy the agent is. While
// pods start, stop or anything else keeps it busy, and while its heap is
// small, the growth is the runtime's default: a burst costs no more
// collections than it must. Once the agent is quiet with a large heap (a
// node's steady work with many pods: relists, probes, status), the growth
// is smaller, and the free heap is given back at once: the heap's headroom
// is then most of the agent's anonymous memory. An operator who sets GOGC
// or GOMEMLIMIT decides alone: the Headroom then changes nothing.
//
// Contract: Run is the only caller of SetGCPercent while it runs, and
// leaves the growth it found when it returns.
type Headroom struct {
	opts HeadroomOptions
}

// NewHeadroom returns a Headroom; zero options take their defaults.
func NewHeadroom(o HeadroomOptions) *Headroom {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultHeadroomInterval
	}
	if o.BusyCPU <= 0 {
		o.BusyCPU = DefaultBusyCPU
	}
	if o.IdleCPU <= 0 {
		o.IdleCPU = DefaultIdleCPU
	}
	if o.QuietAfter <= 0 {
		o.QuietAfter = DefaultQuietAfter
	}
	if o.BusyPercent <= 0 {
		o.BusyPercent = DefaultBusyPercent
	}
	if o.QuietPercent <= 0 {
		o.QuietPercent = DefaultQuietPercent
	}
	if o.QuietMinLive == 0 {
		o.QuietMinLive = DefaultQuietMinLive
	}
	if o.CPU == nil {
		o.CPU = ownCPU
	}
	if o.Live == nil {
		o.Live = liveHeap
	}
	if o.SetGCPercent == nil {
		o.SetGCPercent = debug.SetGCPercent
	}
	if o.FreeOSMemory == nil {
		o.FreeOSMemory = debug.FreeOSMemory
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	return &Headroom{opts: o}
}

// Run measures the agent's CPU every interval and sets the heap's growth:
// QuietPercent, giving the free heap back, once the last QuietAfter used
// less than IdleCPU of one CPU with no busy interval (BusyCPU or more) and
// the live heap is QuietMinLive or more; BusyPercent again at once after a
// busy interval, or when the live heap fell a quarter under QuietMinLive.
// The agent starts busy. It returns when ctx is done, or at once when GOGC
// or GOMEMLIMIT is set.
func (h *Headroom) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if v := h.opts.Getenv(env); v != "" {
			logger.V(2).Info("The Go heap's growth is the operator's: heartlet leaves it", env, v)
			return nil
		}
	}
	prev, err := h.opts.CPU()
	if err != nil {
		logger.Info("Warning: cannot read heartlet's CPU time; the Go heap's growth stays the runtime's default", "err", err)
		return nil
	}
	t := h.opts.Clock.NewTicker(h.opts.Interval)
	defer t.Stop()
	found := h.opts.SetGCPercent(h.opts.BusyPercent)
	defer h.opts.SetGCPercent(found)
	// used holds the CPU of the last intervals of QuietAfter, oldest
	// first; it is full only when none of them was busy.
	n := max(1, int(h.opts.QuietAfter/h.opts.Interval))
	used := make([]time.Duration, 0, n)
	var sum time.Duration
	quiet := false
	set := func(q bool, live uint64) {
		quiet = q
		if q {
			h.opts.SetGCPercent(h.opts.QuietPercent)
			h.opts.FreeOSMemory()
			logger.V(2).Info("Quiet with a large heap: smaller heap growth, free heap given back", "percent", h.opts.QuietPercent, "liveBytes", live)
			return
		}
		h.opts.SetGCPercent(h.opts.BusyPercent)
		logger.V(2).Info("Busy or a small heap: the runtime's heap growth", "percent", h.opts.BusyPercent, "liveBytes", live)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		cur, err := h.opts.CPU()
		if err != nil {
			logger.Info("Warning: cannot read heartlet's CPU time; the Go heap's growth stays the runtime's default", "err", err)
			return nil
		}
		d := cur - prev
		prev = cur
		if float64(d) >= h.opts.BusyCPU*float64(h.opts.Interval) {
			used, sum = used[:0], 0
			if quiet {
				set(false, h.opts.Live())
			}
			continue
		}
		if len(used) == n {
			sum -= used[0]
			used = append(used[:0], used[1:]...)
		}
		used, sum = append(used, d), sum+d
		if len(used) < n {
			continue
		}
		live := h.opts.Live()
		switch {
		case !quiet && live >= h.opts.QuietMinLive && float64(sum) < h.opts.IdleCPU*float64(h.opts.Interval)*float64(n):
			set(true, live)
		case quiet && live < h.opts.QuietMinLive/4*3:
			// A quarter under the threshold: a heap around it does not
			// switch at every collection.
			set(false, live)
		}
	}
}

// liveHeap is the heap live after the last collection.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
