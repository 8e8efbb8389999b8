package csi

import (
	"context"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// waiters is the number of holders and waiters of a volume's lock.
func (l *volumeLocks) waiters(driver, handle string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if vl := l.m[driver+"/"+handle]; vl != nil {
		return vl.users
	}
	return 0
}

// holdUntilSecond returns a driver hook that holds the first call until
// the second operation on the volume either waits for the volume's lock
// (the lock works) or reaches the driver itself (it does not), so that
// either ordering is forced without timing.
func holdUntilSecond(e *env, handle string, second <-chan struct{}) func() {
	var once sync.Once
	return func() {
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		for e.pub.locks.waiters(testDriver, handle) < 2 {
			select {
			case <-second:
				return
			default:
				runtime.Gosched()
			}
		}
	}
}

// Two pods sharing a volume set up at once: one stage, two publishes.
func TestConcurrentPublishStagesOnce(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	pv := csiPV("pv-1", "vol-1")
	ctx := context.Background()
	second := make(chan struct{})
	var stages int
	var mu sync.Mutex
	hold := holdUntilSecond(e, "vol-1", second)
	srv.onStage = func() {
		mu.Lock()
		stages++
		if stages == 2 {
			close(second)
		}
		mu.Unlock()
		hold()
	}
	var wg sync.WaitGroup
	for _, uid := range []string{"a", "b"} {
		wg.Go(func() {
			if _, err := e.pub.SetUpPersistent(ctx, pod(uid), claimVolume(), pv, false); err != nil {
				t.Errorf("SetUpPersistent %s: %v", uid, err)
			}
		})
	}
	wg.Wait()
	if n := countCalls(srv, "stage vol-1"); n != 1 {
		t.Errorf("%d stages for two pods set up at once, want 1: %v", n, srv.got())
	}
}

// A pod's tear-down unstaging a volume while another pod sets it up: the
// set-up never publishes on a staging being undone; it stages again.
func TestConcurrentUnstageAndPublish(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		setUp  func(e *env, uid string) error
		staged func(e *env) error
	}{
		{name: "filesystem",
			setUp: func(e *env, uid string) error {
				_, err := e.pub.SetUpPersistent(ctx, pod(uid), claimVolume(), csiPV("pv-1", "vol-1"), false)
				return err
			},
			staged: func(e *env) error {
				_, err := readVolData(e.pub.StagingDir(testDriver, "vol-1"))
				return err
			}},
		{name: "block",
			setUp: func(e *env, uid string) error {
				_, err := e.pub.SetUpPersistentBlock(ctx, pod(uid), claimVolume(), blockPV("pv-1", "vol-1"), false)
				return err
			},
			staged: func(e *env) error {
				_, err := os.Stat(e.pub.BlockStagingPath("pv-1"))
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &nodeServer{stage: true}
			e := newEnv(t, srv, csiDriverObj(nil))
			if err := tc.setUp(e, "a"); err != nil {
				t.Fatal(err)
			}
			second := make(chan struct{})
			unstaging := make(chan struct{})
			hold := holdUntilSecond(e, "vol-1", second)
			srv.onUnstage = func() {
				close(unstaging)
				hold()
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := e.pub.TearDown(ctx, "a"); err != nil {
					t.Errorf("TearDown: %v", err)
				}
			})
			<-unstaging
			if err := tc.setUp(e, "b"); err != nil {
				t.Error(err)
			}
			close(second)
			wg.Wait()
			got := srv.got()
			last := slices.Index(got, "unstage vol-1")
			if last < 0 || countCalls(srv, "stage vol-1") != 2 || slices.Index(got[last:], "stage vol-1") < 0 {
				t.Fatalf("calls %v: pod b's publish does not follow a stage after the unstage", got)
			}
			if err := tc.staged(e); err != nil || !e.pub.isStaged(testDriver+"/vol-1") {
				t.Errorf("the volume pod b uses is not staged: %v", err)
			}
		})
	}
}
