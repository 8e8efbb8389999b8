package kubeclient

import (
	"context"
	"net"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/apiwait"
)

// Reachability follows whether the API server accepts connections, from
// the dials of every client built by Load: a dial that fails marks it down,
// the next one that succeeds marks it back. Dials are rare while the
// server is up (one HTTP/2 connection serves every request), so this costs
// nothing and sends no request of its own.
//
// It lets a caller that failed during an outage resume as soon as any
// other client (the Lease renewals retry every few seconds) reaches the
// server again, instead of after a backoff of its own: client-go's
// informers wait up to a minute before they list again.
type Reachability struct {
	clk clock.Clock

	mu   sync.Mutex
	down bool
	// lastBack is when a dial last succeeded after a failure.
	lastBack time.Time
	// back is closed when a dial succeeds after down was set; a new one
	// is made at each new outage.
	back chan struct{}
}

// DefaultWaitBack bounds a WaitBack of a caller that has its own retries to
// fall back on: about the longest backoff of client-go's reflector.
const DefaultWaitBack = time.Minute

// NewReachability returns a Reachability that starts up (no outage).
func NewReachability(clk clock.Clock) *Reachability {
	return &Reachability{clk: clk, back: make(chan struct{})}
}

// dialed records the outcome of a dial made with ctx. A dial abandoned by
// its caller (ctx ended) says nothing about the server.
func (r *Reachability) dialed(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil && !r.down:
		r.down = true
		r.back = make(chan struct{})
	case err == nil && r.down:
		r.down = false
		r.lastBack = r.clk.Now()
		close(r.back)
	}
}

// wrapDial returns dial with every outcome recorded.
func (r *Reachability) wrapDial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		r.dialed(ctx, err)
		return conn, err
	}
}

// Down reports whether the last dial failed.
func (r *Reachability) Down() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// WaitBack is for a caller whose request, started at since, failed: it
// returns true at once when the server came back (a dial succeeded after a
// failure) after since, false at once when it is not known to be down.
// Otherwise it waits until a dial succeeds (true), or until ctx ends or
// max passes (false).
func (r *Reachability) WaitBack(ctx context.Context, since time.Time, max time.Duration) bool {
	r.mu.Lock()
	down, back, lastBack := r.down, r.back, r.lastBack
	r.mu.Unlock()
	if !down {
		return lastBack.After(since)
	}
	t := r.clk.NewTimer(max)
	defer t.Stop()
	select {
	case <-back:
		return true
	case <-ctx.Done():
		return false
	case <-t.C():
		return false
	}
}

// Waiter is r's WaitBack bounded by DefaultWaitBack; nil for a nil r.
func (r *Reachability) Waiter() apiwait.WaitFunc {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, since time.Time) bool { return r.WaitBack(ctx, since, DefaultWaitBack) }
}
