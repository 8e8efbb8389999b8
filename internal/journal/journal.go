// Package journal keeps a bounded per-pod record of heartlet's decisions
// about each pod: admission, volumes, image pulls, containers, probes,
// backoffs and status writes. It answers "why is this pod (not) running?"
// for `heartlet explain` and the node page.
//
// Memory stays bounded: each pod keeps at most a fixed number of entries
// (the oldest are dropped first, and an entry that repeats the previous one
// is folded into it with a count), and a pod's entries are dropped when it
// is forgotten.
package journal

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// DefaultSize is the number of entries kept per pod.
const DefaultSize = 64

// Kind says what an entry is about.
type Kind string

// The kinds of entries.
const (
	KindAdmission Kind = "admission"
	KindVolume    Kind = "volume"
	KindImage     Kind = "image"
	KindContainer Kind = "container"
	KindProbe     Kind = "probe"
	KindBackoff   Kind = "backoff"
	KindStatus    Kind = "status"
)

// Entry is one decision about a pod.
type Entry struct {
	// Time is when it was taken; Record sets it from the journal's clock
	// when zero. For a folded repeat it is the latest time.
	Time time.Time `json:"time"`
	// First is when a folded repeat was first recorded (Count > 1).
	First   time.Time `json:"first,omitzero"`
	Kind    Kind      `json:"kind"`
	Message string    `json:"message"`
	// Container names the container the entry is about, if any.
	Container string `json:"container,omitempty"`
	// Reason is the machine-readable reason (e.g. ImagePullBackOff).
	Reason string `json:"reason,omitempty"`
	// Duration is how long the step took (an image pull), in nanoseconds.
	Duration time.Duration `json:"duration,omitempty"`
	// NextRetry is when a backoff lets the step be tried again.
	NextRetry time.Time `json:"nextRetry,omitzero"`
	// Count is how many times in a row the same entry was recorded, when
	// more than once.
	Count int `json:"count,omitempty"`
}

// same tells whether e repeats prev: the same kind, message, container
// and reason.
func (e Entry) same(prev Entry) bool {
	return e.Kind == prev.Kind && e.Message == prev.Message && e.Container == prev.Container && e.Reason == prev.Reason
}

// PodJournal is one pod's journal as the kubelet API serves it
// (GET /debug/pods/{namespace}/{name}/journal), oldest entry first.
type PodJournal struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Now is the node's time when the journal was read, so that a reader
	// on another machine can show times relative to it.
	Now     time.Time `json:"now"`
	Entries []Entry   `json:"entries"`
}

// Journal holds the entries of every pod. It is safe for concurrent use;
// the nil *Journal records nothing and holds nothing.
type Journal struct {
	size  int
	clock clock.PassiveClock

	mu   sync.Mutex
	pods map[types.UID]*ring
}

// New returns a journal keeping size entries per pod (DefaultSize when
// size <= 0), timed by clk (the real clock when nil).
func New(size int, clk clock.PassiveClock) *Journal {
	if size <= 0 {
		size = DefaultSize
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Journal{size: size, clock: clk, pods: map[types.UID]*ring{}}
}

// Now is the journal's clock's time.
func (j *Journal) Now() time.Time {
	if j == nil {
		return time.Now()
	}
	return j.clock.Now()
}

// Record adds e to the pod's entries. An entry that repeats the pod's
// latest one is folded into it: its time is updated and its count raised.
func (j *Journal) Record(uid types.UID, e Entry) {
	if j == nil || uid == "" {
		return
	}
	if e.Time.IsZero() {
		e.Time = j.clock.Now()
	}
	e.First, e.Count = time.Time{}, 0
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.pods[uid]
	if r == nil {
		r = &ring{entries: make([]Entry, 0, min(j.size, 8))}
		j.pods[uid] = r
	}
	r.add(e, j.size)
}

// Entries returns a copy of the pod's entries, oldest first; nil for an
// unknown pod.
func (j *Journal) Entries(uid types.UID) []Entry {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.pods[uid]
	if r == nil {
		return nil
	}
	return r.list()
}

// Latest returns up to n of the pod's newest entries, oldest first.
func (j *Journal) Latest(uid types.UID, n int) []Entry {
	all := j.Entries(uid)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}

// Pods returns the UIDs of the pods with entries, sorted.
func (j *Journal) Pods() []types.UID {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	uids := make([]types.UID, 0, len(j.pods))
	for uid := range j.pods {
		uids = append(uids, uid)
	}
	j.mu.Unlock()
	sort.Slice(uids, func(a, b int) bool { return uids[a] < uids[b] })
	return uids
}

// Forget drops the pod's entries; forgetting an unknown pod is a no-op.
func (j *Journal) Forget(uid types.UID) {
	if j == nil {
		return
	}
	j.mu.Lock()
	delete(j.pods, uid)
	j.mu.Unlock()
}

// ring is one pod's entries: a circular buffer that grows to the journal's
// size, then overwrites its oldest entry.
type ring struct {
	entries []Entry
	next    int // where the next entry goes once the ring is full
}

func (r *ring) add(e Entry, size int) {
	if n := len(r.entries); n > 0 {
		// next is 0 until the ring is full: the latest is just before it.
		last := &r.entries[(r.next+n-1)%n]
		if e.same(*last) {
			if last.Count == 0 {
				last.First, last.Count = last.Time, 1
			}
			first, count := last.First, last.Count+1
			*last = e
			last.First, last.Count = first, count
			return
		}
	}
	if len(r.entries) < size {
		r.entries = append(r.entries, e)
		return
	}
	r.entries[r.next] = e
	r.next = (r.next + 1) % size
}

func (r *ring) list() []Entry {
	out := make([]Entry, 0, len(r.entries))
	out = append(out, r.entries[r.next:]...)
	return append(out, r.entries[:r.next]...)
}
