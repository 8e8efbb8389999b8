package probe

import (
	"context"
	goruntime "runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// waitTimeout bounds how long a test waits for a worker goroutine.
const waitTimeout = 10 * time.Second

type round struct {
	container string
	kind      Kind
}

// runFixture runs the manager with hooks that report each probe round and
// each ended worker.
func runFixture(t *testing.T) (*fixture, chan round, chan round) {
	t.Helper()
	f := newFixture()
	rounds, exited := make(chan round, 100), make(chan round, 100)
	f.m.opts.AfterRound = func(_ types.UID, c string, k Kind) { rounds <- round{c, k} }
	f.m.opts.WorkerExited = func(_ types.UID, c string, k Kind) { exited <- round{c, k} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = f.m.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f, rounds, exited
}

// expect waits for exactly the given rounds, in any order.
func expect(t *testing.T, ch chan round, want ...round) {
	t.Helper()
	left := map[round]int{}
	for _, r := range want {
		left[r]++
	}
	timeout := time.After(waitTimeout)
	for n := 0; n < len(want); n++ {
		select {
		case r := <-ch:
			if left[r] == 0 {
				t.Fatalf("unexpected %+v (waiting for %v)", r, left)
			}
			left[r]--
		case <-timeout:
			t.Fatalf("timed out waiting for %v", left)
		}
	}
}

func nextUpdate(t *testing.T, f *fixture) Update {
	t.Helper()
	select {
	case u := <-f.m.Updates():
		return u
	case <-time.After(waitTimeout):
		t.Fatal("no update")
	}
	return Update{}
}

func TestManagerWorkersAndUpdates(t *testing.T) {
	f, rounds, exited := runFixture(t)
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.Container{Name: "app", ReadinessProbe: execProbe(nil), LivenessProbe: execProbe(func(p *v1.Probe) { p.PeriodSeconds = 5 })})
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init", ReadinessProbe: execProbe(nil)}, // a regular init container is never probed
		{Name: "sidecar", RestartPolicy: &always, StartupProbe: execProbe(nil)},
	}
	st := running("app", "a1", t0)
	st.InitContainerStatuses = []v1.ContainerStatus{{Name: "sidecar", ContainerID: "containerd://s1", State: st.ContainerStatuses[0].State}}
	f.status.set(pod.UID, st)
	f.exec.set(execOK, nil)

	f.m.AddPod(pod)
	expect(t, rounds, round{"app", Readiness}, round{"app", Liveness}, round{"sidecar", Startup})
	// Startup of the sidecar: Unknown, then Success. Readiness of app:
	// Failure, then Success. Liveness of app: Success.
	got := map[round][]Result{}
	for range 5 {
		u := nextUpdate(t, f)
		if u.PodUID != pod.UID {
			t.Fatalf("update for pod %s", u.PodUID)
		}
		got[round{u.ContainerName, u.Kind}] = append(got[round{u.ContainerName, u.Kind}], u.Result)
	}
	want := map[round][]Result{
		{"app", Readiness}:   {Failure, Success},
		{"app", Liveness}:    {Success},
		{"sidecar", Startup}: {Unknown, Success},
	}
	for k, w := range want {
		if len(got[k]) != len(w) || got[k][0] != w[0] || got[k][len(w)-1] != w[len(w)-1] {
			t.Errorf("updates of %+v = %v, want %v", k, got[k], w)
		}
	}
	if r, ok := f.m.Result("containerd://a1", Readiness); !ok || r != Success {
		t.Errorf("readiness = %v %v", r, ok)
	}
	if n := f.exec.count(); n != 3 {
		t.Errorf("execs = %d, want 3", n)
	}

	// Each worker ticks at its own period.
	f.clk.Step(5 * time.Second)
	expect(t, rounds, round{"app", Liveness})
	f.clk.Step(5 * time.Second)
	expect(t, rounds, round{"app", Liveness}, round{"app", Readiness}, round{"sidecar", Startup})
	if n := f.exec.count(); n != 6 { // the sidecar has started: no more startup probes
		t.Errorf("execs = %d, want 6", n)
	}

	// A new version of the pod without the readiness probe stops that
	// worker and drops its result.
	pod2 := pod.DeepCopy()
	pod2.Spec.Containers[0].ReadinessProbe = nil
	f.m.AddPod(pod2)
	expect(t, exited, round{"app", Readiness})
	if _, ok := f.m.Result("a1", Readiness); ok {
		t.Error("readiness result kept after its probe went away")
	}
	if _, ok := f.m.Result("a1", Liveness); !ok {
		t.Error("liveness result lost")
	}

	f.m.RemovePod(pod.UID)
	expect(t, exited, round{"app", Liveness}, round{"sidecar", Startup})
	if _, ok := f.m.Result("a1", Liveness); ok {
		t.Error("result kept after RemovePod")
	}
	if _, ok := f.m.Result("s1", Startup); ok {
		t.Error("result kept after RemovePod")
	}
}

