package podsync

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/heartlet/heartlet/internal/probe"
	"github.com/heartlet/heartlet/internal/runtime"
)

// fakeProbes holds results by container ID and kind.
type fakeProbes struct {
	mu sync.Mutex
	m  map[string]probe.Result
}

func (f *fakeProbes) key(id string, kind probe.Kind) string { return fmt.Sprintf("%s/%d", id, kind) }

func (f *fakeProbes) set(id string, kind probe.Kind, r probe.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]probe.Result{}
	}
	f.m[f.key(id, kind)] = r
}

func (f *fakeProbes) Result(id string, kind probe.Kind) (probe.Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.m[f.key(id, kind)]
	return r, ok
}

func TestAddProbeKills(t *testing.T) {
	five := int64(5)
	withProbes := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &five}
		p.Spec.Containers[0].StartupProbe = &v1.Probe{}
		return p
	}
	tests := []struct {
		name        string
		pod         *v1.Pod
		containers  []*runtime.ContainerStatus
		results     map[probe.Kind]probe.Result // for container c1
		wantKill    []string
		wantMessage string
		wantGrace   *time.Duration
		wantStart   []string
		wantCount   int
	}{
		{
			// Upstream kuberuntime computePodActions: "Container X failed
			// liveness probe, will be restarted".
			name:       "liveness failure restarts with the probe's grace",
			pod:        withProbes(testPod(v1.RestartPolicyAlways, nil, "app")),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 2)},
			results:    map[probe.Kind]probe.Result{probe.Liveness: probe.Failure},
			wantKill:   []string{"c1"}, wantMessage: "Container app failed liveness probe, will be restarted",
			wantGrace: ptrDuration(5 * time.Second), wantStart: []string{"app"}, wantCount: 3,
		},
		{
			name:       "startup failure restarts",
			pod:        withProbes(testPod(v1.RestartPolicyOnFailure, nil, "app")),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			results:    map[probe.Kind]probe.Result{probe.Startup: probe.Failure, probe.Liveness: probe.Success},
			wantKill:   []string{"c1"}, wantMessage: "Container app failed startup probe, will be restarted",
			wantStart: []string{"app"}, wantCount: 1,
		},
		{
			name:       "restartPolicy Never: killed, not restarted",
			pod:        withProbes(testPod(v1.RestartPolicyNever, nil, "app")),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			results:    map[probe.Kind]probe.Result{probe.Liveness: probe.Failure},
			wantKill:   []string{"c1"}, wantMessage: "Container app failed liveness probe",
			wantGrace: ptrDuration(5 * time.Second),
		},
		{
			// A container's own restartPolicy decides after a probe kill;
			// its rules do not (no exit code), as upstream.
			name: "container restartPolicy Never in an Always pod: killed, not restarted",
			pod: withPolicy(withProbes(testPod(v1.RestartPolicyAlways, nil, "app")), "app", v1.ContainerRestartPolicyNever,
				rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			results:    map[probe.Kind]probe.Result{probe.Liveness: probe.Failure},
			wantKill:   []string{"c1"}, wantMessage: "Container app failed liveness probe",
			wantGrace: ptrDuration(5 * time.Second),
		},
		{
			name:       "container restartPolicy OnFailure in a Never pod: restarted",
			pod:        withPolicy(withProbes(testPod(v1.RestartPolicyNever, nil, "app")), "app", v1.ContainerRestartPolicyOnFailure),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			results:    map[probe.Kind]probe.Result{probe.Liveness: probe.Failure},
			wantKill:   []string{"c1"}, wantMessage: "Container app failed liveness probe, will be restarted",
			wantGrace: ptrDuration(5 * time.Second), wantStart: []string{"app"}, wantCount: 1,
		},
		{
			name:       "readiness failure changes nothing",
			pod:        withProbes(testPod(v1.RestartPolicyAlways, nil, "app")),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			results:    map[probe.Kind]probe.Result{probe.Readiness: probe.Failure, probe.Liveness: probe.Success},
		},
		{
			name:       "exited container is left to the restart policy",
			pod:        withProbes(testPod(v1.RestartPolicyNever, nil, "app")),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerExited, 1, 0)},
			results:    map[probe.Kind]probe.Result{probe.Liveness: probe.Failure},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProbes{}
			for k, r := range tt.results {
				fp.set("c1", k, r)
			}
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{readySandbox()}, Containers: tt.containers}
			a := computeActions(tt.pod, rs, fixedHash, holdAll{}, nil)
			addProbeKills(tt.pod, rs, &a, fp)
			if got := killed(a); !slices.Equal(got, tt.wantKill) {
				t.Fatalf("killed = %v, want %v", got, tt.wantKill)
			}
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Fatalf("started = %v, want %v", got, tt.wantStart)
			}
			if len(tt.wantKill) > 0 {
				k := a.kill[0]
				if k.message != tt.wantMessage {
					t.Errorf("message = %q, want %q", k.message, tt.wantMessage)
				}
				if (k.grace == nil) != (tt.wantGrace == nil) || (k.grace != nil && *k.grace != *tt.wantGrace) {
					t.Errorf("grace = %v, want %v", k.grace, tt.wantGrace)
				}
			}
			if len(tt.wantStart) > 0 && a.start[0].restartCount != tt.wantCount {
				t.Errorf("restartCount = %d, want %d", a.start[0].restartCount, tt.wantCount)
			}
		})
	}
}

