package kubeclient

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// The correlator's limits, client-go's defaults for the upstream kubelet.
const (
	// correlatorCacheSize bounds each of the correlator's caches; the least
	// recently used entry goes first.
	correlatorCacheSize = 4096
	// aggregateMaxEvents similar events (same object, type and reason,
	// different messages) within aggregateInterval of each other make an
	// aggregate event.
	aggregateMaxEvents = 10
	aggregateInterval  = 600 * time.Second
	// Each object's events (by source, object and type) pass a token
	// bucket of spamBurst tokens refilled at spamQPS.
	spamBurst = 25
	spamQPS   = 1. / 300.
	// aggregateMessagePrefix starts the message of an aggregate event.
	aggregateMessagePrefix = "(combined from similar events): "
)

// correlator turns the recorded events into the events written, as
// client-go's EventCorrelator does: similar events are aggregated into
// one, an event seen before becomes an update of the one written (its
// count and last timestamp), and each object's events are rate-limited.
type correlator struct {
	clock clock.PassiveClock

	mu sync.Mutex
	// aggregates holds, by aggregateKey, the messages of an object's
	// similar events and when the last came.
	aggregates *lru.Cache
	// seen holds, by the key of the event written (eventKey, or
	// aggregateKey for an aggregate event), what was written.
	seen *lru.Cache
	// spam holds, by spamKey, each object's rate limiter.
	spam *lru.Cache
}

type aggregate struct {
	messages map[string]struct{}
	last     time.Time
}

// seenEvent is what the correlator remembers of an event written.
type seenEvent struct {
	count           int32
	firstTimestamp  metav1.Time
	name            string
	resourceVersion string
}

func newCorrelator(clk clock.PassiveClock) *correlator {
	return &correlator{
		clock:      clk,
		aggregates: lru.New(correlatorCacheSize),
		seen:       lru.New(correlatorCacheSize),
		spam:       lru.New(correlatorCacheSize),
	}
}

// eventKey identifies an event up to its name, timestamps and count.
func eventKey(ev *v1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, o.FieldPath, string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.Message}, "")
}

// aggregateKey identifies similar events: eventKey without the message
// and the field path, with the reporting controller and instance.
func aggregateKey(ev *v1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.ReportingController, ev.ReportingInstance}, "")
}

// spamKey identifies an object's events of a type.
func spamKey(ev *v1.Event) string {
	o := &ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, ev.Type}, "")
}

// correlate returns the event to write for ev, with the patch that
// updates it when it was written before (its count is then above 1), or
// skip when the object's events are over their rate.
func (c *correlator) correlate(ev *v1.Event) (out *v1.Event, patch []byte, skip bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, key := c.aggregate(ev)
	out, patch = c.observe(out, key)
	return out, patch, c.overRate(out)
}

// aggregate returns ev and its eventKey, or, when ev is the
// aggregateMaxEvents-th similar event within aggregateInterval of the
// last, a new aggregate event and its aggregateKey.
func (c *correlator) aggregate(ev *v1.Event) (*v1.Event, string) {
	now := c.clock.Now()
	akey := aggregateKey(ev)
	var a *aggregate
	if v, ok := c.aggregates.Get(akey); ok {
		a = v.(*aggregate)
	}
	if a == nil || now.Sub(a.last) > aggregateInterval {
		a = &aggregate{messages: map[string]struct{}{}}
	}
	a.messages[ev.Message] = struct{}{}
	a.last = now
	c.aggregates.Add(akey, a)
	if len(a.messages) < aggregateMaxEvents {
		return ev, eventKey(ev)
	}
	// Forget one message, so that the next similar event with a new one
	// is aggregated again.
	for m := range a.messages {
		delete(a.messages, m)
		break
	}
	t := metav1.NewTime(now)
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ev.InvolvedObject.Name, t.UnixNano()),
			Namespace: ev.Namespace,
		},
		Count:          1,
		FirstTimestamp: t,
		InvolvedObject: ev.InvolvedObject,
		LastTimestamp:  t,
		Message:        aggregateMessagePrefix + ev.Message,
		Type:           ev.Type,
		Reason:         ev.Reason,
		Source:         ev.Source,
	}, akey
}

// observe returns a copy of ev that, when an event of the same key was
// written, names that event with its count one more, and the patch that
// makes it so.
func (c *correlator) observe(ev *v1.Event, key string) (*v1.Event, []byte) {
	out := *ev
	var patch []byte
	if v, ok := c.seen.Get(key); ok {
		s := v.(seenEvent)
		out.Name = s.name
		out.ResourceVersion = s.resourceVersion
		out.FirstTimestamp = s.firstTimestamp
		out.Count = s.count + 1
		patch = countPatch(&out)
	}
	c.seen.Add(key, seenEventOf(&out))
	return &out, patch
}

// overRate takes a token from ev's object's bucket, and reports whether
// there was none.
func (c *correlator) overRate(ev *v1.Event) bool {
	key := spamKey(ev)
	var limiter flowcontrol.PassiveRateLimiter
	if v, ok := c.spam.Get(key); ok {
		limiter = v.(flowcontrol.PassiveRateLimiter)
	} else {
		limiter = flowcontrol.NewTokenBucketPassiveRateLimiterWithClock(spamQPS, spamBurst, c.clock)
	}
	over := !limiter.TryAccept()
	c.spam.Add(key, limiter)
	return over
}

// written remembers ev, as the API server returned it, under its
// eventKey.
func (c *correlator) written(ev *v1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen.Add(eventKey(ev), seenEventOf(ev))
}

func seenEventOf(ev *v1.Event) seenEvent {
	return seenEvent{count: ev.Count, firstTimestamp: ev.FirstTimestamp, name: ev.Name, resourceVersion: ev.ResourceVersion}
}

// countPatch returns the strategic merge patch that updates an event
// written before to ev: its count, last timestamp and message. It is the
// JSON client-go's correlator sends, the two-way merge patch from ev with
// those fields zero (the last timestamp the Unix epoch) to ev; keys sorted.
func countPatch(ev *v1.Event) []byte {
	p := struct {
		Count         int32        `json:"count,omitempty"`
		LastTimestamp *metav1.Time `json:"lastTimestamp,omitempty"`
		Message       string       `json:"message,omitempty"`
	}{Count: ev.Count, Message: ev.Message}
	// A time marshals to whole seconds: within the epoch's second it is
	// the epoch, no change.
	if ev.LastTimestamp.IsZero() || ev.LastTimestamp.Unix() != 0 {
		p.LastTimestamp = &ev.LastTimestamp
	}
	data, err := json.Marshal(p)
	if err != nil {
		// Marshaling an int, a time and a string does not fail.
		panic(err)
	}
	return data
}
