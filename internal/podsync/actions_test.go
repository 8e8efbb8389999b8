package podsync

import (
	"slices"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixedHash gives every container the hash stored in its image name's
// length, so tests control "changed" by changing the image.
func fixedHash(c *v1.Container) uint64 { return uint64(len(c.Image)) }

type holdAll map[string]time.Duration

func (h holdAll) hold(key string, _ time.Time) time.Duration { return h[key] }

func testPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "img"})
	}
	for _, n := range apps {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img"})
	}
	return p
}

// withSidecars marks the named init containers restartPolicy: Always.
func withSidecars(p *v1.Pod, names ...string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	for i := range p.Spec.InitContainers {
		if slices.Contains(names, p.Spec.InitContainers[i].Name) {
			p.Spec.InitContainers[i].RestartPolicy = &always
		}
	}
	return p
}

func readySandbox() *runtime.SandboxStatus {
	return &runtime.SandboxStatus{ID: "sb1", State: runtime.SandboxReady, IPs: []string{"10.0.0.2"}, CreatedAt: t0}
}

func ctr(id, name string, state runtime.ContainerState, exit int32, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{ID: id, Name: name, SandboxID: "sb1", State: state, ExitCode: exit,
		RestartCount: restarts, Hash: 3, CreatedAt: t0.Add(time.Duration(restarts) * time.Minute),
		FinishedAt: t0.Add(time.Duration(restarts)*time.Minute + time.Second)}
}

func started(a podActions) []string {
	var out []string
	for _, s := range a.start {
		out = append(out, s.container.Name)
	}
	return out
}

func killed(a podActions) []string {
	var out []string
	for _, k := range a.kill {
		out = append(out, k.id)
	}
	sort.Strings(out)
	return out
}

