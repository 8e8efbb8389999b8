package kubeclient

import (
	"context"
	"net"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
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

// WaitFunc is what a list or watch that failed waits on: it returns true
// when the API server became reachable again since the request started
// (at once if that already happened), false at once when it is not known
// to be unreachable, and false when a bound passes first.
type WaitFunc func(ctx context.Context, since time.Time) bool

// Waiter is r's WaitBack bounded by DefaultWaitBack; nil for a nil r.
func (r *Reachability) Waiter() WaitFunc {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, since time.Time) bool { return r.WaitBack(ctx, since, DefaultWaitBack) }
}

// afterBackDelays are the waits between the tries of a request after the
// API server became reachable again: a server that just started may refuse
// requests for a few seconds (authorization not ready yet, 403), and the
// reflector's backoff after such a refusal is as long as during the outage.
var afterBackDelays = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second}

// RetryWhenBack runs call; when it fails and wait (if not nil) reports
// that the API server, unreachable, accepts connections again, it tries
// call again at once and then after each of a few growing delays (about 8
// s in all) while it fails. An informer's list or watch then resumes as
// soon as the server is back instead of after the reflector's backoff,
// which grows to a minute during an outage.
func RetryWhenBack[T any](ctx context.Context, wait WaitFunc, call func() (T, error)) (T, error) {
	return retryWhenBack(ctx, wait, afterBackDelays, call)
}

func retryWhenBack[T any](ctx context.Context, wait WaitFunc, delays []time.Duration, call func() (T, error)) (T, error) {
	since := time.Now()
	v, err := call()
	if err == nil || wait == nil || !wait(ctx, since) {
		return v, err
	}
	logger := klog.FromContext(ctx)
	logger.V(2).Info("API server reachable again, retrying at once", "err", err)
	for _, d := range delays {
		if v, err = call(); err == nil {
			return v, nil
		}
		logger.V(2).Info("API server reachable again but the request failed, retrying", "err", err, "delay", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
	return call()
}

// ResumeListWatch returns lw with its list and watch going through
// RetryWhenBack with wait; lw itself when wait is nil.
func ResumeListWatch(lw *cache.ListWatch, wait WaitFunc) *cache.ListWatch {
	if wait == nil {
		return lw
	}
	out := *lw
	if list := lw.ListWithContextFunc; list != nil {
		out.ListWithContextFunc = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return RetryWhenBack(ctx, wait, func() (runtime.Object, error) { return list(ctx, opts) })
		}
	}
	if w := lw.WatchFuncWithContext; w != nil {
		out.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return RetryWhenBack(ctx, wait, func() (watch.Interface, error) { return w(ctx, opts) })
		}
	}
	return &out
}
