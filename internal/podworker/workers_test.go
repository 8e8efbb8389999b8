package podworker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
)

// waitTimeout bounds every wait on a worker goroutine in these tests.
const waitTimeout = 10 * time.Second

type callOp string

const (
	opSync        callOp = "sync"
	opTerminating callOp = "terminating"
	opTerminated  callOp = "terminated"
)

// call is one observed Syncer call.
type call struct {
	op    callOp
	typ   UpdateType
	pod   *v1.Pod
	grace int64
	at    time.Time
	ctx   context.Context
	n     int // 1-based index among calls of the same op for the same UID
}

// fakeSyncer records every call on a channel and answers through optional
// hooks (nil hooks succeed). A call's hook is the one set before the call
// is published, so a test that changes the hook after seeing a call never
// changes that call's answer.
type fakeSyncer struct {
	clk   *testclock.FakeClock
	calls chan call

	mu     sync.Mutex
	counts map[types.UID]map[callOp]int
	sync   func(ctx context.Context, c call) (SyncResult, error)
	term   func(ctx context.Context, c call) error
	clean  func(ctx context.Context, c call) error
}

func newFakeSyncer(clk *testclock.FakeClock) *fakeSyncer {
	return &fakeSyncer{clk: clk, calls: make(chan call, 1000), counts: map[types.UID]map[callOp]int{}}
}

func (f *fakeSyncer) record(ctx context.Context, op callOp, t UpdateType, pod *v1.Pod, grace int64) call {
	f.mu.Lock()
	if f.counts[pod.UID] == nil {
		f.counts[pod.UID] = map[callOp]int{}
	}
	f.counts[pod.UID][op]++
	c := call{op: op, typ: t, pod: pod, grace: grace, at: f.clk.Now(), ctx: ctx, n: f.counts[pod.UID][op]}
	f.mu.Unlock()
	f.calls <- c
	return c
}

func (f *fakeSyncer) SyncPod(ctx context.Context, t UpdateType, pod *v1.Pod) (SyncResult, error) {
	f.mu.Lock()
	h := f.sync
	f.mu.Unlock()
	c := f.record(ctx, opSync, t, pod, 0)
	if h == nil {
		return SyncResult{}, nil
	}
	return h(ctx, c)
}

func (f *fakeSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, grace int64) error {
	f.mu.Lock()
	h := f.term
	f.mu.Unlock()
	c := f.record(ctx, opTerminating, 0, pod, grace)
	if h == nil {
		return nil
	}
	return h(ctx, c)
}

func (f *fakeSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	h := f.clean
	f.mu.Unlock()
	c := f.record(ctx, opTerminated, 0, pod, 0)
	if h == nil {
		return nil
	}
	return h(ctx, c)
}

func (f *fakeSyncer) setSync(h func(ctx context.Context, c call) (SyncResult, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sync = h
}

func (f *fakeSyncer) setTerm(h func(ctx context.Context, c call) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.term = h
}

func (f *fakeSyncer) setClean(h func(ctx context.Context, c call) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clean = h
}

type harness struct {
	t      *testing.T
	clk    *testclock.FakeClock
	s      *fakeSyncer
	w      *Workers
	act    *activity
	cancel context.CancelFunc
	done   chan error
}

const testResync = time.Minute

func newHarness(t *testing.T) *harness {
	h := newStoppedHarness(t, testResync)
	h.start()
	return h
}

func newStoppedHarness(t *testing.T, resync time.Duration) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newFakeSyncer(clk)
	act := newActivity()
	h := &harness{t: t, clk: clk, s: s, act: act, w: New(s, clk, resync, WithActivity(act.add))}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.w.Run(ctx) }()
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run() = %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		h.t.Errorf("Run did not return after its context was cancelled")
	}
	h.cancel = nil
}

// next returns the next Syncer call.
func (h *harness) next() call {
	h.t.Helper()
	select {
	case c := <-h.s.calls:
		return c
	case <-time.After(waitTimeout):
		h.t.Fatalf("no Syncer call within %v", waitTimeout)
	}
	return call{}
}

// expect returns the next call and checks its op and pod UID.
func (h *harness) expect(op callOp, uid types.UID) call {
	h.t.Helper()
	c := h.next()
	if c.op != op || c.pod.UID != uid {
		h.t.Fatalf("call = %s(%s), want %s(%s)", c.op, c.pod.UID, op, uid)
	}
	return c
}

