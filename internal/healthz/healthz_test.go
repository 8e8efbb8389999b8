package healthz

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSyncLoop(t *testing.T) {
	tests := []struct {
		name      string
		frequency time.Duration
		entered   bool
		after     time.Duration
		wantErr   bool
	}{
		{"never entered", time.Minute, false, time.Hour, false},
		{"just entered", time.Minute, true, 0, false},
		{"within the 5 minute minimum", time.Minute, true, 5 * time.Minute, false},
		{"past the 5 minute minimum", time.Minute, true, 5*time.Minute + time.Second, true},
		{"within twice a long frequency", 10 * time.Minute, true, 20 * time.Minute, false},
		{"past twice a long frequency", 10 * time.Minute, true, 20*time.Minute + time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			s := NewSyncLoop(clk, tt.frequency)
			if tt.entered {
				s.Enter()
			}
			clk.Step(tt.after)
			if err := s.Check(); (err != nil) != tt.wantErr {
				t.Errorf("Check() = %v, want error %v", err, tt.wantErr)
			}
			s.Enter()
			if err := s.Check(); err != nil {
				t.Errorf("Check() after Enter = %v, want nil", err)
			}
		})
	}
}

func TestLog(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := NewLog(clk)
	l.flush = func() {}
	if err := l.Check(); err != nil {
		t.Fatalf("Check at start = %v", err)
	}
	// Nothing flushed since the start: the check fails after two minutes.
	clk.Step(2*time.Minute - time.Second)
	if err := l.Check(); err != nil {
		t.Errorf("Check at 1m59s = %v, want nil", err)
	}
	clk.Step(time.Second)
	if err := l.Check(); err == nil {
		t.Error("Check 2m after the last flush = nil, want an error")
	}
	l.flushOnce()
	if err := l.Check(); err != nil {
		t.Errorf("Check after a flush = %v, want nil", err)
	}
}

// Run flushes once a minute.
func TestLogRun(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	l := NewLog(clk)
	flushed := make(chan struct{})
	l.flush = func() { flushed <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for range 2 {
		for !clk.HasWaiters() {
			<-time.After(time.Millisecond)
		}
		clk.Step(time.Minute)
		select {
		case <-flushed:
		case <-time.After(5 * time.Second):
			t.Fatal("no flush a minute after the last")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
