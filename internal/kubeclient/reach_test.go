package kubeclient

import (
	"context"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeDial fails while *fail, else returns one end of a pipe.
func fakeDial(fail *bool) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if *fail {
			return nil, errors.New("connect: connection refused")
		}
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}
}

// reqStart is when the caller of WaitBack started its request.
var reqStart = time.Unix(1000, 0)

func TestReachability(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// run drives r and dial; it returns what WaitBack's caller saw.
		run  func(t *testing.T, r *Reachability, clk *clocktesting.FakeClock, dial func() error, fail *bool) bool
		want bool
	}{
		{
			name: "up: no wait",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, _ *bool) bool {
				if err := dial(); err != nil {
					t.Fatal(err)
				}
				return r.WaitBack(ctx, reqStart, time.Hour)
			},
		},
		{
			name: "down, then a dial succeeds",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				if dial() == nil {
					t.Fatal("dial succeeded")
				}
				if !r.Down() {
					t.Fatal("not down after a failed dial")
				}
				got := make(chan bool)
				go func() { got <- r.WaitBack(ctx, reqStart, time.Hour) }()
				*fail = false
				if err := dial(); err != nil {
					t.Fatal(err)
				}
				return <-got
			},
			want: true,
		},
		{
			name: "down, nothing reaches the server within max",
			run: func(t *testing.T, r *Reachability, clk *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				_ = dial()
				got := make(chan bool)
				go func() { got <- r.WaitBack(ctx, reqStart, time.Minute) }()
				for !clk.HasWaiters() {
					// WaitBack arms its timer in its goroutine.
					runtime.Gosched()
				}
				clk.Step(time.Minute)
				return <-got
			},
		},
		{
			name: "down, the caller gives up",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				_ = dial()
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				return r.WaitBack(cctx, reqStart, time.Hour)
			},
		},
		{
			name: "a dial abandoned by its caller says nothing",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, _ func() error, fail *bool) bool {
				*fail = true
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				if _, err := r.wrapDial(fakeDial(fail))(cctx, "tcp", "apiserver:6443"); err == nil {
					t.Fatal("dial succeeded")
				}
				if r.Down() {
					t.Error("down after a cancelled dial")
				}
				return r.WaitBack(ctx, reqStart, time.Hour)
			},
		},
		{
			name: "back before the caller asks",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				_ = dial()
				*fail = false
				_ = dial()
				return r.WaitBack(ctx, reqStart, time.Hour)
			},
			want: true,
		},
		{
			name: "back before the caller's request: no retry",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				_ = dial()
				*fail = false
				_ = dial()
				return r.WaitBack(ctx, reqStart.Add(time.Hour), time.Hour)
			},
		},
		{
			name: "a second outage waits again",
			run: func(t *testing.T, r *Reachability, _ *clocktesting.FakeClock, dial func() error, fail *bool) bool {
				*fail = true
				_ = dial()
				*fail = false
				_ = dial()
				*fail = true
				_ = dial()
				if !r.Down() {
					t.Fatal("not down in the second outage")
				}
				got := make(chan bool)
				go func() { got <- r.WaitBack(ctx, reqStart, time.Hour) }()
				*fail = false
				_ = dial()
				return <-got
			},
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(reqStart)
			r := NewReachability(clk)
			clk.Step(time.Second) // every dial is after the caller's request
			fail := false
			d := r.wrapDial(fakeDial(&fail))
			dial := func() error {
				c, err := d(ctx, "tcp", "apiserver:6443")
				if c != nil {
					c.Close()
				}
				return err
			}
			if got := tt.run(t, r, clk, dial, &fail); got != tt.want {
				t.Errorf("WaitBack = %v, want %v", got, tt.want)
			}
		})
	}
}