// activity counts the workers' busy goroutines and timer callbacks, as
// told by WithActivity.
type activity struct {
	mu      sync.Mutex
	busy    int
	changed chan struct{}
}

func newActivity() *activity { return &activity{changed: make(chan struct{})} }

func (a *activity) add(delta int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.busy += delta
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *activity) state() (busy int, changed <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.busy, a.changed
}

// waitIdle waits until no worker goroutine runs and no timer callback is
// pending.
func (h *harness) waitIdle() {
	h.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		busy, ch := h.act.state()
		if busy == 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			h.t.Fatalf("workers not idle within %v", waitTimeout)
		}
	}
}

// noCalls waits until the workers are idle and checks that no Syncer call
// is left unobserved.
func (h *harness) noCalls() {
	h.t.Helper()
	h.waitIdle()
	select {
	case c := <-h.s.calls:
		h.t.Fatalf("unexpected call %s(%s) type %s", c.op, c.pod.UID, c.typ)
	default:
	}
}

func (h *harness) state(uid types.UID) State {
	h.t.Helper()
	st, ok := h.w.State(uid)
	if !ok {
		h.t.Fatalf("State(%s): pod unknown", uid)
	}
	return st
}

func (h *harness) wantForgotten(uid types.UID) {
	h.t.Helper()
	h.waitIdle()
	if h.w.Known(uid) {
		st, _ := h.w.State(uid)
		h.t.Fatalf("pod %s still known in state %s, want forgotten", uid, st)
	}
}

func int64p(v int64) *int64 { return &v }

func newPod(uid, name string, grace *int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: grace,
			Containers:                    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
}

func withVersion(p *v1.Pod, v string) *v1.Pod {
	p = p.DeepCopy()
	p.ResourceVersion = v
	return p
}

// blockUntilCancelled is a hook that holds its call until its context is
// cancelled.
func blockUntilCancelled(ctx context.Context, _ call) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestCreateSyncsOnce(t *testing.T) {
	h := newHarness(t)
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	c := h.expect(opSync, "a")
	if c.typ != UpdateCreate {
		t.Errorf("first SyncPod type = %s, want create", c.typ)
	}
	if c.pod != p {
		t.Errorf("SyncPod got another pod object than the one given")
	}
	h.noCalls()
	if st := h.state("a"); st != StateSyncing {
		t.Errorf("State = %s, want syncing", st)
	}
	if got := h.w.Pods(); len(got) != 1 || got["a"] != StateSyncing {
		t.Errorf("Pods() = %v, want map[a:syncing]", got)
	}
}

func TestUnknownPodsAreIgnoredBySync(t *testing.T) {
	h := newHarness(t)
	h.w.Sync("nope")
	h.w.Update(Update{Type: UpdateSync, Pod: newPod("nope", "x", nil)})
	h.w.Update(Update{Type: UpdateCreate})                              // no pod: ignored
	h.w.Update(Update{Type: UpdateType(9), Pod: newPod("x", "x", nil)}) // unknown type: ignored
	h.noCalls()
	for _, uid := range []types.UID{"nope", "x"} {
		if h.w.Known(uid) {
			t.Errorf("Known(%s) = true after an ignored update", uid)
		}
	}
}

func TestCoalescing(t *testing.T) {
	tests := []struct {
		name     string
		updates  func(w *Workers, p *v1.Pod)
		wantType UpdateType
		wantVer  string
	}{
		{
			name: "three updates while busy",
			updates: func(w *Workers, p *v1.Pod) {
				for _, v := range []string{"2", "3", "4"} {
					w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, v)})
				}
			},
			wantType: UpdateUpdate,
			wantVer:  "4",
		},
		{
			name: "syncs and an update",
			updates: func(w *Workers, p *v1.Pod) {
				w.Sync(p.UID)
				w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, "2")})
				w.Sync(p.UID)
			},
			wantType: UpdateUpdate,
			wantVer:  "2",
		},
		{
			name: "syncs only",
			updates: func(w *Workers, p *v1.Pod) {
				w.Sync(p.UID)
				w.Update(Update{Type: UpdateSync, Pod: p})
			},
			wantType: UpdateSync,
			wantVer:  "1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			release := make(chan struct{})
			h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
				if c.n == 2 {
					<-release
				}
				return SyncResult{}, nil
			})
			p := withVersion(newPod("a", "web", nil), "1")
			h.w.Update(Update{Type: UpdateCreate, Pod: p})
			h.expect(opSync, "a")
			h.waitIdle()
			h.w.Sync("a")
			h.expect(opSync, "a") // now blocked in the hook
			tc.updates(h.w, p)
			close(release)
			c := h.expect(opSync, "a")
			if c.typ != tc.wantType || c.pod.ResourceVersion != tc.wantVer {
				t.Errorf("coalesced SyncPod = (%s, version %q), want (%s, version %q)",
					c.typ, c.pod.ResourceVersion, tc.wantType, tc.wantVer)
			}
			h.noCalls()
		})
	}
}