func TestAddProbeKillsLeavesReplacedContainers(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "changed-image" // another hash: replaced anyway
	rs := &runtime.PodStatus{UID: pod.UID, Sandboxes: []*runtime.SandboxStatus{readySandbox()},
		Containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)}}
	fp := &fakeProbes{}
	fp.set("c1", probe.Liveness, probe.Failure)
	a := computeActions(pod, rs, fixedHash, holdAll{}, nil)
	addProbeKills(pod, rs, &a, fp)
	if len(a.kill) != 1 || len(a.start) != 1 || a.kill[0].message != "" {
		t.Fatalf("kill = %+v start = %v", a.kill, started(a))
	}
}

func TestProbeInputs(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyAlways, nil, "plain", "ready", "starting")
	pod.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, ReadinessProbe: &v1.Probe{}}}
	pod.Spec.Containers[1].ReadinessProbe = &v1.Probe{}
	pod.Spec.Containers[2].ReadinessProbe = &v1.Probe{}
	pod.Spec.Containers[2].StartupProbe = &v1.Probe{}
	rs := &runtime.PodStatus{Containers: []*runtime.ContainerStatus{
		ctr("p1", "plain", runtime.ContainerRunning, 0, 0),
		ctr("r1", "ready", runtime.ContainerRunning, 0, 0),
		ctr("s1", "starting", runtime.ContainerRunning, 0, 0),
		ctr("x1", "side", runtime.ContainerRunning, 0, 0),
	}}
	fp := &fakeProbes{}
	fp.set("r1", probe.Readiness, probe.Success)
	fp.set("s1", probe.Readiness, probe.Success)
	fp.set("s1", probe.Startup, probe.Unknown)
	ready, started := probeInputs(pod, rs, fp)
	wantReady := map[string]bool{"ready": true, "starting": true, "side": false}
	wantStarted := map[string]bool{"starting": false}
	if fmt.Sprint(ready) != fmt.Sprint(wantReady) || fmt.Sprint(started) != fmt.Sprint(wantStarted) {
		t.Errorf("ready = %v started = %v, want %v %v", ready, started, wantReady, wantStarted)
	}
	if r, s := probeInputs(pod, rs, nil); r != nil || s != nil {
		t.Errorf("without probes: %v %v", r, s)
	}
}

type recordedEvent struct{ reason, message string }

type recorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *recorder) Eventf(_ k8sruntime.Object, _, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, recordedEvent{reason, fmt.Sprintf(format, args...)})
}

