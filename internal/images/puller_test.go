package images

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// blockingRuntime holds every pull until release lets one go, and counts
// the pulls in flight.
type blockingRuntime struct {
	release chan struct{} // nil: pulls return at once

	mu       sync.Mutex
	inflight int
	max      int
	pulled   []string
}

func (b *blockingRuntime) PullImage(ctx context.Context, image string, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	b.mu.Lock()
	b.inflight++
	b.max = max(b.max, b.inflight)
	b.pulled = append(b.pulled, image)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}()
	if b.release != nil {
		select {
		case <-b.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "sha256:" + image, nil
}

func (b *blockingRuntime) counts() (inflight, maxInflight, pulled int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight, b.max, len(b.pulled)
}

// TestPullerConcurrency starts more pulls than any bound at once and checks
// how many reach the runtime together, after each one finishes too.
func TestPullerConcurrency(t *testing.T) {
	const pulls = 6
	tests := []struct {
		name string
		opts Options
		want int
	}{
		{"serialized", Options{Serialize: true}, 1},
		{"serialized wins over maxParallel", Options{Serialize: true, MaxParallel: 3}, 1},
		{"parallel with maxParallel 1", Options{MaxParallel: 1}, 1},
		{"parallel with maxParallel 3", Options{MaxParallel: 3}, 3},
		{"parallel without a bound", Options{}, pulls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &blockingRuntime{release: make(chan struct{})}
				p := NewPuller(rt, tt.opts)
				results := make(chan error, pulls)
				for i := range pulls {
					go func() {
						ref, _, err := p.PullImage(t.Context(), fmt.Sprintf("img-%d", i), nil, nil)
						if err == nil && ref != fmt.Sprintf("sha256:img-%d", i) {
							err = fmt.Errorf("ref %q", ref)
						}
						results <- err
					}()
				}
				for left := pulls; left > 0; left-- {
					synctest.Wait()
					if got, _, _ := rt.counts(); got != min(tt.want, left) {
						t.Fatalf("with %d pulls left, %d in flight, want %d", left, got, min(tt.want, left))
					}
					rt.release <- struct{}{}
					if err := <-results; err != nil {
						t.Fatalf("pull: %v", err)
					}
				}
				if _, maxInflight, pulled := rt.counts(); maxInflight != tt.want || pulled != pulls {
					t.Errorf("at most %d pulls in flight of %d, want %d of %d", maxInflight, pulled, tt.want, pulls)
				}
			})
		})
	}
}

// TestPullerWaitEndsWithContext checks that a pull waiting for its turn
// returns when its context ends, without reaching the runtime.
func TestPullerWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &blockingRuntime{release: make(chan struct{})}
		p := NewPuller(rt, Options{Serialize: true})
		first := make(chan error, 1)
		go func() {
			_, _, err := p.PullImage(t.Context(), "first", nil, nil)
			first <- err
		}()
		synctest.Wait()

		ctx, cancel := context.WithCancel(t.Context())
		second := make(chan error, 1)
		go func() {
			_, _, err := p.PullImage(ctx, "second", nil, nil)
			second <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-second; !errors.Is(err, context.Canceled) {
			t.Errorf("waiting pull after cancel = %v, want context.Canceled", err)
		}
		rt.release <- struct{}{}
		if err := <-first; err != nil {
			t.Errorf("first pull: %v", err)
		}
		if _, _, pulled := rt.counts(); pulled != 1 {
			t.Errorf("runtime saw %d pulls, want 1", pulled)
		}
	})
}

// TestPullerRateLimit checks the registry pull token bucket: a burst of
// pulls passes, the next fails with ErrPullQPSExceeded without reaching the
// runtime, and tokens come back at QPS.
func TestPullerRateLimit(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := &blockingRuntime{}
	p := NewPuller(rt, Options{Serialize: true, QPS: 1, Burst: 2, Clock: clk})
	ctx := context.Background()
	pull := func(step string, wantErr error) {
		t.Helper()
		_, _, err := p.PullImage(ctx, step, nil, nil)
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: pull = %v, want %v", step, err, wantErr)
		}
	}
	pull("burst 1", nil)
	pull("burst 2", nil)
	pull("over the burst", ErrPullQPSExceeded)
	clk.Step(500 * time.Millisecond)
	pull("half a token later", ErrPullQPSExceeded)
	clk.Step(500 * time.Millisecond)
	pull("one token later", nil)
	pull("again at once", ErrPullQPSExceeded)
	if _, _, pulled := rt.counts(); pulled != 3 {
		t.Errorf("runtime saw %d pulls, want 3 (refused pulls never reach it)", pulled)
	}
	if ErrPullQPSExceeded.Error() != "pull QPS exceeded" {
		t.Errorf("error text %q, want upstream's \"pull QPS exceeded\"", ErrPullQPSExceeded)
	}
}

// TestPullerNoRateLimit checks that registryPullQPS 0 means no limit.
func TestPullerNoRateLimit(t *testing.T) {
	rt := &blockingRuntime{}
	p := NewPuller(rt, Options{QPS: 0, Burst: 1, Clock: testingclock.NewFakeClock(time.Now())})
	for i := range 100 {
		if _, _, err := p.PullImage(context.Background(), fmt.Sprint(i), nil, nil); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
}

// TestPullerDuration checks that the duration returned is the pull's own.
func TestPullerDuration(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := NewPuller(stepRuntime{clk: clk, d: 3 * time.Second}, Options{Serialize: true, Clock: clk})
	_, d, err := p.PullImage(context.Background(), "img", nil, nil)
	if err != nil || d != 3*time.Second {
		t.Errorf("pull = %v, %v; want 3s, nil", d, err)
	}
}

type stepRuntime struct {
	clk *testingclock.FakeClock
	d   time.Duration
}

func (s stepRuntime) PullImage(context.Context, string, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	s.clk.Step(s.d)
	return "ref", nil
}