func TestUpdateBeforeFirstSyncStaysCreate(t *testing.T) {
	h := newStoppedHarness(t, testResync)
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: withVersion(p, "1")})
	h.w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, "2")})
	select {
	case c := <-h.s.calls:
		t.Fatalf("call %s before Run", c.op)
	default:
	}
	h.start()
	c := h.expect(opSync, "a")
	if c.typ != UpdateCreate || c.pod.ResourceVersion != "2" {
		t.Errorf("SyncPod = (%s, %q), want (create, \"2\")", c.typ, c.pod.ResourceVersion)
	}
	h.noCalls()
}

func TestKillDuringSyncCancelsIt(t *testing.T) {
	h := newHarness(t)
	var syncErr atomic.Value
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		<-ctx.Done()
		syncErr.Store(ctx.Err())
		return SyncResult{}, ctx.Err()
	})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", int64p(20))})
	s := h.expect(opSync, "a")
	h.w.Update(Update{Type: UpdateKill, Pod: newPod("a", "web", int64p(20)), GracePeriod: int64p(5)})
	c := h.expect(opTerminating, "a")
	if s.ctx.Err() == nil {
		t.Errorf("context of the SyncPod in flight not cancelled by the kill")
	}
	if !errors.Is(syncErr.Load().(error), context.Canceled) {
		t.Errorf("SyncPod context error = %v, want context.Canceled", syncErr.Load())
	}
	if c.grace != 5 {
		t.Errorf("grace period = %d, want 5", c.grace)
	}
	h.expect(opTerminated, "a")
	h.wantForgotten("a")
	h.noCalls()
}

func TestEffectiveGracePeriod(t *testing.T) {
	tests := []struct {
		name     string
		current  *int64
		spec     *int64
		deletion *int64
		override *int64
		want     int64
	}{
		{name: "default", want: 30},
		{name: "spec", spec: int64p(10), want: 10},
		{name: "override shorter than spec", spec: int64p(10), override: int64p(5), want: 5},
		{name: "first override replaces spec even when longer", spec: int64p(10), override: int64p(60), want: 60},
		{name: "longer override never extends", current: int64p(10), override: int64p(20), want: 10},
		{name: "shorter override wins", current: int64p(10), override: int64p(5), want: 5},
		{name: "no override keeps current", current: int64p(10), spec: int64p(30), want: 10},
		{name: "deletion grace", spec: int64p(30), deletion: int64p(15), want: 15},
		{name: "deletion grace never extends", current: int64p(10), deletion: int64p(20), want: 10},
		{name: "override shorter than deletion grace", deletion: int64p(15), override: int64p(3), want: 3},
		{name: "zero override is one second", override: int64p(0), want: 1},
		{name: "zero spec is one second", spec: int64p(0), want: 1},
		{name: "negative override is one second", current: int64p(10), override: int64p(-5), want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPod("a", "web", tc.spec)
			p.DeletionGracePeriodSeconds = tc.deletion
			if got := effectiveGracePeriod(tc.current, p, tc.override); got != tc.want {
				t.Errorf("effectiveGracePeriod() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestKillGracePeriodOverrides(t *testing.T) {
	h := newHarness(t)
	h.s.setTerm(func(ctx context.Context, c call) error {
		if c.n <= 2 {
			return blockUntilCancelled(ctx, c)
		}
		return nil
	})
	p := newPod("a", "web", int64p(30))
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.waitIdle()

	h.w.Update(Update{Type: UpdateKill, Pod: p})
	first := h.expect(opTerminating, "a")
	if first.grace != 30 {
		t.Fatalf("grace period = %d, want the spec's 30", first.grace)
	}
	// A longer grace period never extends the termination in flight.
	h.w.Update(Update{Type: UpdateKill, Pod: p, GracePeriod: int64p(40)})
	if first.ctx.Err() != nil {
		t.Fatalf("termination cancelled by a longer grace period")
	}
	// A shorter one cancels it and starts over with the shorter one.
	h.w.Update(Update{Type: UpdateKill, Pod: p, GracePeriod: int64p(10)})
	second := h.expect(opTerminating, "a")
	if first.ctx.Err() == nil {
		t.Errorf("termination in flight not cancelled by a shorter grace period")
	}
	if second.grace != 10 {
		t.Errorf("grace period = %d, want 10", second.grace)
	}
	h.w.Update(Update{Type: UpdateKill, Pod: p, GracePeriod: int64p(2)})
	third := h.expect(opTerminating, "a")
	if third.grace != 2 {
		t.Errorf("grace period = %d, want 2", third.grace)
	}
	h.expect(opTerminated, "a")
	h.wantForgotten("a")
	h.noCalls()
}

func TestTerminalPodIsNeverRestarted(t *testing.T) {
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		return SyncResult{Terminal: true}, nil
	})
	p := newPod("a", "job", int64p(7))
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	if c := h.expect(opTerminating, "a"); c.grace != 7 {
		t.Errorf("grace period = %d, want the spec's 7", c.grace)
	}
	h.expect(opTerminated, "a")
	h.waitIdle()
	if st := h.state("a"); st != StateTerminated {
		t.Fatalf("State = %s, want terminated", st)
	}

	// Still in the source: updates, syncs and time change nothing.
	h.w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, "2")})
	h.w.Update(Update{Type: UpdateCreate, Pod: withVersion(p, "3")})
	h.w.Sync("a")
	h.clk.Step(10 * testResync)
	h.noCalls()
	if st := h.state("a"); st != StateTerminated {
		t.Fatalf("State = %s after updates, want terminated", st)
	}

	// Removed from the source: forgotten without further calls.
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	h.wantForgotten("a")
	h.noCalls()
}