func TestSyncPodProbes(t *testing.T) {
	h := newHarness(t)
	fp := &fakeProbes{}
	rec := &recorder{}
	h.syncer.opts.Probes, h.syncer.opts.Recorder = fp, rec
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	seven := int64(7)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &seven}
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	h.sync(pod)
	first := h.running("app")

	ready := func() bool {
		st, ok := h.status.GetPodStatus(pod.UID)
		if !ok || len(st.ContainerStatuses) != 1 {
			t.Fatalf("status = %+v", st)
		}
		for _, c := range st.Conditions {
			if c.Type == v1.PodReady && (c.Status == v1.ConditionTrue) != st.ContainerStatuses[0].Ready {
				t.Fatalf("Ready condition %s disagrees with the container's ready %v", c.Status, st.ContainerStatuses[0].Ready)
			}
		}
		return st.ContainerStatuses[0].Ready
	}
	if ready() {
		t.Fatal("ready before the readiness probe succeeded")
	}
	fp.set(first.ID, probe.Readiness, probe.Success)
	h.sync(pod)
	if !ready() {
		t.Fatal("not ready after the readiness probe succeeded")
	}

	fp.set(first.ID, probe.Liveness, probe.Failure)
	h.sync(pod)
	cs := h.containers("app")
	if len(cs) != 2 || cs[0].ID != first.ID || cs[0].StopTimeout != 7 {
		t.Fatalf("containers = %+v", cs)
	}
	second := h.running("app")
	if second.ID == first.ID {
		t.Fatal("not restarted")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if st.ContainerStatuses[0].RestartCount != 1 || ready() {
		t.Errorf("restartCount = %d ready = %v, want 1 and not ready", st.ContainerStatuses[0].RestartCount, ready())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Contains(rec.events, recordedEvent{"Killing", "Container app failed liveness probe, will be restarted"}) {
		t.Errorf("events = %+v", rec.events)
	}
}

func ptrDuration(d time.Duration) *time.Duration { return &d }

// Sidecars and probes (upstream KEP-753): a sidecar with a startup probe
// holds the next init container until the probe succeeds, and a sidecar
// failing its liveness probe is restarted even under restartPolicy Never.
func TestSidecarProbes(t *testing.T) {
	sidecarPod := func(policy v1.RestartPolicy) *v1.Pod {
		p := withSidecars(testPod(policy, []string{"side", "i2"}, "app"), "side")
		p.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
		p.Spec.InitContainers[0].LivenessProbe = &v1.Probe{}
		return p
	}
	tests := []struct {
		name      string
		pod       *v1.Pod
		ctrs      []*runtime.ContainerStatus
		results   map[probe.Kind]probe.Result // for container s1
		wantStart []string
		wantKill  []string
	}{
		{
			name:    "startup probe not yet passed holds the next init container",
			pod:     sidecarPod(v1.RestartPolicyAlways),
			ctrs:    []*runtime.ContainerStatus{ctr("s1", "side", runtime.ContainerRunning, 0, 0)},
			results: map[probe.Kind]probe.Result{probe.Startup: probe.Unknown},
		},
		{
			name:      "startup probe passed lets the next init container start",
			pod:       sidecarPod(v1.RestartPolicyAlways),
			ctrs:      []*runtime.ContainerStatus{ctr("s1", "side", runtime.ContainerRunning, 0, 0)},
			results:   map[probe.Kind]probe.Result{probe.Startup: probe.Success},
			wantStart: []string{"i2"},
		},
		{
			name: "liveness failure restarts the sidecar under restartPolicy Never",
			pod:  sidecarPod(v1.RestartPolicyNever),
			ctrs: []*runtime.ContainerStatus{
				ctr("a1", "app", runtime.ContainerRunning, 0, 0),
				ctr("s1", "side", runtime.ContainerRunning, 0, 0),
			},
			results:   map[probe.Kind]probe.Result{probe.Startup: probe.Success, probe.Liveness: probe.Failure},
			wantStart: []string{"side"},
			wantKill:  []string{"s1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := &fakeProbes{}
			for k, r := range tt.results {
				fp.set("s1", k, r)
			}
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{readySandbox()}, Containers: tt.ctrs}
			a := computeActions(tt.pod, rs, fixedHash, holdAll{}, fp)
			addProbeKills(tt.pod, rs, &a, fp)
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if got := killed(a); !slices.Equal(got, tt.wantKill) {
				t.Errorf("kill = %v, want %v", got, tt.wantKill)
			}
			for _, s := range a.start {
				if s.container.Name == "side" && !s.init {
					t.Error("a restarted sidecar must start as an init container")
				}
			}
		})
	}
}
