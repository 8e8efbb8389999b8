package probe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeStatus is a StatusGetter with settable statuses.
type fakeStatus struct {
	mu sync.Mutex
	m  map[types.UID]v1.PodStatus
}

func (f *fakeStatus) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[uid]
	return *s.DeepCopy(), ok
}

func (f *fakeStatus) set(uid types.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.UID]v1.PodStatus{}
	}
	f.m[uid] = s
}

type event struct{ eventtype, reason, message string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []event
}

func (f *fakeRecorder) Eventf(_ k8sruntime.Object, eventtype, reason, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{eventtype, reason, fmt.Sprintf(format, args...)})
}

func (f *fakeRecorder) list() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]event(nil), f.events...)
}

// running is a status with the container running since startedAt.
func running(name, id string, startedAt time.Time) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: "127.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name: name, ContainerID: "containerd://" + id,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
		}},
	}
}

func execProbe(mutate func(*v1.Probe)) *v1.Probe {
	p := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func testPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{c}, RestartPolicy: v1.RestartPolicyAlways},
	}
}

type fixture struct {
	m      *Manager
	clk    *testingclock.FakeClock
	exec   *fakeExec
	status *fakeStatus
	rec    *fakeRecorder
}

func newFixture() *fixture {
	f := &fixture{clk: testingclock.NewFakeClock(t0), exec: &fakeExec{}, status: &fakeStatus{}, rec: &fakeRecorder{}}
	f.m = NewManager(Options{Exec: f.exec, Status: f.status, Recorder: f.rec, Clock: f.clk, Rand: func() float64 { return 0 }})
	return f
}

// drain returns the updates published so far.
func (f *fixture) drain() []Update {
	var out []Update
	for {
		select {
		case u := <-f.m.updates.C():
			out = append(out, u)
		default:
			return out
		}
	}
}

func (f *fixture) result(t *testing.T, id string, kind Kind) Result {
	t.Helper()
	r, _ := f.m.Result("containerd://"+id, kind)
	return r
}

var (
	execOK   = runtime.ExecResult{}
	execFail = runtime.ExecResult{Stdout: []byte("boom"), ExitCode: 1}
)

// Upstream pkg/kubelet/prober/worker.go: initial values are Failure for
// readiness, Success for liveness and Unknown for startup.
func TestWorkerInitialResults(t *testing.T) {
	for _, tt := range []struct {
		kind Kind
		want Result
	}{{Readiness, Failure}, {Liveness, Success}, {Startup, Unknown}} {
		t.Run(tt.kind.String(), func(t *testing.T) {
			f := newFixture()
			c := v1.Container{Name: "app"}
			p := execProbe(func(p *v1.Probe) { p.InitialDelaySeconds = 30 })
			switch tt.kind {
			case Readiness:
				c.ReadinessProbe = p
			case Liveness:
				c.LivenessProbe = p
			case Startup:
				c.StartupProbe = p
			}
			pod := testPod(c)
			f.status.set(pod.UID, running("app", "c1", t0))
			w := newWorker(f.m, pod, &pod.Spec.Containers[0], tt.kind)
			if !w.doProbe(context.Background()) {
				t.Fatal("worker stopped")
			}
			if got := f.result(t, "c1", tt.kind); got != tt.want {
				t.Errorf("result = %v, want %v", got, tt.want)
			}
			ups := f.drain()
			if len(ups) != 1 || ups[0] != (Update{PodUID: pod.UID, ContainerName: "app", ContainerID: "c1", Kind: tt.kind, Result: tt.want}) {
				t.Errorf("updates = %+v", ups)
			}
			if f.exec.count() != 0 {
				t.Errorf("probed during the initial delay")
			}
		})
	}
}