func TestRemovalForgets(t *testing.T) {
	h := newHarness(t)
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	if c := h.expect(opTerminating, "a"); c.grace != defaultGracePeriod {
		t.Errorf("grace period = %d, want %d", c.grace, defaultGracePeriod)
	}
	h.expect(opTerminated, "a")
	h.wantForgotten("a")
	h.w.Sync("a")
	h.clk.Step(2 * testResync)
	h.noCalls()
}

func TestForget(t *testing.T) {
	h := newHarness(t)
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", int64p(3))})
	h.expect(opSync, "a")
	h.w.Forget("a")
	h.w.Forget("unknown")
	if c := h.expect(opTerminating, "a"); c.grace != 3 {
		t.Errorf("grace period = %d, want 3", c.grace)
	}
	h.expect(opTerminated, "a")
	h.wantForgotten("a")
	h.noCalls()
}

func TestOrphanKill(t *testing.T) {
	h := newHarness(t)
	orphan := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "orphan", Name: "old", Namespace: "kube-system"}}
	h.w.Update(Update{Type: UpdateKill, Pod: orphan})
	c := h.expect(opTerminating, "orphan")
	if c.grace != defaultGracePeriod {
		t.Errorf("grace period = %d, want %d", c.grace, defaultGracePeriod)
	}
	h.expect(opTerminated, "orphan")
	h.wantForgotten("orphan")
	h.noCalls()
}

// stepAndExpect advances the clock to just before d, checks that nothing
// runs, then to d and returns the call that must follow.
func (h *harness) stepAndExpect(d time.Duration, op callOp, uid types.UID) call {
	h.t.Helper()
	h.waitIdle()
	h.clk.Step(d - time.Millisecond)
	h.noCalls()
	h.clk.Step(time.Millisecond)
	return h.expect(op, uid)
}

func TestSyncRetryBackoff(t *testing.T) {
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		return SyncResult{}, errors.New("runtime unavailable")
	})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", nil)})
	prev := h.expect(opSync, "a")
	for i, want := range []time.Duration{1, 2, 4, 8, 10, 10} {
		want *= time.Second
		c := h.stepAndExpect(want, opSync, "a")
		if got := c.at.Sub(prev.at); got != want {
			t.Errorf("retry %d after %v, want %v", i+1, got, want)
		}
		if c.typ != UpdateCreate {
			t.Errorf("retry %d type = %s, want create (no sync succeeded yet)", i+1, c.typ)
		}
		prev = c
	}

	// Success resets the back-off and schedules the periodic resync.
	h.s.setSync(nil)
	h.stepAndExpect(10*time.Second, opSync, "a")
	c := h.stepAndExpect(testResync, opSync, "a")
	if c.typ != UpdateSync {
		t.Errorf("resync type = %s, want sync", c.typ)
	}
}

