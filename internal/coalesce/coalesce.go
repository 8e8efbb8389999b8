// Package coalesce is the one implementation of heartlet's channel rule
// (docs/architecture.md, "Channels"): a channel between two components is
// bounded, never blocks its producer, and coalesces what its reader has
// not taken yet instead of dropping it.
package coalesce

import "sync"

// Queue delivers values on a buffered channel. Send never blocks: when the
// channel is full, the value waits under its key, replacing a value that
// waits under the same key, so at most one value per key waits beside the
// channel's capacity. Flush moves waiting values into the channel as room
// frees; the producer calls it on its own schedule (every relist, every
// probe round), so no goroutine of its own is needed and nothing outlives
// the producer's context.
type Queue[K comparable, V any] struct {
	ch chan V

	mu      sync.Mutex
	order   []K // keys of waiting values, oldest first
	waiting map[K]V
}

// New returns a queue whose channel holds capacity values.
func New[K comparable, V any](capacity int) *Queue[K, V] {
	return &Queue[K, V]{ch: make(chan V, capacity), waiting: map[K]V{}}
}

// C is the channel the reader takes values from. It is never closed.
func (q *Queue[K, V]) C() <-chan V {
	return q.ch
}

// Send delivers v under key k without blocking. It reports false when v
// had to wait beside the full channel (replacing a waiting value of k).
func (q *Queue[K, V]) Send(k K, v V) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushLocked()
	if len(q.order) == 0 {
		select {
		case q.ch <- v:
			return true
		default:
		}
	}
	if _, ok := q.waiting[k]; !ok {
		q.order = append(q.order, k)
	}
	q.waiting[k] = v
	return false
}

// Flush moves waiting values into the channel while it has room, oldest
// key first, and returns how many still wait.
func (q *Queue[K, V]) Flush() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushLocked()
	return len(q.order)
}

func (q *Queue[K, V]) flushLocked() {
	for len(q.order) > 0 {
		k := q.order[0]
		select {
		case q.ch <- q.waiting[k]:
		default:
			return
		}
		delete(q.waiting, k)
		q.order = q.order[1:]
	}
}