func TestManagerAddBeforeRun(t *testing.T) {
	f := newFixture()
	pod := testPod(v1.Container{Name: "app", ReadinessProbe: execProbe(nil)})
	f.status.set(pod.UID, running("app", "a1", t0))
	f.exec.set(execOK, nil)
	f.m.AddPod(pod)
	if f.exec.count() != 0 || len(f.m.workers) != 0 {
		t.Fatal("a worker started before Run")
	}
	rounds := make(chan round, 10)
	f.m.opts.AfterRound = func(_ types.UID, c string, k Kind) { rounds <- round{c, k} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = f.m.Run(ctx)
		close(done)
	}()
	expect(t, rounds, round{"app", Readiness})
	cancel()
	<-done
	if _, ok := f.m.Result("a1", Readiness); ok {
		t.Error("result kept after the manager stopped")
	}
}

// A liveness failure is published so the pod's worker can restart the
// container; the worker holds until a new container shows up.
func TestManagerLivenessFailureHoldsUntilNewContainer(t *testing.T) {
	f, rounds, _ := runFixture(t)
	pod := testPod(v1.Container{Name: "app", LivenessProbe: execProbe(func(p *v1.Probe) { p.FailureThreshold = 2; p.PeriodSeconds = 1 })})
	f.status.set(pod.UID, running("app", "a1", t0))
	f.exec.set(execFail, nil)
	f.m.AddPod(pod)
	expect(t, rounds, round{"app", Liveness})
	if u := nextUpdate(t, f); u.Result != Success {
		t.Fatalf("first update %+v, want the initial Success", u)
	}
	f.clk.Step(time.Second)
	expect(t, rounds, round{"app", Liveness})
	if u := nextUpdate(t, f); u.Result != Failure || u.ContainerID != "a1" {
		t.Fatalf("update %+v, want Failure of a1", u)
	}
	f.clk.Step(time.Second)
	expect(t, rounds, round{"app", Liveness})
	if n := f.exec.count(); n != 2 {
		t.Fatalf("execs = %d while on hold, want 2", n)
	}
	f.status.set(pod.UID, running("app", "a2", t0.Add(2*time.Second)))
	f.exec.set(execOK, nil)
	f.clk.Step(time.Second)
	expect(t, rounds, round{"app", Liveness})
	if u := nextUpdate(t, f); u.Result != Success || u.ContainerID != "a2" {
		t.Fatalf("update %+v, want Success of a2", u)
	}
	if n := f.exec.count(); n != 3 {
		t.Errorf("execs = %d, want 3", n)
	}
}

// A pod added after a restart of heartlet whose API status reports an
// adopted container ready has that readiness at once, before its worker
// has run: the first status computed for the pod keeps it ready. A
// container started after the manager gets no such result.
func TestManagerSeedsAdoptedReadiness(t *testing.T) {
	tests := []struct {
		name      string
		startedAt time.Time
		ready     bool
		// previous: the status is given by Options.PreviousStatus (a
		// static pod's mirror), not by pod.Status; noMirror: it finds none.
		previous, noMirror bool
		want               bool // a Success result right after AddPod
	}{
		{name: "adopted and ready", startedAt: t0.Add(-time.Hour), ready: true, want: true},
		{name: "adopted, not ready", startedAt: t0.Add(-time.Hour)},
		{name: "started after the manager", startedAt: t0.Add(time.Second), ready: true},
		{name: "static pod ready in its mirror", startedAt: t0.Add(-time.Hour), ready: true, previous: true, want: true},
		{name: "static pod without a mirror", startedAt: t0.Add(-time.Hour), ready: true, previous: true, noMirror: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			// As Run does, without waiting for it: workers start with ctx.
			ctx, cancel := context.WithCancel(context.Background())
			f.m.mu.Lock()
			f.m.ctx = ctx
			f.m.mu.Unlock()
			t.Cleanup(func() {
				cancel()
				f.m.wg.Wait()
			})
			pod := testPod(v1.Container{Name: "app", ReadinessProbe: execProbe(nil)})
			st := running("app", "a1", tt.startedAt)
			st.ContainerStatuses[0].Ready = tt.ready
			if tt.previous {
				f.m.opts.PreviousStatus = func(*v1.Pod) (*v1.PodStatus, bool) { return &st, !tt.noMirror }
			} else {
				pod.Status = st
			}
			f.m.AddPod(pod)
			r, ok := f.m.Result("containerd://a1", Readiness)
			if got := ok && r == Success; got != tt.want {
				t.Errorf("readiness right after AddPod = %v (found %v), want Success %v", r, ok, tt.want)
			}
		})
	}
}