// A container adopted after a restart of heartlet (running since before
// the manager started) keeps the readiness or startup its pod's API status
// reports for that very container until the next probe; anything else
// starts from the kind's initial result.
func TestWorkerInitialResultsOfAdoptedContainers(t *testing.T) {
	before, after := t0.Add(-time.Hour), t0.Add(time.Second)
	tests := []struct {
		name      string
		kind      Kind
		startedAt time.Time // the container's start
		apiID     string    // the container ID in the pod's API status
		ready     bool      // its ready, and started, in the API status
		want      Result
	}{
		{name: "adopted ready container stays ready", kind: Readiness, startedAt: before, apiID: "c1", ready: true, want: Success},
		{name: "adopted not-ready container stays not ready", kind: Readiness, startedAt: before, apiID: "c1", want: Failure},
		{name: "API status of an older container", kind: Readiness, startedAt: before, apiID: "c0", ready: true, want: Failure},
		{name: "container started after heartlet", kind: Readiness, startedAt: after, apiID: "c1", ready: true, want: Failure},
		{name: "adopted started container stays started", kind: Startup, startedAt: before, apiID: "c1", ready: true, want: Success},
		{name: "adopted container not yet started", kind: Startup, startedAt: before, apiID: "c1", want: Unknown},
		{name: "liveness starts as success anyway", kind: Liveness, startedAt: before, apiID: "c1", want: Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			c := v1.Container{Name: "app"}
			p := execProbe(func(p *v1.Probe) { p.InitialDelaySeconds = 7200 })
			switch tt.kind {
			case Readiness:
				c.ReadinessProbe = p
			case Liveness:
				c.LivenessProbe = p
			case Startup:
				c.StartupProbe = p
			}
			pod := testPod(c)
			pod.Status = running("app", tt.apiID, tt.startedAt)
			pod.Status.ContainerStatuses[0].Ready = tt.ready
			pod.Status.ContainerStatuses[0].Started = &tt.ready
			f.status.set(pod.UID, running("app", "c1", tt.startedAt))
			if tt.startedAt.After(t0) {
				f.clk.SetTime(tt.startedAt.Add(time.Second))
			}
			w := newWorker(f.m, pod, &pod.Spec.Containers[0], tt.kind)
			if !w.doProbe(context.Background()) {
				t.Fatal("worker stopped")
			}
			if got := f.result(t, "c1", tt.kind); got != tt.want {
				t.Errorf("initial result = %v, want %v", got, tt.want)
			}
			if f.exec.count() != 0 {
				t.Errorf("probed during the initial delay")
			}
		})
	}
}

func TestWorkerThresholds(t *testing.T) {
	tests := []struct {
		name      string
		kind      Kind
		success   int32
		failure   int32
		runs      []runtime.ExecResult
		want      []Result // result after each run
		wantExecs int
	}{
		{
			name: "readiness needs successThreshold successes", kind: Readiness, success: 2, failure: 1,
			runs: []runtime.ExecResult{execOK, execOK, execFail, execOK},
			want: []Result{Failure, Success, Failure, Failure}, wantExecs: 4,
		},
		{
			name: "liveness fails after failureThreshold failures and holds", kind: Liveness, success: 1, failure: 3,
			runs: []runtime.ExecResult{execFail, execFail, execOK, execFail, execFail, execFail, execOK},
			want: []Result{Success, Success, Success, Success, Success, Failure, Failure}, wantExecs: 6,
		},
		{
			name: "startup fails after failureThreshold failures", kind: Startup, success: 1, failure: 2,
			runs: []runtime.ExecResult{execFail, execFail, execOK},
			want: []Result{Unknown, Failure, Failure}, wantExecs: 2,
		},
		{
			name: "startup succeeds then stops probing", kind: Startup, success: 1, failure: 2,
			runs: []runtime.ExecResult{execFail, execOK, execFail},
			want: []Result{Unknown, Success, Success}, wantExecs: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			p := execProbe(func(p *v1.Probe) { p.SuccessThreshold, p.FailureThreshold = tt.success, tt.failure })
			c := v1.Container{Name: "app"}
			switch tt.kind {
			case Readiness:
				c.ReadinessProbe = p
			case Liveness:
				c.LivenessProbe = p
			case Startup:
				c.StartupProbe = p
			}
			pod := testPod(c)
			f.status.set(pod.UID, running("app", "c1", t0))
			w := newWorker(f.m, pod, &pod.Spec.Containers[0], tt.kind)
			for i, r := range tt.runs {
				f.exec.set(r, nil)
				if !w.doProbe(context.Background()) {
					t.Fatalf("run %d: worker stopped", i)
				}
				if got := f.result(t, "c1", tt.kind); got != tt.want[i] {
					t.Fatalf("run %d: result = %v, want %v", i, got, tt.want[i])
				}
			}
			if n := f.exec.count(); n != tt.wantExecs {
				t.Errorf("execs = %d, want %d", n, tt.wantExecs)
			}
		})
	}
}

