// Package pleg is the pod lifecycle event generator: it relists the
// runtime's pods periodically, compares every relist with the previous one
// and turns the differences into typed events for the pod workers. With
// WithEvents it also follows the runtime's container events, which update
// the one pod they name at once; the relist keeps its period and stays the
// fallback that bounds staleness when the stream fails or misses a change.
package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/coalesce"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
)

const (
	// DefaultPeriod is the default time between the end of one relist and
	// the start of the next.
	DefaultPeriod = time.Second
	// RelistThreshold is how old the last successful relist may be before
	// Healthy reports an error.
	RelistThreshold = 3 * time.Minute
	// RuntimeThreshold is how old the last successful relist may be before
	// RuntimeHealthy reports the container runtime unreachable, as
	// upstream's runtime sync threshold: relisting is cheap and runs every
	// period, so ten seconds without one means the runtime does not answer.
	RuntimeThreshold = 10 * time.Second
	// eventBuffer is the capacity of the events channel. When it is full,
	// the newest event of each pod waits beside it (coalesced per pod) and
	// is delivered after a later relist: events are never dropped and the
	// relist never blocks.
	eventBuffer = 1000
)

// EventType is what changed for a pod between two relists.
type EventType string

const (
	// ContainerStarted: the container is running now and was not before.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: the container exited, or vanished while running.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: the container is gone from the runtime.
	ContainerRemoved EventType = "ContainerRemoved"
	// ContainerChanged: the container is new or changed to created or
	// unknown.
	ContainerChanged EventType = "ContainerChanged"
	// SandboxChanged: a sandbox appeared, changed state (became not ready)
	// or vanished. ContainerID is the sandbox ID.
	SandboxChanged EventType = "SandboxChanged"
)

// Event is one change of a pod seen by a relist.
type Event struct {
	UID         types.UID
	Type        EventType
	ContainerID string // container or sandbox ID
}

// Lister lists the runtime's pods cheaply (states, no exit codes).
type Lister interface {
	ListPods(ctx context.Context) ([]*runtime.PodStatus, error)
}

// PLEG relists pods every period and emits an Event per change.
type PLEG struct {
	lister Lister
	period time.Duration
	clk    clock.Clock
	events *coalesce.Queue[types.UID, Event]

	// Used by the relisting goroutine only.
	lastStart time.Time

	// recMu guards the records of what was last seen of each pod, which
	// both the relist and the container event stream update.
	recMu sync.Mutex
	prev  map[types.UID]*record
	// gen counts the container events applied; eventGen is the gen of the
	// last event applied to each pod, and lastEvent its runtime time.
	gen       uint64
	eventGen  map[types.UID]uint64
	lastEvent map[types.UID]time.Time

	// events is WithEvents' source, nil without it.
	source EventSource

	mu          sync.Mutex
	pods        []*runtime.PodStatus
	lastSuccess time.Time // start of the last successful relist
	lastErr     error     // error of the last relist, nil after a success
	running     bool

	// afterRelist is WithAfterRelist's function, nil without it.
	afterRelist func()
	// afterStreamError, when set, is called once the container event
	// stream's retry timer waits (tests step the fake clock then).
	afterStreamError func(time.Duration)
}

// record is what one relist or container event saw of one pod.
type record struct {
	sandboxes  map[string]runtime.SandboxState
	containers map[string]runtime.ContainerState
	// sandboxOf is the sandbox ID of each container.
	sandboxOf map[string]string
}

func newRecord() *record {
	return &record{
		sandboxes:  map[string]runtime.SandboxState{},
		containers: map[string]runtime.ContainerState{},
		sandboxOf:  map[string]string{},
	}
}