// As upstream: once the startup probe succeeds, liveness and readiness
// are probed at once, not up to a period later.
func TestManagerStartupSuccessProbesAtOnce(t *testing.T) {
	f, rounds, _ := runFixture(t)
	pod := testPod(v1.Container{Name: "app",
		StartupProbe:   execProbe(func(p *v1.Probe) { p.PeriodSeconds = 1 }),
		ReadinessProbe: execProbe(func(p *v1.Probe) { p.PeriodSeconds = 60 }),
		LivenessProbe:  execProbe(func(p *v1.Probe) { p.PeriodSeconds = 60 }),
	})
	f.status.set(pod.UID, running("app", "a1", t0))
	f.exec.set(execFail, nil)
	f.m.AddPod(pod)
	// Startup fails once (below its threshold); the others are held.
	expect(t, rounds, round{"app", Startup}, round{"app", Readiness}, round{"app", Liveness})
	if n := f.exec.count(); n != 1 {
		t.Fatalf("execs = %d, want 1 (startup only)", n)
	}
	f.exec.set(execOK, nil)
	// One startup period: the startup probe succeeds, and readiness and
	// liveness run without their own 60 s period passing.
	f.clk.Step(time.Second)
	expect(t, rounds, round{"app", Startup}, round{"app", Readiness}, round{"app", Liveness})
	if n := f.exec.count(); n != 4 {
		t.Errorf("execs = %d, want 4", n)
	}
	if r, _ := f.m.Result("a1", Readiness); r != Success {
		t.Errorf("readiness = %v right after startup succeeded, want Success", r)
	}
}

// waitForTimer waits until a worker waits on the fake clock.
func waitForTimer(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for !f.clk.HasWaiters() {
		select {
		case <-deadline:
			t.Fatal("no worker waits on the clock")
		default:
			goruntime.Gosched()
		}
	}
}

// As upstream: a worker started within a period of heartlet's start
// first waits a random part of its period, so a restarted heartlet does
// not run every probe at the same moment; later workers probe at once.
func TestWorkerInitialJitter(t *testing.T) {
	for _, tt := range []struct {
		name      string
		sinceRun  time.Duration // how long the manager has been running
		rand      float64
		wantDelay time.Duration
	}{
		{name: "just started", rand: 0.5, wantDelay: 5 * time.Second},
		{name: "just started, bounded by the period", rand: 0.999, wantDelay: 9990 * time.Millisecond},
		{name: "started long ago", sinceRun: time.Minute, rand: 0.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, rounds, _ := runFixture(t)
			f.m.opts.Rand = func() float64 { return tt.rand }
			f.m.started = t0.Add(-tt.sinceRun)
			pod := testPod(v1.Container{Name: "app", ReadinessProbe: execProbe(nil)}) // period 10 s
			f.status.set(pod.UID, running("app", "a1", t0))
			f.exec.set(execOK, nil)
			f.m.AddPod(pod)
			if tt.wantDelay > 0 {
				waitForTimer(t, f)
				f.clk.Step(tt.wantDelay - time.Millisecond)
				if n := f.exec.count(); n != 0 {
					t.Fatalf("probed %d times before the jitter passed", n)
				}
				f.clk.Step(time.Millisecond)
			}
			expect(t, rounds, round{"app", Readiness})
			if n := f.exec.count(); n != 1 {
				t.Fatalf("execs = %d, want 1", n)
			}
			// Then every period.
			waitForTimer(t, f)
			f.clk.Step(10 * time.Second)
			expect(t, rounds, round{"app", Readiness})
		})
	}
}