// timerOnlyClock hides the fake clock's AfterFunc.
type timerOnlyClock struct {
	clock.Clock
}

func TestRetryOnClockWithoutAfterFunc(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newFakeSyncer(clk)
	act := newActivity()
	h := &harness{t: t, clk: clk, s: s, act: act, w: New(s, timerOnlyClock{clk}, testResync, WithActivity(act.add))}
	t.Cleanup(h.stop)
	h.start()
	s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		if c.n == 1 {
			return SyncResult{}, errors.New("runtime unavailable")
		}
		return SyncResult{}, nil
	})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", nil)})
	first := h.expect(opSync, "a")
	h.waitIdle()
	clk.Step(initialBackoff)
	if c := h.expect(opSync, "a"); c.at.Sub(first.at) != initialBackoff {
		t.Errorf("retry after %v, want %v", c.at.Sub(first.at), initialBackoff)
	}
	// A sync replaces the armed resync timer, which must not fire.
	h.waitIdle()
	h.w.Sync("a")
	h.expect(opSync, "a")
	h.waitIdle()
	clk.Step(testResync)
	c := h.expect(opSync, "a")
	if c.typ != UpdateSync {
		t.Errorf("resync type = %s, want sync", c.typ)
	}
}

func TestFailedUpdateIsRetriedAsUpdate(t *testing.T) {
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		if c.n == 2 {
			return SyncResult{}, errors.New("image pull failed")
		}
		return SyncResult{}, nil
	})
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, "2")})
	if c := h.expect(opSync, "a"); c.typ != UpdateUpdate {
		t.Fatalf("type = %s, want update", c.typ)
	}
	c := h.stepAndExpect(initialBackoff, opSync, "a")
	if c.typ != UpdateUpdate || c.pod.ResourceVersion != "2" {
		t.Errorf("retry = (%s, %q), want (update, \"2\")", c.typ, c.pod.ResourceVersion)
	}
	h.noCalls()
}

func TestTerminationRetries(t *testing.T) {
	h := newHarness(t)
	h.s.setTerm(func(ctx context.Context, c call) error {
		if c.n <= 2 {
			return errors.New("stop container failed")
		}
		return nil
	})
	h.s.setClean(func(ctx context.Context, c call) error {
		if c.n == 1 {
			return errors.New("cgroup busy")
		}
		return nil
	})
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	h.expect(opTerminating, "a")
	h.stepAndExpect(time.Second, opTerminating, "a")
	h.stepAndExpect(2*time.Second, opTerminating, "a")
	h.expect(opTerminated, "a")
	h.waitIdle()
	if st := h.state("a"); st != StateTerminated {
		t.Errorf("State = %s while cleanup fails, want terminated", st)
	}
	h.stepAndExpect(time.Second, opTerminated, "a")
	h.wantForgotten("a")
	h.noCalls()
}

func TestRequeueAfterAndResync(t *testing.T) {
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		if c.n == 1 {
			return SyncResult{RequeueAfter: 5 * time.Second}, nil
		}
		return SyncResult{}, nil
	})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", nil)})
	first := h.expect(opSync, "a")
	c := h.stepAndExpect(5*time.Second, opSync, "a")
	if c.typ != UpdateSync || c.at.Sub(first.at) != 5*time.Second {
		t.Errorf("requeued sync = (%s after %v), want (sync after 5s)", c.typ, c.at.Sub(first.at))
	}
	c = h.stepAndExpect(testResync, opSync, "a")
	if c.typ != UpdateSync {
		t.Errorf("resync type = %s, want sync", c.typ)
	}
	// A sync in between restarts the resync period.
	h.waitIdle()
	h.clk.Step(testResync / 2)
	h.w.Sync("a")
	h.expect(opSync, "a")
	h.stepAndExpect(testResync, opSync, "a")
}

func TestRequeueAfterLongerThanResync(t *testing.T) {
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		return SyncResult{RequeueAfter: 5 * testResync}, nil
	})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("a", "web", nil)})
	h.expect(opSync, "a")
	h.stepAndExpect(testResync, opSync, "a")
}

