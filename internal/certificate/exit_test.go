package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeManager is a certificate manager whose current certificate and
// server health the test sets.
type fakeManager struct {
	mu      sync.Mutex
	cur     *tls.Certificate
	healthy bool
}

func (m *fakeManager) run(ctx context.Context) { <-ctx.Done() }
func (m *fakeManager) Current() *tls.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}
func (m *fakeManager) ServerHealthy() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.healthy
}

func (m *fakeManager) set(cur *tls.Certificate, healthy bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur, m.healthy = cur, healthy
}

func certValidUntil(notAfter time.Time) *tls.Certificate {
	return &tls.Certificate{Leaf: &x509.Certificate{NotAfter: notAfter}}
}

// TestClientExitsWithoutCertificate: as upstream's rotating transport with
// exitAfter five minutes, Run ends with ErrNoClientCertificate once there
// has been no valid client certificate for longer than ExitAfter while
// the API server answers, and not while it does not answer or before the
// bound.
func TestClientExitsWithoutCertificate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		// advance the clock by this much, then set the manager's state
		// and see one check.
		advance time.Duration
		cur     *tls.Certificate
		healthy bool
	}
	tests := []struct {
		name  string
		steps []step
		exit  bool
	}{{
		name:  "no certificate for longer than ExitAfter, server answers",
		steps: []step{{advance: 4 * time.Minute, healthy: true}, {advance: 61 * time.Second, healthy: true}},
		exit:  true,
	}, {
		name:  "no certificate for exactly ExitAfter",
		steps: []step{{advance: 5 * time.Minute, healthy: true}},
	}, {
		name:  "no certificate for long, server does not answer",
		steps: []step{{advance: time.Hour, healthy: false}, {advance: time.Hour, healthy: false}},
	}, {
		name: "certificate lost then back before the bound",
		steps: []step{{advance: 4 * time.Minute, healthy: true}, {advance: time.Minute, cur: certValidUntil(start.Add(24 * time.Hour)), healthy: true},
			{advance: 4 * time.Minute, healthy: true}},
	}, {
		name:  "certificate lost after a valid one, for longer than the bound",
		steps: []step{{advance: 4 * time.Minute, cur: certValidUntil(start.Add(24 * time.Hour)), healthy: true}, {advance: 5*time.Minute + time.Second, healthy: true}},
		exit:  true,
	}, {
		name:  "current certificate expired, server answers",
		steps: []step{{advance: 2 * time.Minute, cur: certValidUntil(start.Add(time.Minute)), healthy: true}},
		exit:  true,
	}, {
		name:  "current certificate expired, server does not answer",
		steps: []step{{advance: 2 * time.Minute, cur: certValidUntil(start.Add(time.Minute)), healthy: false}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			mgr := &fakeManager{}
			ticks := make(tickGauge)
			r := newRotating(mgr, "client", clk, ticks)
			r.exitAfter = DefaultExitAfter
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx, nil) }()
			ticks.wait(t) // Run's first report, before its loop
			for i, s := range tt.steps {
				mgr.set(s.cur, s.healthy)
				waitForWaiter(t, clk)
				clk.Step(s.advance)
				last := i == len(tt.steps)-1
				if !last || !tt.exit {
					ticks.wait(t)
					continue
				}
				{
					select {
					case err := <-done:
						if !errors.Is(err, ErrNoClientCertificate) {
							t.Fatalf("Run = %v, want ErrNoClientCertificate", err)
						}
						return
					case <-time.After(waitFor):
						t.Fatal("Run did not end")
					}
				}
			}
			// The last tick was reported, so its checks passed: Run goes on.
			select {
			case err := <-done:
				t.Fatalf("Run ended with %v, want it to go on", err)
			default:
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run after cancel = %v, want nil", err)
			}
		})
	}
}

// TestClientNoExitByDefault: without ExitAfter (the serving certificate,
// or a caller that does not ask for it) Run never ends on its own.
func TestClientNoExitByDefault(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mgr := &fakeManager{healthy: true}
	ticks := make(tickGauge)
	r := newRotating(mgr, "serving", clk, ticks)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, nil) }()
	ticks.wait(t)
	for range 3 {
		waitForWaiter(t, clk)
		clk.Step(time.Hour)
		ticks.wait(t)
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended with %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// tickGauge is a TTL gauge that tells the test of each report: Run reports
// once before its loop and once at the end of each tick's checks.
type tickGauge chan struct{}

func (g tickGauge) Set(float64) { g <- struct{}{} }

func (g tickGauge) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g:
	case <-time.After(waitFor):
		t.Fatal("Run did not report a tick")
	}
}

// waitForWaiter waits until Run waits on the fake clock, so that a Step
// is not taken before Run's timer exists (and then missed).
func waitForWaiter(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Run never waited on the clock")
		}
		runtime.Gosched()
	}
}
