// Package apiwait lets a request to the API server that failed during an
// outage resume as soon as the server is reachable again, instead of after
// the caller's own backoff: client-go's informers wait up to a minute
// before they list again. What tells that the server is back is given by
// the caller (kubeclient.Reachability follows the dials of every client).
package apiwait

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// WaitFunc is what a list or watch that failed waits on: it returns true
// when the API server became reachable again since the request started
// (at once if that already happened), false at once when it is not known
// to be unreachable, and false when a bound passes first.
type WaitFunc func(ctx context.Context, since time.Time) bool

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
