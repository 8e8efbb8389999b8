package lockfile

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestAcquireWaitsForTheHolder locks the file from another open file
// description (as another process would) and checks that Acquire waits
// until it is released.
func TestAcquireWaitsForTheHolder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	other := holdLock(t, path)
	fc := clocktesting.NewFakeClock(time.Now())
	got := make(chan error, 1)
	var release func()
	go func() {
		var err error
		release, err = Acquire(ctx, path, fc)
		got <- err
	}()
	for !fc.HasWaiters() {
		runtime.Gosched()
	}
	select {
	case err := <-got:
		t.Fatalf("Acquire returned while the lock was held: %v", err)
	default:
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	fc.Step(retryInterval)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// Now this process holds it: another description cannot take it.
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Fatal("the lock was not held after Acquire")
	}
	release()
	release()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
}

func TestAcquireEndsWithContext(t *testing.T) {
	_, tctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	holdLock(t, path)
	ctx, cancel := context.WithCancel(tctx)
	cancel()
	if _, err := Acquire(ctx, path, clocktesting.NewFakeClock(time.Now())); err == nil {
		t.Fatal("Acquire succeeded on a held lock with a done context")
	}
}

func TestAcquireBadPath(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	if _, err := Acquire(ctx, filepath.Join(t.TempDir(), "missing", "x.lock"), clocktesting.NewFakeClock(time.Now())); err == nil {
		t.Fatal("Acquire succeeded in a missing directory")
	}
}

func TestWatchContention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		contend func(t *testing.T, path string)
	}{
		{"another process opens the file", func(t *testing.T, path string) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(tctx)
			defer cancel()
			path := filepath.Join(t.TempDir(), "kubelet.lock")
			release, err := Acquire(ctx, path, clocktesting.NewFakeClock(time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			ch, err := WatchContention(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-ch:
				t.Fatal("contention reported before anyone else opened the file")
			default:
			}
			tc.contend(t, path)
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("no contention reported")
			}
		})
	}
	t.Run("the watch ends with the context", func(t *testing.T) {
		_, tctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(tctx)
		path := filepath.Join(t.TempDir(), "kubelet.lock")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ch, err := WatchContention(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		// goleak in TestMain checks that the watch's goroutines end; a
		// cancelled watch never reports contention.
		_ = ch
	})
	t.Run("missing file", func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		if _, err := WatchContention(ctx, filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Fatal("watching a missing file succeeded")
		}
	})
}

// holdLock takes an exclusive flock on path through an open file
// description of its own, as another process would; the file is closed
// when the test ends.
func holdLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return f
}