// New returns a PLEG that lists pods with l every period (DefaultPeriod
// when period <= 0). Nothing runs until Run.
func New(l Lister, period time.Duration, clk clock.Clock, opts ...Option) *PLEG {
	if period <= 0 {
		period = DefaultPeriod
	}
	p := &PLEG{
		lister: l,
		period: period,
		clk:    clk,
		events: coalesce.New[types.UID, Event](eventBuffer),
		prev:   map[types.UID]*record{},

		eventGen:  map[types.UID]uint64{},
		lastEvent: map[types.UID]time.Time{},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Option configures a PLEG.
type Option func(*PLEG)

// WithAfterRelist has Run call f after every relist, once the next one is
// scheduled, from Run's goroutine. Tests use it to step a fake clock only
// once the timer waits on it.
func WithAfterRelist(f func()) Option {
	return func(p *PLEG) { p.afterRelist = f }
}

// Events returns the channel of pod lifecycle events. It is never closed.
// When its reader falls behind, the events of a pod it has not taken yet
// are coalesced to the pod's latest.
// The first relist reports everything it finds as new, so pods that
// survived a restart of heartlet are synced (adopted) through the same
// path as any other change.
func (p *PLEG) Events() <-chan Event {
	return p.events.C()
}

// Run relists at once and then every period after the previous relist
// ended, until ctx is done; it then returns nil. Run may be called once.
func (p *PLEG) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return errors.New("pleg: Run called more than once")
	}
	p.running = true
	p.mu.Unlock()

	logger := klog.FromContext(ctx)
	logger.V(2).Info("Starting PLEG", "period", p.period, "containerEvents", p.source != nil)
	if p.source != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			p.watch(ctx)
		}()
	}
	for {
		p.relist(ctx)
		t := p.clk.NewTimer(p.period)
		if p.afterRelist != nil {
			p.afterRelist()
		}
		select {
		case <-ctx.Done():
			t.Stop()
			logger.V(2).Info("PLEG stopped")
			return nil
		case <-t.C():
		}
	}
}

// Healthy returns an error when no relist succeeded within RelistThreshold
// (or none ever did), naming how long ago the last one started.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	last := p.lastSuccess
	p.mu.Unlock()
	if last.IsZero() {
		return errors.New("pleg: no successful relist yet")
	}
	if since := p.clk.Since(last); since > RelistThreshold {
		return fmt.Errorf("pleg: last successful relist was %v ago, threshold is %v", since.Round(time.Millisecond), RelistThreshold)
	}
	return nil
}

// RuntimeHealthy returns an error when no relist succeeded within
// RuntimeThreshold (or none ever did): the container runtime is down or
// does not answer. Unlike Healthy, which tolerates minutes of trouble as
// upstream's PLEG check, it reports an outage of the runtime while it
// lasts. The error names the last relist error when there was one.
func (p *PLEG) RuntimeHealthy() error {
	p.mu.Lock()
	last, lastErr := p.lastSuccess, p.lastErr
	p.mu.Unlock()
	cause := ""
	if lastErr != nil {
		cause = ": " + lastErr.Error()
	}
	if last.IsZero() {
		return fmt.Errorf("container runtime: no successful relist yet%s", cause)
	}
	if since := p.clk.Since(last); since > RuntimeThreshold {
		return fmt.Errorf("container runtime unreachable: last successful relist was %v ago, threshold is %v%s",
			since.Round(time.Millisecond), RuntimeThreshold, cause)
	}
	return nil
}

// Relisted returns what the last successful relist found, and whether it
// is the latest relist: false before the first relist succeeded, when
// nothing is known yet of what runs, and while the runtime fails, when
// what is known may be stale. Decisions that remove what might still run
// wait for true. The statuses are the relist's own, not copies (a
// housekeeping pass every 2 s would copy every pod's): the caller must not
// modify them. A relist replaces them and never changes them, so they can
// be read without a lock.
func (p *PLEG) Relisted() ([]*runtime.PodStatus, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods, !p.lastSuccess.IsZero() && p.lastErr == nil
}