func TestWorkerInitialDelayFromContainerStart(t *testing.T) {
	f := newFixture()
	pod := testPod(v1.Container{Name: "app", LivenessProbe: execProbe(func(p *v1.Probe) { p.InitialDelaySeconds = 10 })})
	f.status.set(pod.UID, running("app", "c1", t0.Add(-4*time.Second)))
	w := newWorker(f.m, pod, &pod.Spec.Containers[0], Liveness)
	w.doProbe(context.Background())
	if f.exec.count() != 0 {
		t.Fatal("probed 4s after start with a 10s initial delay")
	}
	f.clk.Step(6 * time.Second)
	w.doProbe(context.Background())
	if f.exec.count() != 1 {
		t.Fatalf("execs = %d after the initial delay, want 1", f.exec.count())
	}
}

// Upstream: liveness and readiness do not run until the startup probe
// has succeeded.
func TestWorkerStartupGatesOthers(t *testing.T) {
	f := newFixture()
	pod := testPod(v1.Container{Name: "app",
		StartupProbe:   execProbe(func(p *v1.Probe) { p.FailureThreshold = 5 }),
		LivenessProbe:  execProbe(nil),
		ReadinessProbe: execProbe(nil),
	})
	f.status.set(pod.UID, running("app", "c1", t0))
	ctx := context.Background()
	startup := newWorker(f.m, pod, &pod.Spec.Containers[0], Startup)
	live := newWorker(f.m, pod, &pod.Spec.Containers[0], Liveness)
	ready := newWorker(f.m, pod, &pod.Spec.Containers[0], Readiness)

	f.exec.set(execFail, nil)
	startup.doProbe(ctx)
	live.doProbe(ctx)
	ready.doProbe(ctx)
	if n := f.exec.count(); n != 1 {
		t.Fatalf("execs = %d before startup succeeded, want 1 (startup only)", n)
	}
	if f.result(t, "c1", Liveness) != Success || f.result(t, "c1", Readiness) != Failure {
		t.Fatalf("liveness %v readiness %v, want initial values", f.result(t, "c1", Liveness), f.result(t, "c1", Readiness))
	}
	f.exec.set(execOK, nil)
	startup.doProbe(ctx)
	if f.result(t, "c1", Startup) != Success {
		t.Fatal("startup did not succeed")
	}
	live.doProbe(ctx)
	ready.doProbe(ctx)
	if n := f.exec.count(); n != 4 {
		t.Fatalf("execs = %d, want 4", n)
	}
	if f.result(t, "c1", Readiness) != Success {
		t.Errorf("readiness = %v, want Success", f.result(t, "c1", Readiness))
	}
}