func TestStaticPodExclusivity(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.s.setTerm(func(ctx context.Context, c call) error {
		if c.pod.UID == "old" {
			<-release
		}
		return nil
	})
	old := newPod("old", "etcd", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: old})
	h.expect(opSync, "old")

	// Same full name, new UID: waits. Another name is not affected.
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("new", "etcd", nil)})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("newer", "etcd", nil)})
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("other", "apiserver", nil)})
	h.expect(opSync, "other")
	h.w.Sync("new") // no-op while waiting
	h.noCalls()
	for _, uid := range []types.UID{"new", "newer"} {
		if st := h.state(uid); st != StateWaiting {
			t.Fatalf("State(%s) = %s, want waiting", uid, st)
		}
	}

	h.w.Update(Update{Type: UpdateKill, Pod: old})
	h.expect(opTerminating, "old")
	if st := h.state("new"); st != StateWaiting {
		t.Fatalf("State(new) = %s while the old pod terminates, want waiting", st)
	}
	close(release)

	// The old pod's cleanup and the new pod's start may interleave.
	got := map[callOp]types.UID{}
	for range 2 {
		c := h.next()
		got[c.op] = c.pod.UID
	}
	if got[opTerminated] != "old" || got[opSync] != "new" {
		t.Fatalf("calls after termination = %v, want terminated(old) and sync(new)", got)
	}
	h.wantForgotten("old")
	h.noCalls()
	if st := h.state("newer"); st != StateWaiting {
		t.Fatalf("State(newer) = %s while new syncs, want waiting", st)
	}

	// The newer UID starts once the new one is gone.
	h.w.Update(Update{Type: UpdateKill, Pod: newPod("new", "etcd", nil)})
	h.expect(opTerminating, "new")
	got = map[callOp]types.UID{}
	for range 2 {
		c := h.next()
		got[c.op] = c.pod.UID
	}
	if got[opTerminated] != "new" || got[opSync] != "newer" {
		t.Fatalf("calls after termination = %v, want terminated(new) and sync(newer)", got)
	}
	h.noCalls()
}

func TestWaitingPodKilled(t *testing.T) {
	h := newHarness(t)
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("old", "etcd", nil)})
	h.expect(opSync, "old")
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("new", "etcd", nil)})
	h.noCalls()
	h.w.Update(Update{Type: UpdateKill, Pod: newPod("new", "etcd", nil)})
	h.expect(opTerminating, "new")
	h.expect(opTerminated, "new")
	h.wantForgotten("new")
	h.noCalls()
	if st := h.state("old"); st != StateSyncing {
		t.Errorf("State(old) = %s, want syncing", st)
	}
}

func TestRecreatedWithSameUIDRestarts(t *testing.T) {
	h := newHarness(t)
	release := make(chan struct{})
	h.s.setTerm(func(ctx context.Context, c call) error {
		<-release
		return nil
	})
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	h.expect(opTerminating, "a")
	h.w.Update(Update{Type: UpdateCreate, Pod: withVersion(p, "2")})
	close(release)
	h.expect(opTerminated, "a")
	c := h.expect(opSync, "a")
	if c.typ != UpdateCreate || c.pod.ResourceVersion != "2" {
		t.Errorf("restart sync = (%s, %q), want (create, \"2\")", c.typ, c.pod.ResourceVersion)
	}
	h.noCalls()
	if st := h.state("a"); st != StateSyncing {
		t.Errorf("State = %s, want syncing", st)
	}
}