// relist lists the pods once, updates the metrics and emits the events.
func (p *PLEG) relist(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := p.clk.Now()
	if !p.lastStart.IsZero() {
		metrics.PLEGRelistInterval.Observe(start.Sub(p.lastStart).Seconds())
	}
	p.lastStart = start
	// Events that waited for room since the last relist go first.
	p.events.Flush()
	defer func() {
		metrics.PLEGRelistDuration.Observe(p.clk.Since(start).Seconds())
	}()

	p.recMu.Lock()
	gen := p.gen
	p.recMu.Unlock()
	pods, err := p.lister.ListPods(ctx)
	if err != nil {
		if ctx.Err() == nil {
			logger.Error(err, "PLEG relist failed")
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		return
	}
	pods = slices.DeleteFunc(slices.Clone(pods), func(s *runtime.PodStatus) bool { return s == nil })

	updateMetrics(pods)

	next := make(map[types.UID]*record, len(pods))
	for _, s := range pods {
		r := next[s.UID]
		if r == nil {
			r = newRecord()
			next[s.UID] = r
		}
		r.add(s)
	}
	p.recMu.Lock()
	// A container event applied while the runtime was being listed is
	// newer than what the list saw of its pod: the event's record stands
	// and the next relist compares against it.
	for uid, g := range p.eventGen {
		if g <= gen {
			delete(p.eventGen, uid)
			continue
		}
		if r := p.prev[uid]; r != nil {
			next[uid] = r
		} else {
			delete(next, uid)
		}
	}
	events := diff(p.prev, next)
	p.prev = next
	// The order of events of a pod the runtime no longer has is moot.
	for uid := range p.lastEvent {
		if _, ok := next[uid]; !ok {
			delete(p.lastEvent, uid)
		}
	}
	p.recMu.Unlock()

	p.mu.Lock()
	p.pods = pods
	p.lastSuccess = start
	p.lastErr = nil
	p.mu.Unlock()
	metrics.PLEGLastSeen.Set(float64(start.Unix()))

	for _, e := range events {
		p.events.Send(e.UID, e)
	}
	if n := p.events.Flush(); n > 0 {
		logger.Info("PLEG event channel full, the latest event of each pod waits for room", "waitingPods", n, "capacity", eventBuffer)
	}
}

// updateMetrics sets the running pods and containers gauges from one relist.
func updateMetrics(pods []*runtime.PodStatus) {
	counts := map[runtime.ContainerState]int{
		runtime.ContainerCreated: 0,
		runtime.ContainerRunning: 0,
		runtime.ContainerExited:  0,
		runtime.ContainerUnknown: 0,
	}
	running := 0
	for _, s := range pods {
		if slices.ContainsFunc(s.Sandboxes, func(sb *runtime.SandboxStatus) bool { return sb.State == runtime.SandboxReady }) {
			running++
		}
		for _, c := range s.Containers {
			counts[c.State]++
		}
	}
	metrics.RunningPods.Set(float64(running))
	metrics.RunningContainers.Reset()
	for state, n := range counts {
		metrics.RunningContainers.WithLabelValues(string(state)).Set(float64(n))
	}
}

// diff returns the events that lead from prev to next, by pod UID, then
// sandboxes before containers, each by ID.
func diff(prev, next map[types.UID]*record) []Event {
	uids := slices.Sorted(maps.Keys(union(prev, next)))
	var events []Event
	for _, uid := range uids {
		if uid == "" {
			// Not labelled with a pod UID: not a pod of ours.
			continue
		}
		var oldSB, newSB map[string]runtime.SandboxState
		var oldC, newC map[string]runtime.ContainerState
		if r := prev[uid]; r != nil {
			oldSB, oldC = r.sandboxes, r.containers
		}
		if r := next[uid]; r != nil {
			newSB, newC = r.sandboxes, r.containers
		}
		if maps.Equal(oldSB, newSB) && maps.Equal(oldC, newC) {
			// Nothing changed, as for nearly every pod at every relist.
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(union(oldSB, newSB))) {
			o, oldOK := oldSB[id]
			n, newOK := newSB[id]
			if oldOK != newOK || o != n {
				events = append(events, Event{UID: uid, Type: SandboxChanged, ContainerID: id})
			}
		}
		for _, id := range slices.Sorted(maps.Keys(union(oldC, newC))) {
			o, oldOK := oldC[id]
			n, newOK := newC[id]
			for _, t := range containerEvents(o, oldOK, n, newOK) {
				events = append(events, Event{UID: uid, Type: t, ContainerID: id})
			}
		}
	}
	return events
}

// containerEvents returns the events for one container that was in state
// o (when oldOK) and is in state n (when newOK).
func containerEvents(o runtime.ContainerState, oldOK bool, n runtime.ContainerState, newOK bool) []EventType {
	if oldOK == newOK && o == n {
		return nil
	}
	if !newOK {
		if o == runtime.ContainerRunning || o == runtime.ContainerUnknown {
			// It may have been running: report its end before its removal.
			return []EventType{ContainerDied, ContainerRemoved}
		}
		return []EventType{ContainerRemoved}
	}
	switch n {
	case runtime.ContainerRunning:
		return []EventType{ContainerStarted}
	case runtime.ContainerExited:
		return []EventType{ContainerDied}
	default:
		return []EventType{ContainerChanged}
	}
}

func union[K comparable, V any](a, b map[K]V) map[K]struct{} {
	out := make(map[K]struct{}, len(a)+len(b))
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}