func TestWorkerResetsOnNewContainer(t *testing.T) {
	f := newFixture()
	pod := testPod(v1.Container{Name: "app", LivenessProbe: execProbe(func(p *v1.Probe) { p.FailureThreshold = 1 })})
	f.status.set(pod.UID, running("app", "c1", t0))
	w := newWorker(f.m, pod, &pod.Spec.Containers[0], Liveness)
	ctx := context.Background()
	f.exec.set(execFail, nil)
	w.doProbe(ctx)
	if f.result(t, "c1", Liveness) != Failure {
		t.Fatal("liveness did not fail")
	}
	w.doProbe(ctx)
	if f.exec.count() != 1 {
		t.Fatal("probed again while on hold")
	}
	f.drain()

	f.status.set(pod.UID, running("app", "c2", t0))
	f.exec.set(execOK, nil)
	w.doProbe(ctx)
	if _, ok := f.m.Result("c1", Liveness); ok {
		t.Error("result of the old container kept")
	}
	if f.result(t, "c2", Liveness) != Success || f.exec.count() != 2 {
		t.Errorf("new container: result %v, execs %d", f.result(t, "c2", Liveness), f.exec.count())
	}
	ups := f.drain()
	if len(ups) != 1 || ups[0].ContainerID != "c2" || ups[0].Result != Success {
		t.Errorf("updates = %+v", ups)
	}
	if calls := f.exec.calls; calls[1].id != "c2" {
		t.Errorf("probed container %s, want c2", calls[1].id)
	}
}

func TestWorkerContainerStates(t *testing.T) {
	terminated := func(id string) v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://" + id,
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
		}}}
	}
	created := v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://c1", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}},
	}}}
	tests := []struct {
		name      string
		kind      Kind
		policy    v1.RestartPolicy
		ctrPolicy *v1.ContainerRestartPolicy
		status    v1.PodStatus
		deleting  bool
		found     bool
		want      Result
		keep      bool
	}{
		{name: "no status yet", kind: Readiness, status: v1.PodStatus{}, keep: true},
		{name: "no container ID yet", kind: Readiness, status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "app"}}}, keep: true},
		{name: "pod succeeded", kind: Readiness, status: v1.PodStatus{Phase: v1.PodSucceeded}, keep: false},
		{name: "terminated readiness fails", kind: Readiness, policy: v1.RestartPolicyAlways, status: terminated("c1"), found: true, want: Failure, keep: true},
		{name: "terminated, never restarted: worker ends", kind: Readiness, policy: v1.RestartPolicyNever, status: terminated("c1"), found: true, want: Failure, keep: false},
		{name: "terminated, OnFailure pod restarts the failure: worker goes on", kind: Readiness, policy: v1.RestartPolicyOnFailure, status: terminated("c1"), found: true, want: Failure, keep: true},
		{name: "terminated, container Never in an Always pod: worker ends", kind: Readiness, policy: v1.RestartPolicyAlways, ctrPolicy: ptr.To(v1.ContainerRestartPolicyNever), status: terminated("c1"), found: true, want: Failure, keep: false},
		{name: "terminated, container OnFailure in a Never pod: worker goes on", kind: Readiness, policy: v1.RestartPolicyNever, ctrPolicy: ptr.To(v1.ContainerRestartPolicyOnFailure), status: terminated("c1"), found: true, want: Failure, keep: true},
		{name: "created liveness keeps its initial result", kind: Liveness, status: created, found: true, want: Success, keep: true},
		{name: "deleted pod: liveness succeeds and ends", kind: Liveness, status: running("app", "c1", t0), deleting: true, found: true, want: Success, keep: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			c := v1.Container{Name: "app", ReadinessProbe: execProbe(nil), LivenessProbe: execProbe(nil), RestartPolicy: tt.ctrPolicy}
			pod := testPod(c)
			if tt.policy != "" {
				pod.Spec.RestartPolicy = tt.policy
			}
			if tt.deleting {
				now := metav1.NewTime(t0)
				pod.DeletionTimestamp = &now
			}
			if tt.name != "no status yet" {
				f.status.set(pod.UID, tt.status)
			}
			f.exec.set(execFail, nil)
			w := newWorker(f.m, pod, &pod.Spec.Containers[0], tt.kind)
			if keep := w.doProbe(context.Background()); keep != tt.keep {
				t.Errorf("keep = %v, want %v", keep, tt.keep)
			}
			r, ok := f.m.Result("c1", tt.kind)
			if ok != tt.found || r != tt.want {
				t.Errorf("result = %v %v, want %v %v", r, ok, tt.want, tt.found)
			}
			if f.exec.count() != 0 {
				t.Errorf("probed a container that is not running or a pod going away")
			}
		})
	}
}

