package nodepage

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// DefaultEventLogSize is how many events an EventLog keeps.
const DefaultEventLogSize = 64

// Event is one event heartlet recorded, as the page shows it. Count is how
// many times in a row it was recorded; Time is the last of them.
type Event struct {
	Time    time.Time
	Type    string
	Object  string // kind namespace/name, or kind name when cluster-scoped
	Reason  string
	Message string
	Count   int
}

// EventLog keeps the newest events heartlet recorded, bounded in number.
// An event equal to the newest one (same object, type, reason and
// message) folds into it and raises its count, as the API server's event
// aggregation would.
//
// Contract: safe for concurrent use; Record never blocks on a reader.
type EventLog struct {
	clock clock.PassiveClock

	mu     sync.Mutex
	events []Event // ring; next is the index of the oldest once full
	next   int
	full   bool
}

// NewEventLog returns a log of at most size events (DefaultEventLogSize
// when size <= 0) dated by clk (the real clock when nil).
func NewEventLog(size int, clk clock.PassiveClock) *EventLog {
	if size <= 0 {
		size = DefaultEventLogSize
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &EventLog{clock: clk, events: make([]Event, 0, size)}
}

// Record keeps e; it has the shape of client-go's event watchers.
func (l *EventLog) Record(e *v1.Event) {
	if e == nil {
		return
	}
	ev := Event{
		Time:    l.clock.Now(),
		Type:    e.Type,
		Object:  objectName(e.InvolvedObject),
		Reason:  e.Reason,
		Message: e.Message,
		Count:   1,
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.newestIndex(); n >= 0 {
		last := &l.events[n]
		if last.Object == ev.Object && last.Type == ev.Type && last.Reason == ev.Reason && last.Message == ev.Message {
			last.Count++
			last.Time = ev.Time
			return
		}
	}
	if !l.full {
		l.events = append(l.events, ev)
		if len(l.events) == cap(l.events) {
			l.full = true
		}
		return
	}
	l.events[l.next] = ev
	l.next = (l.next + 1) % len(l.events)
}

// newestIndex is the index of the newest event, or -1 when there is none.
// The caller holds mu.
func (l *EventLog) newestIndex() int {
	switch {
	case len(l.events) == 0:
		return -1
	case !l.full:
		return len(l.events) - 1
	default:
		return (l.next + len(l.events) - 1) % len(l.events)
	}
}

// Latest returns up to n events, newest first.
func (l *EventLog) Latest(n int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Event, 0, min(n, len(l.events)))
	for i, idx := 0, l.newestIndex(); i < len(l.events) && len(out) < n; i++ {
		out = append(out, l.events[idx])
		idx = (idx + len(l.events) - 1) % len(l.events)
	}
	return out
}

func objectName(ref v1.ObjectReference) string {
	name := ref.Name
	if ref.Namespace != "" {
		name = ref.Namespace + "/" + name
	}
	if ref.Kind != "" {
		name = ref.Kind + " " + name
	}
	return name
}
