package pleg

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
)

const (
	// minStreamBackoff and maxStreamBackoff bound the wait before the
	// container event stream is opened again after it failed; the wait
	// doubles with every failure in a row and resets once a stream opens.
	minStreamBackoff = time.Second
	maxStreamBackoff = 30 * time.Second
)

// EventSource is a runtime that pushes container events (CRI
// GetContainerEvents), as runtime.Runtime.
type EventSource interface {
	// WatchContainerEvents calls connected once the stream is open, then
	// f for every event, until the stream fails or ctx is done. It returns
	// an error wrapping runtime.ErrEventsUnimplemented when the runtime
	// offers no stream.
	WatchContainerEvents(ctx context.Context, connected func(), f func(runtime.ContainerEvent)) error
}

// WithEvents has Run also follow src's container event stream: an event
// updates the record of its one pod and emits that pod's events at once,
// the relist stays as it is (same period) and catches what the stream
// misses. A stream that fails is opened again with backoff; a runtime
// that does not implement the stream leaves the relist alone, as without
// this option.
func WithEvents(src EventSource) Option {
	return func(p *PLEG) { p.source = src }
}

// watch follows the container event stream until ctx is done or the
// runtime turns out not to implement it.
func (p *PLEG) watch(ctx context.Context) {
	logger := klog.FromContext(ctx)
	backoff := minStreamBackoff
	for {
		// gRPC opens a server stream before the runtime answers it, so an
		// open stream is no proof of health: the backoff resets only once
		// the stream delivered an event or stayed up for maxStreamBackoff.
		var connected, delivered atomic.Bool
		opened := p.clk.Now()
		err := p.source.WatchContainerEvents(ctx, func() {
			connected.Store(true)
			metrics.EventedPLEGConnSuccess.Inc()
			logger.V(2).Info("Container event stream open")
		}, func(e runtime.ContainerEvent) {
			delivered.Store(true)
			p.handleEvent(ctx, e)
		})
		if delivered.Load() || p.clk.Since(opened) >= maxStreamBackoff {
			backoff = minStreamBackoff
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, runtime.ErrEventsUnimplemented) {
			logger.Info("Container runtime does not implement container events, relisting only", "period", p.period, "err", err)
			return
		}
		metrics.EventedPLEGConnError.Inc()
		logger.Error(err, "Container event stream failed, relisting only until it is open again", "retryIn", backoff, "wasOpen", connected.Load())
		t := p.clk.NewTimer(backoff)
		if p.afterStreamError != nil {
			p.afterStreamError(backoff)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		backoff = min(2*backoff, maxStreamBackoff)
	}
}

// handleEvent applies one container event to the record of its pod and
// emits the pod's events. Its cost grows with the pod's sandboxes and
// containers, not with the node's pods.
func (p *PLEG) handleEvent(ctx context.Context, e runtime.ContainerEvent) {
	logger := klog.FromContext(ctx)
	if e.Pod == nil || e.Pod.UID == "" {
		// Not labelled with a pod UID: not a pod of ours.
		return
	}
	uid := e.Pod.UID
	p.recMu.Lock()
	if last, ok := p.lastEvent[uid]; ok && e.CreatedAt.Before(last) {
		p.recMu.Unlock()
		// Older than an event already applied: the record is newer.
		logger.V(4).Info("Dropping out-of-order container event", "podUID", uid, "container", e.ContainerID, "type", e.Type)
		return
	}
	p.lastEvent[uid] = e.CreatedAt
	old := p.prev[uid]
	next := old.clone()
	next.merge(e)
	p.gen++
	p.eventGen[uid] = p.gen
	p.prev[uid] = next
	events := diff(map[types.UID]*record{uid: old}, map[types.UID]*record{uid: next})
	p.recMu.Unlock()

	logger.V(4).Info("Container event", "pod", klog.KRef(e.Pod.Namespace, e.Pod.Name), "podUID", uid, "container", e.ContainerID, "type", e.Type, "events", len(events))
	for _, ev := range events {
		p.events.Send(uid, ev)
	}
	if n := p.events.Flush(); n > 0 {
		logger.Info("PLEG event channel full, the latest event of each pod waits for room", "waitingPods", n, "capacity", eventBuffer)
	}
}

// add adds the sandboxes and containers of s.
func (r *record) add(s *runtime.PodStatus) {
	for _, sb := range s.Sandboxes {
		r.sandboxes[sb.ID] = sb.State
	}
	for _, c := range s.Containers {
		r.containers[c.ID] = c.State
		r.sandboxOf[c.ID] = c.SandboxID
	}
}

// clone returns a copy of r, an empty record when r is nil.
func (r *record) clone() *record {
	out := newRecord()
	if r == nil {
		return out
	}
	for k, v := range r.sandboxes {
		out.sandboxes[k] = v
	}
	for k, v := range r.containers {
		out.containers[k] = v
	}
	for k, v := range r.sandboxOf {
		out.sandboxOf[k] = v
	}
	return out
}

// merge applies a container event: the event reports its sandbox with all
// of that sandbox's containers, so those replace what r had of the
// sandbox; other sandboxes of the pod are left as they are. A deleted
// container is gone whatever the event lists.
func (r *record) merge(e runtime.ContainerEvent) {
	for _, sb := range e.Pod.Sandboxes {
		r.sandboxes[sb.ID] = sb.State
		for id, of := range r.sandboxOf {
			if of == sb.ID {
				delete(r.containers, id)
				delete(r.sandboxOf, id)
			}
		}
	}
	r.add(e.Pod)
	if e.Type == runtime.ContainerDeletedEvent {
		delete(r.containers, e.ContainerID)
		delete(r.sandboxOf, e.ContainerID)
	}
}