// Upstream pkg/kubelet/prober/prober.go: Unhealthy warnings read
// "<Kind> probe failed: <output>".
func TestWorkerEventsAndMetrics(t *testing.T) {
	f := newFixture()
	pod := testPod(v1.Container{Name: "app", ReadinessProbe: execProbe(nil)})
	pod.UID = "uid-metrics"
	f.status.set(pod.UID, running("app", "c1", t0))
	w := newWorker(f.m, pod, &pod.Spec.Containers[0], Readiness)
	ctx := context.Background()
	f.exec.set(execFail, nil)
	w.doProbe(ctx)
	w.doProbe(ctx)
	f.exec.set(execOK, nil)
	w.doProbe(ctx)
	f.exec.set(execOK, fmt.Errorf("container gone"))
	w.doProbe(ctx)

	evs := f.rec.list()
	if len(evs) != 3 {
		t.Fatalf("events = %+v", evs)
	}
	for _, e := range evs[:2] {
		if e != (event{v1.EventTypeWarning, "Unhealthy", "Readiness probe failed: boom"}) {
			t.Errorf("event = %+v", e)
		}
	}
	if !strings.HasPrefix(evs[2].message, "Readiness probe errored and resulted in unknown state: ") || evs[2].reason != "Unhealthy" {
		t.Errorf("event = %+v", evs[2])
	}
	for result, want := range map[string]float64{"failed": 2, "successful": 1, "unknown": 1} {
		got := testutil.ToFloat64(metrics.ProbeResults.WithLabelValues("Readiness", result, "app", "web", "ns", "uid-metrics"))
		if got != want {
			t.Errorf("prober_probe_total{result=%s} = %v, want %v", result, got, want)
		}
	}
	if n := testutil.CollectAndCount(metrics.ProbeDuration, "prober_probe_duration_seconds"); n < 1 {
		t.Errorf("no duration series")
	}
	if f.result(t, "c1", Readiness) != Success {
		t.Errorf("an errored probe changed the result to %v", f.result(t, "c1", Readiness))
	}
	w.deleteMetrics()
	if got := testutil.ToFloat64(metrics.ProbeResults.WithLabelValues("Readiness", "failed", "app", "web", "ns", "uid-metrics")); got != 0 {
		t.Errorf("series kept after the worker ended: %v", got)
	}
}

// A worker never waits for the reader of Updates: with the channel full,
// its change waits coalesced beside it, and the next round delivers it once
// the reader has made room.
func TestWorkerDoesNotBlockOnAFullUpdatesChannel(t *testing.T) {
	f := newFixture()
	for i := range updatesBuffer {
		f.m.updates.Send(updateKey{pod: "other", container: fmt.Sprint(i)}, Update{PodUID: "other"})
	}
	pod := testPod(v1.Container{Name: "app", LivenessProbe: execProbe(func(p *v1.Probe) { p.InitialDelaySeconds = 30 })})
	f.status.set(pod.UID, running("app", "c1", t0))
	w := newWorker(f.m, pod, &pod.Spec.Containers[0], Liveness)
	if !w.doProbe(context.Background()) { // returns although nobody reads
		t.Fatal("worker stopped")
	}
	if got := len(f.drain()); got != updatesBuffer {
		t.Fatalf("%d updates in the channel, want the %d that filled it", got, updatesBuffer)
	}
	f.m.updates.Flush() // what the worker's next round does first
	want := Update{PodUID: pod.UID, ContainerName: "app", ContainerID: "c1", Kind: Liveness, Result: Success}
	if ups := f.drain(); len(ups) != 1 || ups[0] != want {
		t.Errorf("updates after the next round = %+v, want %+v", ups, want)
	}
}