func histogram(t *testing.T, op string) (count uint64, sum float64) {
	t.Helper()
	var m dto.Metric
	if err := metrics.PodWorkerDuration.WithLabelValues(op).(prometheus.Metric).Write(&m); err != nil {
		t.Fatalf("read pod worker duration %s: %v", op, err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestMetrics(t *testing.T) {
	ops := []string{metrics.OpCreate, metrics.OpUpdate, metrics.OpSync, metrics.OpKill}
	before := map[string]uint64{}
	beforeSum := map[string]float64{}
	for _, op := range ops {
		before[op], beforeSum[op] = histogram(t, op)
	}
	h := newHarness(t)
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		if c.typ == UpdateCreate {
			h.clk.Step(2 * time.Second)
		}
		return SyncResult{}, nil
	})
	p := newPod("a", "web", nil)
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	h.waitIdle()
	h.w.Update(Update{Type: UpdateUpdate, Pod: withVersion(p, "2")})
	h.expect(opSync, "a")
	h.waitIdle()
	h.w.Sync("a")
	h.expect(opSync, "a")
	h.waitIdle()
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	h.expect(opTerminating, "a")
	h.expect(opTerminated, "a")
	h.waitIdle()
	for _, op := range ops {
		n, _ := histogram(t, op)
		if n-before[op] != 1 {
			t.Errorf("pod_worker_duration_seconds{operation_type=%q} observations = %d, want 1", op, n-before[op])
		}
	}
	if _, sum := histogram(t, metrics.OpCreate); sum-beforeSum[metrics.OpCreate] != 2 {
		t.Errorf("create duration sum grew by %v, want 2", sum-beforeSum[metrics.OpCreate])
	}
}

func TestRunShutdownWaitsForWorkers(t *testing.T) {
	h := newHarness(t)
	var exited atomic.Int32
	h.s.setSync(func(ctx context.Context, c call) (SyncResult, error) {
		<-ctx.Done()
		exited.Add(1)
		return SyncResult{}, ctx.Err()
	})
	uids := []types.UID{"a", "b", "c"}
	for _, uid := range uids {
		h.w.Update(Update{Type: UpdateCreate, Pod: newPod(string(uid), string(uid), nil)})
	}
	for range uids {
		h.next()
	}
	if err := h.w.Run(context.Background()); err == nil {
		t.Errorf("second Run() = nil, want an error")
	}
	h.stop()
	if n := exited.Load(); n != int32(len(uids)) {
		t.Errorf("Run returned with %d of %d Syncer calls still running", len(uids)-int(n), len(uids))
	}
	if running, _ := h.act.state(); running != 0 {
		t.Errorf("%d worker goroutines left after Run returned", running)
	}

	// Nothing runs after shutdown, neither updates nor timers.
	h.w.Update(Update{Type: UpdateCreate, Pod: newPod("d", "d", nil)})
	h.w.Sync("a")
	h.clk.Step(10 * testResync)
	h.noCalls()
}

func TestStateStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{StateWaiting.String(), "waiting"},
		{StateSyncing.String(), "syncing"},
		{StateTerminating.String(), "terminating"},
		{StateTerminated.String(), "terminated"},
		{State(9).String(), "State(9)"},
		{UpdateCreate.String(), "create"},
		{UpdateUpdate.String(), "update"},
		{UpdateSync.String(), "sync"},
		{UpdateKill.String(), "kill"},
		{UpdateType(9).String(), "UpdateType(9)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestKillKeepHoldsTheTerminatedPod(t *testing.T) {
	h := newHarness(t)
	p := newPod("a", "web", int64p(20))
	h.w.Update(Update{Type: UpdateCreate, Pod: p})
	h.expect(opSync, "a")
	if h.w.Cleaned("a") {
		t.Errorf("Cleaned = true for a syncing pod")
	}
	h.w.Update(Update{Type: UpdateKill, Pod: p, GracePeriod: int64p(1), Keep: true})
	if c := h.expect(opTerminating, "a"); c.grace != 1 {
		t.Errorf("grace period = %d, want 1", c.grace)
	}
	h.expect(opTerminated, "a")
	h.noCalls()
	if st := h.state("a"); st != StateTerminated {
		t.Fatalf("state = %s, want terminated (kept)", st)
	}
	if !h.w.Cleaned("a") {
		t.Errorf("Cleaned = false after SyncTerminatedPod succeeded")
	}
	// Still desired: an update of the pod does not start it again.
	h.w.Update(Update{Type: UpdateUpdate, Pod: p})
	h.noCalls()
	if st := h.state("a"); st != StateTerminated {
		t.Fatalf("state after update = %s, want terminated", st)
	}
	// Another kill that keeps it (the deletion's next update) does nothing.
	h.w.Update(Update{Type: UpdateKill, Pod: p, GracePeriod: int64p(0), Keep: true})
	h.noCalls()
	if st := h.state("a"); st != StateTerminated {
		t.Fatalf("state after a second kill = %s, want terminated", st)
	}
	// Its source removes it: forgotten.
	h.w.Update(Update{Type: UpdateKill, Pod: p})
	h.wantForgotten("a")
}