func TestComputeActions(t *testing.T) {
	tests := []struct {
		name          string
		pod           *v1.Pod
		sandboxes     []*runtime.SandboxStatus
		containers    []*runtime.ContainerStatus
		hold          holdAll
		wantSandbox   bool
		wantKillPod   bool
		wantStart     []string
		wantKill      []string
		wantTerminal  bool
		wantWaiting   map[string]string
		wantRequeue   time.Duration
		wantRemoveCtr []string
	}{
		{
			name:        "new pod creates sandbox and starts all app containers",
			pod:         testPod(v1.RestartPolicyAlways, nil, "a", "b"),
			wantSandbox: true,
			wantStart:   []string{"a", "b"},
		},
		{
			name:        "new pod with init containers starts only the first init container",
			pod:         testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			wantSandbox: true,
			wantStart:   []string{"i1"},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:        "second init container starts after the first succeeded",
			pod:         testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 0, 0)},
			wantStart:   []string{"i2"},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:        "running init container blocks the next",
			pod:         testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerRunning, 0, 0)},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:      "app containers start when every init container succeeded",
			pod:       testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("c2", "i2", runtime.ContainerExited, 0, 0),
				ctr("c1", "i1", runtime.ContainerExited, 0, 0),
			},
			wantStart: []string{"a"},
		},
		{
			name:         "failed init container with restartPolicy Never ends the pod",
			pod:          testPod(v1.RestartPolicyNever, []string{"i1"}, "a"),
			sandboxes:    []*runtime.SandboxStatus{readySandbox()},
			containers:   []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 1, 0)},
			wantTerminal: true,
			wantWaiting:  map[string]string{"a": "PodInitializing"},
		},
		{
			name:        "failed init container is restarted with OnFailure",
			pod:         testPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 1, 0)},
			wantStart:   []string{"i1"},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:       "running container with the same hash is left alone",
			pod:        testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes:  []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerRunning, 0, 0)},
		},
		{
			name: "running container whose spec changed is killed and started again",
			pod: func() *v1.Pod {
				p := testPod(v1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].Image = "other-image"
				return p
			}(),
			sandboxes:  []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerRunning, 0, 0)},
			wantKill:   []string{"c1"},
			wantStart:  []string{"a"},
		},
		{
			name:       "exited container restarts when not in backoff",
			pod:        testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes:  []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 1, 0)},
			wantStart:  []string{"a"},
		},
		{
			name:        "exited container in backoff waits in CrashLoopBackOff",
			pod:         testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 1, 0)},
			hold:        holdAll{"default_p_uid1_a_3": 7 * time.Second},
			wantWaiting: map[string]string{"a": ReasonCrashLoopBackOff},
			wantRequeue: 7 * time.Second,
		},
		{
			name:       "OnFailure does not restart a container that succeeded",
			pod:        testPod(v1.RestartPolicyOnFailure, nil, "a", "b"),
			sandboxes:  []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0), ctr("c2", "b", runtime.ContainerRunning, 0, 0)},
		},
		{
			name:         "Never with every container exited is terminal",
			pod:          testPod(v1.RestartPolicyNever, nil, "a", "b"),
			sandboxes:    []*runtime.SandboxStatus{readySandbox()},
			containers:   []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0), ctr("c2", "b", runtime.ContainerExited, 2, 0)},
			wantTerminal: true,
		},
		{
			name:        "dead sandbox is replaced and containers start again",
			pod:         testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes:   []*runtime.SandboxStatus{{ID: "sb1", State: runtime.SandboxNotReady, Attempt: 0}},
			containers:  []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerRunning, 0, 0)},
			wantSandbox: true,
			wantKillPod: true,
			wantStart:   []string{"a"},
		},
		{
			name:         "dead sandbox of a Never pod that ran containers is not replaced",
			pod:          testPod(v1.RestartPolicyNever, nil, "a"),
			sandboxes:    []*runtime.SandboxStatus{{ID: "sb1", State: runtime.SandboxNotReady}},
			containers:   []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0)},
			wantKillPod:  true,
			wantTerminal: true,
		},
		// Sidecars (init containers with restartPolicy: Always), as
		// upstream's KEP-753: started in order, the next init container
		// waits until the sidecar runs, they do not block app containers
		// once running, and they are restarted whatever the pod's policy.
		{
			name:        "sidecar runs: the next init container starts",
			pod:         withSidecars(testPod(v1.RestartPolicyAlways, []string{"side", "i2"}, "a"), "side"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("s1", "side", runtime.ContainerRunning, 0, 0)},
			wantStart:   []string{"i2"},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:        "sidecar not yet running blocks the next init container",
			pod:         withSidecars(testPod(v1.RestartPolicyAlways, []string{"side", "i2"}, "a"), "side"),
			sandboxes:   []*runtime.SandboxStatus{readySandbox()},
			containers:  []*runtime.ContainerStatus{ctr("s1", "side", runtime.ContainerCreated, 0, 0)},
			wantStart:   []string{"side"},
			wantKill:    []string{"s1"},
			wantWaiting: map[string]string{"a": "PodInitializing"},
		},
		{
			name:      "app containers start while the sidecar keeps running",
			pod:       withSidecars(testPod(v1.RestartPolicyNever, []string{"side", "i2"}, "a", "b"), "side"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("c2", "i2", runtime.ContainerExited, 0, 0),
				ctr("s1", "side", runtime.ContainerRunning, 0, 0),
			},
			wantStart: []string{"a", "b"},
		},
		{
			name:      "an exited sidecar restarts under restartPolicy Never without stopping the app",
			pod:       withSidecars(testPod(v1.RestartPolicyNever, []string{"side"}, "a"), "side"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("a1", "a", runtime.ContainerRunning, 0, 0),
				ctr("s1", "side", runtime.ContainerExited, 0, 0),
			},
			wantStart: []string{"side"},
		},
		{
			name:      "a crashing sidecar waits out its backoff, the app goes on",
			pod:       withSidecars(testPod(v1.RestartPolicyAlways, []string{"side"}, "a"), "side"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("a1", "a", runtime.ContainerRunning, 0, 0),
				ctr("s1", "side", runtime.ContainerExited, 1, 2),
			},
			hold:        holdAll{backoffKey(testPod("", nil), "side", 3): 20 * time.Second},
			wantWaiting: map[string]string{"side": ReasonCrashLoopBackOff},
			wantRequeue: 20 * time.Second,
		},
		{
			name:      "job-like pod with a sidecar is terminal when the app containers finished",
			pod:       withSidecars(testPod(v1.RestartPolicyNever, []string{"side"}, "a"), "side"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("a1", "a", runtime.ContainerExited, 0, 0),
				ctr("s1", "side", runtime.ContainerRunning, 0, 0),
			},
			wantTerminal: true,
		},
		{
			name:      "a sidecar whose image changed is replaced",
			pod:       withSidecars(testPod(v1.RestartPolicyAlways, []string{"side"}, "a"), "side"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("a1", "a", runtime.ContainerRunning, 0, 0),
				{ID: "s1", Name: "side", SandboxID: "sb1", State: runtime.ContainerRunning, Hash: 99, CreatedAt: t0},
			},
			wantStart: []string{"side"},
			wantKill:  []string{"s1"},
		},
		{
			name:      "a container not in the spec is killed",
			pod:       testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("c1", "a", runtime.ContainerRunning, 0, 0),
				ctr("c9", "gone", runtime.ContainerRunning, 0, 0),
			},
			wantKill: []string{"c9"},
		},
		{
			name:      "older exited attempts are collected, the newest is kept",
			pod:       testPod(v1.RestartPolicyAlways, nil, "a"),
			sandboxes: []*runtime.SandboxStatus{readySandbox()},
			containers: []*runtime.ContainerStatus{
				ctr("c3", "a", runtime.ContainerRunning, 0, 2),
				ctr("c2", "a", runtime.ContainerExited, 1, 1),
				ctr("c1", "a", runtime.ContainerExited, 1, 0),
			},
			wantRemoveCtr: []string{"c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: tt.sandboxes, Containers: tt.containers}
			hold := tt.hold
			if hold == nil {
				hold = holdAll{}
			}
			a := computeActions(tt.pod, rs, fixedHash, hold, nil)
			if a.createSandbox != tt.wantSandbox {
				t.Errorf("createSandbox = %v, want %v", a.createSandbox, tt.wantSandbox)
			}
			if a.killPod != tt.wantKillPod {
				t.Errorf("killPod = %v, want %v", a.killPod, tt.wantKillPod)
			}
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if got := killed(a); !slices.Equal(got, tt.wantKill) {
				t.Errorf("kill = %v, want %v", got, tt.wantKill)
			}
			if a.terminal != tt.wantTerminal {
				t.Errorf("terminal = %v, want %v", a.terminal, tt.wantTerminal)
			}
			gotWaiting := map[string]string{}
			for n, w := range a.waiting {
				gotWaiting[n] = w.reason
			}
			if tt.wantWaiting == nil {
				tt.wantWaiting = map[string]string{}
			}
			if len(gotWaiting) != len(tt.wantWaiting) {
				t.Errorf("waiting = %v, want %v", gotWaiting, tt.wantWaiting)
			}
			for n, r := range tt.wantWaiting {
				if gotWaiting[n] != r {
					t.Errorf("waiting[%s] = %q, want %q", n, gotWaiting[n], r)
				}
			}
			if a.requeueAfter != tt.wantRequeue {
				t.Errorf("requeueAfter = %v, want %v", a.requeueAfter, tt.wantRequeue)
			}
			if !slices.Equal(a.removeContainers, tt.wantRemoveCtr) {
				t.Errorf("removeContainers = %v, want %v", a.removeContainers, tt.wantRemoveCtr)
			}
		})
	}
}

func TestRestartCountsContinue(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	rs := &runtime.PodStatus{
		Sandboxes:  []*runtime.SandboxStatus{readySandbox()},
		Containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 1, 4)},
	}
	a := computeActions(pod, rs, fixedHash, holdAll{}, nil)
	if len(a.start) != 1 || a.start[0].restartCount != 5 {
		t.Fatalf("start = %+v, want one start with restartCount 5", a.start)
	}
	if a.start[0].backoffKey == "" {
		t.Error("a crash restart must advance the backoff")
	}
}
