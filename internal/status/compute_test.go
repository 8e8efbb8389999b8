package status

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/runtime"
)

var (
	t0  = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	now = t0.Add(time.Hour)
)

// testPod is a pod with one app container "app".
func testPod(mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "app", Image: "busybox:1.36"}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func withPolicy(rp v1.RestartPolicy) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.RestartPolicy = rp }
}

func withInit(names ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, n := range names {
			p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1.36"})
		}
	}
}

func withSidecar(name string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		always := v1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: name, Image: "envoy:1", RestartPolicy: &always})
	}
}

func withContainers(names ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers = nil
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img-" + n})
		}
	}
}

func static(p *v1.Pod) {
	p.Annotations = map[string]string{podconfig.AnnotationConfigSource: "file"}
}

func fromAPI(p *v1.Pod) {
	p.Annotations = map[string]string{podconfig.AnnotationConfigSource: "api"}
}

func sandbox(ips ...string) *runtime.SandboxStatus {
	return &runtime.SandboxStatus{ID: "sb1", State: runtime.SandboxReady, CreatedAt: t0, IPs: ips}
}

func running(name, id string, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{
		ID: id, Name: name, SandboxID: "sb1", State: runtime.ContainerRunning,
		CreatedAt: t0, StartedAt: t0.Add(time.Second), ImageRef: "sha256:abc", RestartCount: restarts,
	}
}

func exited(name, id string, code int32, restarts int) *runtime.ContainerStatus {
	return &runtime.ContainerStatus{
		ID: id, Name: name, SandboxID: "sb1", State: runtime.ContainerExited, ExitCode: code,
		CreatedAt: t0, StartedAt: t0.Add(time.Second), FinishedAt: t0.Add(time.Minute),
		ImageRef: "sha256:abc", RestartCount: restarts,
	}
}

func initRec(c *runtime.ContainerStatus) *runtime.ContainerStatus {
	c.Init = true
	return c
}

func rstatus(sbs []*runtime.SandboxStatus, cs ...*runtime.ContainerStatus) *runtime.PodStatus {
	return &runtime.PodStatus{UID: "uid-1", Name: "web", Namespace: "default", Sandboxes: sbs, Containers: cs}
}

func cond(t *testing.T, s v1.PodStatus, ct v1.PodConditionType) v1.PodCondition {
	t.Helper()
	c := findCondition(s.Conditions, ct)
	if c == nil {
		t.Fatalf("condition %s missing in %+v", ct, s.Conditions)
	}
	return *c
}

func wantCond(t *testing.T, s v1.PodStatus, ct v1.PodConditionType, status v1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(t, s, ct)
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%q (%s), want %s/%q", ct, c.Status, c.Reason, c.Message, status, reason)
	}
}

func cstatus(t *testing.T, list []v1.ContainerStatus, name string) v1.ContainerStatus {
	t.Helper()
	st := findStatus(list, name)
	if st == nil {
		t.Fatalf("no status for container %q in %+v", name, list)
	}
	return *st
}

func wantWaiting(t *testing.T, st v1.ContainerStatus, reason string) {
	t.Helper()
	if st.State.Waiting == nil || st.State.Waiting.Reason != reason {
		t.Errorf("container %s state = %+v, want waiting %q", st.Name, st.State, reason)
	}
}

func TestCompute(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		rs    *runtime.PodStatus
		in    Inputs
		phase v1.PodPhase
		check func(t *testing.T, s v1.PodStatus)
	}{
		{
			name:  "nothing in the runtime yet: pending, ContainerCreating",
			pod:   testPod(),
			rs:    nil,
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				wantWaiting(t, st, ReasonContainerCreating)
				if st.Image != "busybox:1.36" || st.ContainerID != "" || st.Ready || st.Started == nil || *st.Started {
					t.Errorf("status = %+v", st)
				}
				wantCond(t, s, v1.PodScheduled, v1.ConditionTrue, "")
				wantCond(t, s, v1.PodReadyToStartContainers, v1.ConditionFalse, "")
				wantCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
				wantCond(t, s, v1.ContainersReady, v1.ConditionFalse, ReasonContainersNotReady)
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonContainersNotReady)
				if m := cond(t, s, v1.PodReady).Message; m != "containers with unready status: [app]" {
					t.Errorf("ready message = %q", m)
				}
				if s.StartTime == nil || !s.StartTime.Time.Equal(now) {
					t.Errorf("startTime = %v, want %v", s.StartTime, now)
				}
				if s.QOSClass != v1.PodQOSBestEffort {
					t.Errorf("qosClass = %q", s.QOSClass)
				}
				if s.PodIP != "" || len(s.PodIPs) != 0 {
					t.Errorf("pod IPs = %q %v, want none", s.PodIP, s.PodIPs)
				}
			},
		},
		{
			name:  "sandbox ready, image pull failing: waiting reason from the sync loop",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}),
			in:    Inputs{Waiting: map[string]Waiting{"app": {Reason: "ErrImagePull", Message: "not found"}}},
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				wantWaiting(t, st, "ErrImagePull")
				if st.State.Waiting.Message != "not found" {
					t.Errorf("message = %q", st.State.Waiting.Message)
				}
				wantCond(t, s, v1.PodReadyToStartContainers, v1.ConditionTrue, "")
				if s.PodIP != "10.88.0.4" {
					t.Errorf("podIP = %q", s.PodIP)
				}
			},
		},
		{
			name:  "running",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4", "fd00::4")}, running("app", "c1", 0)),
			in:    Inputs{NodeIPs: []string{"192.168.1.10"}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				if st.State.Running == nil || !st.State.Running.StartedAt.Time.Equal(t0.Add(time.Second)) {
					t.Errorf("state = %+v", st.State)
				}
				if st.ContainerID != "containerd://c1" || st.ImageID != "sha256:abc" || st.Image != "busybox:1.36" {
					t.Errorf("ids = %q %q %q", st.ContainerID, st.ImageID, st.Image)
				}
				if !st.Ready || st.Started == nil || !*st.Started {
					t.Errorf("ready=%v started=%v", st.Ready, st.Started)
				}
				for _, ct := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady, v1.PodScheduled} {
					wantCond(t, s, ct, v1.ConditionTrue, "")
				}
				if s.PodIP != "10.88.0.4" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::4" {
					t.Errorf("pod IPs = %q %v", s.PodIP, s.PodIPs)
				}
				if s.HostIP != "192.168.1.10" || len(s.HostIPs) != 1 {
					t.Errorf("host IPs = %q %v", s.HostIP, s.HostIPs)
				}
			},
		},
		{
			name:  "runtime name input prefixes the container ID",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0)),
			in:    Inputs{RuntimeName: "cri-o"},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if id := cstatus(t, s.ContainerStatuses, "app").ContainerID; id != "cri-o://c1" {
					t.Errorf("containerID = %q", id)
				}
			},
		},
		{
			name:  "init container running: app PodInitializing, not initialized",
			pod:   testPod(withInit("setup")),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, initRec(running("setup", "i1", 0))),
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				wantWaiting(t, cstatus(t, s.ContainerStatuses, "app"), ReasonPodInitializing)
				ist := cstatus(t, s.InitContainerStatuses, "setup")
				if ist.State.Running == nil || ist.Ready {
					t.Errorf("init status = %+v", ist)
				}
				wantCond(t, s, v1.PodInitialized, v1.ConditionFalse, ReasonContainersNotInitialized)
				if m := cond(t, s, v1.PodInitialized).Message; m != "containers with incomplete status: [setup]" {
					t.Errorf("initialized message = %q", m)
				}
			},
		},
		{
			name:  "init containers not created yet: both PodInitializing",
			pod:   testPod(withInit("setup")),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}),
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				wantWaiting(t, cstatus(t, s.InitContainerStatuses, "setup"), ReasonPodInitializing)
				wantWaiting(t, cstatus(t, s.ContainerStatuses, "app"), ReasonPodInitializing)
			},
		},
		{
			name: "init done, app running",
			pod:  testPod(withInit("setup", "migrate")),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				running("app", "c1", 0), initRec(exited("migrate", "i2", 0, 0)), initRec(exited("setup", "i1", 0, 0))),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if len(s.InitContainerStatuses) != 2 || s.InitContainerStatuses[0].Name != "setup" || s.InitContainerStatuses[1].Name != "migrate" {
					t.Fatalf("init statuses not in spec order: %+v", s.InitContainerStatuses)
				}
				for _, ist := range s.InitContainerStatuses {
					if ist.State.Terminated == nil || ist.State.Terminated.Reason != ReasonCompleted || !ist.Ready {
						t.Errorf("init %s = %+v ready=%v", ist.Name, ist.State, ist.Ready)
					}
				}
				wantCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
				wantCond(t, s, v1.PodReady, v1.ConditionTrue, "")
			},
		},
		{
			name: "init done, app waiting on the sync loop",
			pod:  testPod(withInit("setup")),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				initRec(exited("setup", "i1", 0, 0))),
			in:    Inputs{Waiting: map[string]Waiting{"app": {Reason: ReasonContainerCreating}, "setup": {Reason: "Stale"}}},
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				wantWaiting(t, cstatus(t, s.ContainerStatuses, "app"), ReasonContainerCreating)
				// A completed init container is not restarted: a waiting
				// reason for it does not apply.
				if ist := cstatus(t, s.InitContainerStatuses, "setup"); ist.State.Terminated == nil {
					t.Errorf("completed init container state = %+v", ist.State)
				}
				wantCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
			},
		},
		{
			name: "crash loop: waiting with the previous attempt as last state",
			pod:  testPod(),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				exited("app", "c4", 1, 3), exited("app", "c3", 2, 2), exited("app", "c2", 1, 1)),
			in:    Inputs{Waiting: map[string]Waiting{"app": {Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				wantWaiting(t, st, "CrashLoopBackOff")
				last := st.LastTerminationState.Terminated
				if last == nil || last.ExitCode != 1 || last.Reason != ReasonError || last.ContainerID != "containerd://c4" {
					t.Errorf("lastState = %+v", st.LastTerminationState)
				}
				if st.RestartCount != 3 || st.Ready || st.ContainerID != "containerd://c4" {
					t.Errorf("restartCount=%d ready=%v id=%q", st.RestartCount, st.Ready, st.ContainerID)
				}
				wantCond(t, s, v1.ContainersReady, v1.ConditionFalse, ReasonContainersNotReady)
			},
		},
		{
			name: "restarted and running: last state from the previous attempt",
			pod:  testPod(),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				running("app", "c2", 1), exited("app", "c1", 137, 0)),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				if st.State.Running == nil || st.RestartCount != 1 {
					t.Errorf("status = %+v", st)
				}
				if last := st.LastTerminationState.Terminated; last == nil || last.ExitCode != 137 || last.ContainerID != "containerd://c1" {
					t.Errorf("lastState = %+v", st.LastTerminationState)
				}
			},
		},
		{
			name:  "restartPolicy Never, exit 0: Succeeded",
			pod:   testPod(withPolicy(v1.RestartPolicyNever)),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 0, 0)),
			in:    Inputs{Waiting: map[string]Waiting{"app": {Reason: "CrashLoopBackOff"}}},
			phase: v1.PodSucceeded,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				if st.State.Terminated == nil || st.State.Terminated.Reason != ReasonCompleted {
					t.Errorf("state = %+v (a waiting reason must not apply to a container that is not restarted)", st.State)
				}
				if !st.State.Terminated.FinishedAt.Time.Equal(t0.Add(time.Minute)) {
					t.Errorf("finishedAt = %v", st.State.Terminated.FinishedAt)
				}
				wantCond(t, s, v1.ContainersReady, v1.ConditionFalse, ReasonPodCompleted)
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonPodCompleted)
				wantCond(t, s, v1.PodInitialized, v1.ConditionTrue, ReasonPodCompleted)
			},
		},
		{
			name:  "restartPolicy Never, exit 1: Failed",
			pod:   testPod(withPolicy(v1.RestartPolicyNever)),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 1, 0)),
			phase: v1.PodFailed,
			check: func(t *testing.T, s v1.PodStatus) {
				if st := cstatus(t, s.ContainerStatuses, "app"); st.State.Terminated.Reason != ReasonError {
					t.Errorf("reason = %q", st.State.Terminated.Reason)
				}
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonPodFailed)
			},
		},
		{
			name: "restartPolicy Never, one of two failed: Failed",
			pod:  testPod(withPolicy(v1.RestartPolicyNever), withContainers("a", "b")),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				exited("a", "c1", 0, 0), exited("b", "c2", 3, 0)),
			phase: v1.PodFailed,
		},
		{
			name: "restartPolicy Never, one still running: Running",
			pod:  testPod(withPolicy(v1.RestartPolicyNever), withContainers("a", "b")),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				exited("a", "c1", 1, 0), running("b", "c2", 0)),
			phase: v1.PodRunning,
		},
		{
			name:  "runtime reason wins: OOMKilled",
			pod:   testPod(withPolicy(v1.RestartPolicyNever)),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, func() *runtime.ContainerStatus { c := exited("app", "c1", 137, 0); c.Reason = "OOMKilled"; return c }()),
			phase: v1.PodFailed,
			check: func(t *testing.T, s v1.PodStatus) {
				if r := cstatus(t, s.ContainerStatuses, "app").State.Terminated.Reason; r != "OOMKilled" {
					t.Errorf("reason = %q", r)
				}
			},
		},
		{
			name:  "restartPolicy OnFailure, exit 1: Running while restarting",
			pod:   testPod(withPolicy(v1.RestartPolicyOnFailure)),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 1, 0)),
			in:    Inputs{Waiting: map[string]Waiting{"app": {Reason: "CrashLoopBackOff"}}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				wantWaiting(t, cstatus(t, s.ContainerStatuses, "app"), "CrashLoopBackOff")
			},
		},
		{
			name:  "restartPolicy OnFailure, exit 0: Succeeded",
			pod:   testPod(withPolicy(v1.RestartPolicyOnFailure)),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 0, 0)),
			phase: v1.PodSucceeded,
		},
		{
			name:  "restartPolicy Always, exit 0: Running",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 0, 0)),
			phase: v1.PodRunning,
		},
		{
			name:  "restartPolicy Never, init container failed: Failed",
			pod:   testPod(withPolicy(v1.RestartPolicyNever), withInit("setup")),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, initRec(exited("setup", "i1", 2, 0))),
			phase: v1.PodFailed,
		},
		{
			name: "restartPolicy Always, init container crash looping: Pending",
			pod:  testPod(withInit("setup")),
			rs:   rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, initRec(exited("setup", "i2", 2, 1))),
			in: Inputs{Waiting: map[string]Waiting{
				"setup": {Reason: "CrashLoopBackOff"}, "app": {Reason: "ShouldNotMatter"},
			}},
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				ist := cstatus(t, s.InitContainerStatuses, "setup")
				wantWaiting(t, ist, "CrashLoopBackOff")
				if ist.LastTerminationState.Terminated == nil || ist.RestartCount != 1 {
					t.Errorf("init status = %+v", ist)
				}
			},
		},
		{
			name:  "sidecar started and app running",
			pod:   testPod(withSidecar("proxy")),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0), initRec(running("proxy", "s1", 0))),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if st := cstatus(t, s.InitContainerStatuses, "proxy"); !st.Ready || st.Started == nil || !*st.Started {
					t.Errorf("sidecar status = %+v", st)
				}
				wantCond(t, s, v1.PodInitialized, v1.ConditionTrue, "")
				wantCond(t, s, v1.ContainersReady, v1.ConditionTrue, "")
			},
		},
		{
			name:  "sidecar not yet started: Pending",
			pod:   testPod(withSidecar("proxy")),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, initRec(running("proxy", "s1", 0))),
			in:    Inputs{Started: map[string]bool{"proxy": false}},
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				wantCond(t, s, v1.PodInitialized, v1.ConditionFalse, ReasonContainersNotInitialized)
			},
		},
		{
			name:  "hostNetwork: pod IPs are the node IPs",
			pod:   testPod(func(p *v1.Pod) { p.Spec.HostNetwork = true }),
			rs:    rstatus([]*runtime.SandboxStatus{{ID: "sb1", State: runtime.SandboxReady, HostNetwork: true}}, running("app", "c1", 0)),
			in:    Inputs{NodeIPs: []string{"192.168.1.10", "fd00::10", "192.168.1.11"}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if s.PodIP != "192.168.1.10" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::10" {
					t.Errorf("pod IPs = %q %v", s.PodIP, s.PodIPs)
				}
				if s.HostIP != "192.168.1.10" || len(s.HostIPs) != 2 || s.HostIPs[1].IP != "fd00::10" {
					t.Errorf("host IPs = %q %v", s.HostIP, s.HostIPs)
				}
				wantCond(t, s, v1.PodReadyToStartContainers, v1.ConditionTrue, "")
			},
		},
		{
			name:  "IPv6-primary node: pod IPs ordered by the node's family",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4", "fd00::4")}, running("app", "c1", 0)),
			in:    Inputs{NodeIPs: []string{"fd00::10"}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if s.PodIP != "fd00::4" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "10.88.0.4" {
					t.Errorf("pod IPs = %q %v", s.PodIP, s.PodIPs)
				}
			},
		},
		{
			name: "sandbox not ready: no pod IP, not ready to start containers",
			pod:  testPod(),
			rs: rstatus([]*runtime.SandboxStatus{{ID: "sb1", State: runtime.SandboxNotReady, IPs: []string{"10.88.0.4"}}},
				exited("app", "c1", 0, 0)),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if s.PodIP != "" {
					t.Errorf("podIP = %q, want none", s.PodIP)
				}
				wantCond(t, s, v1.PodReadyToStartContainers, v1.ConditionFalse, "")
			},
		},
		{
			name:  "readiness input false: running but not ready",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0)),
			in:    Inputs{Ready: map[string]bool{"app": false}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				if cstatus(t, s.ContainerStatuses, "app").Ready {
					t.Error("container ready, want not ready")
				}
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonContainersNotReady)
			},
		},
		{
			name: "readiness gate not satisfied",
			pod: testPod(func(p *v1.Pod) {
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
			}),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0)),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				wantCond(t, s, v1.ContainersReady, v1.ConditionTrue, "")
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, ReasonReadinessGatesNotReady)
			},
		},
		{
			name: "readiness gate satisfied by a foreign condition, which is kept",
			pod: testPod(func(p *v1.Pod) {
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
				p.Status.Conditions = []v1.PodCondition{
					{Type: "example.com/lb", Status: v1.ConditionTrue},
					{Type: v1.PodReady, Status: v1.ConditionFalse},
				}
			}),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0)),
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				wantCond(t, s, "example.com/lb", v1.ConditionTrue, "")
				wantCond(t, s, v1.PodReady, v1.ConditionTrue, "")
				if len(s.Conditions) != 6 {
					t.Errorf("conditions = %+v, want 6", s.Conditions)
				}
			},
		},
		{
			name: "app container statuses sorted by name, init in spec order",
			pod:  testPod(withContainers("zeta", "alpha", "mid"), withInit("z-init", "a-init")),
			rs:   rstatus(nil),
			check: func(t *testing.T, s v1.PodStatus) {
				var names []string
				for _, st := range s.ContainerStatuses {
					names = append(names, st.Name)
				}
				for _, st := range s.InitContainerStatuses {
					names = append(names, st.Name)
				}
				if got := strings.Join(names, ","); got != "alpha,mid,zeta,z-init,a-init" {
					t.Errorf("order = %s", got)
				}
			},
			phase: v1.PodPending,
		},
		{
			name: "running container vanished from the runtime: last state unknown, restart counted",
			pod:  testPod(),
			rs:   rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}),
			in: Inputs{Old: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", RestartCount: 2,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
			}}}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				wantWaiting(t, st, ReasonContainerCreating)
				last := st.LastTerminationState.Terminated
				if last == nil || last.Reason != ReasonContainerStatusUnknown || last.ExitCode != 137 || st.RestartCount != 3 {
					t.Errorf("status = %+v", st)
				}
			},
		},
		{
			name: "runtime lost the state of a running container: terminated unknown",
			pod:  testPod(),
			rs: rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")},
				func() *runtime.ContainerStatus {
					c := running("app", "c1", 0)
					c.State = runtime.ContainerUnknown
					return c
				}()),
			in: Inputs{Old: &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", RestartCount: 4,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
			}}}},
			phase: v1.PodRunning,
			check: func(t *testing.T, s v1.PodStatus) {
				st := cstatus(t, s.ContainerStatuses, "app")
				if st.State.Terminated == nil || st.State.Terminated.Reason != ReasonContainerStatusUnknown || st.RestartCount != 5 {
					t.Errorf("status = %+v", st)
				}
			},
		},
		{
			name: "terminated container removed from the runtime keeps its old state",
			pod:  testPod(withPolicy(v1.RestartPolicyNever)),
			rs:   rstatus(nil),
			in: Inputs{Old: &v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{
				Name: "app", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: ReasonCompleted}},
			}}}},
			phase: v1.PodSucceeded,
			check: func(t *testing.T, s v1.PodStatus) {
				if st := cstatus(t, s.ContainerStatuses, "app"); st.State.Terminated == nil || st.State.Terminated.Reason != ReasonCompleted {
					t.Errorf("state = %+v", st.State)
				}
			},
		},
		{
			name:  "terminal phase from the previous status is kept",
			pod:   testPod(),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0)),
			in:    Inputs{Old: &v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			phase: v1.PodFailed,
			check: func(t *testing.T, s v1.PodStatus) {
				if s.Reason != "Evicted" || s.Message != "low on memory" {
					t.Errorf("reason/message = %q/%q", s.Reason, s.Message)
				}
			},
		},
		{
			name: "terminal phase from the API is kept",
			pod: testPod(func(p *v1.Pod) {
				p.Status.Phase = v1.PodSucceeded
			}),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 1, 0)),
			phase: v1.PodSucceeded,
		},
		{
			name:  "terminating API pod with restartPolicy Always and all stopped: Succeeded",
			pod:   testPod(fromAPI),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 0, 0)),
			in:    Inputs{Terminating: true},
			phase: v1.PodSucceeded,
		},
		{
			name:  "terminating API pod with a failure: Failed",
			pod:   testPod(fromAPI),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 143, 0)),
			in:    Inputs{Terminating: true},
			phase: v1.PodFailed,
		},
		{
			name:  "terminating static pod keeps the restart-policy phase",
			pod:   testPod(static),
			rs:    rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, exited("app", "c1", 143, 0)),
			in:    Inputs{Terminating: true},
			phase: v1.PodRunning,
		},
		{
			name: "guaranteed QoS class",
			pod: testPod(func(p *v1.Pod) {
				rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")}
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: rl, Requests: rl}
			}),
			rs:    nil,
			phase: v1.PodPending,
			check: func(t *testing.T, s v1.PodStatus) {
				if s.QOSClass != v1.PodQOSGuaranteed {
					t.Errorf("qosClass = %q", s.QOSClass)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now = now
			before := tt.pod.DeepCopy()
			s := Compute(tt.pod, tt.rs, in)
			if s.Phase != tt.phase {
				t.Errorf("phase = %s, want %s; containers %+v", s.Phase, tt.phase, s.ContainerStatuses)
			}
			if tt.check != nil {
				tt.check(t, s)
			}
			if len(s.Conditions) < 5 {
				t.Errorf("conditions = %+v, want the five kubelet-owned ones", s.Conditions)
			}
			if tt.pod.String() != before.String() {
				t.Error("Compute modified the pod")
			}
		})
	}
}

func TestComputeTransitionTimes(t *testing.T) {
	pod := testPod()
	rs := rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0))
	start := metav1.NewTime(t0.Add(-time.Hour))
	old := &v1.PodStatus{
		Phase:     v1.PodPending,
		StartTime: &start,
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)},
			{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0), Reason: ReasonContainersNotReady},
		},
	}
	s := Compute(pod, rs, Inputs{Now: now, Old: old})
	tests := []struct {
		ct   v1.PodConditionType
		want time.Time
	}{
		{v1.PodScheduled, t0},
		{v1.PodInitialized, t0},
		{v1.PodReadyToStartContainers, t0},
		{v1.ContainersReady, now},
		{v1.PodReady, now},
	}
	for _, tt := range tests {
		if got := cond(t, s, tt.ct).LastTransitionTime.Time; !got.Equal(tt.want) {
			t.Errorf("%s lastTransitionTime = %v, want %v", tt.ct, got, tt.want)
		}
	}
	if s.StartTime == nil || !s.StartTime.Equal(&start) {
		t.Errorf("startTime = %v, want %v", s.StartTime, start)
	}
	if s.StartTime == old.StartTime {
		t.Error("startTime shares memory with the old status")
	}
}

func TestComputePhaseReasonKept(t *testing.T) {
	pod := testPod()
	rs := rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0))
	tests := []struct {
		name       string
		old        *v1.PodStatus
		wantReason string
	}{
		{"same phase keeps reason", &v1.PodStatus{Phase: v1.PodRunning, Reason: "R", Message: "M"}, "R"},
		{"phase change drops reason", &v1.PodStatus{Phase: v1.PodPending, Reason: "R", Message: "M"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(pod, rs, Inputs{Now: now, Old: tt.old})
			if s.Reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", s.Reason, tt.wantReason)
			}
		})
	}
}

func TestSelectIPs(t *testing.T) {
	tests := []struct {
		ips, prefer []string
		want        string
	}{
		{nil, nil, ""},
		{[]string{"10.0.0.1"}, nil, "10.0.0.1"},
		{[]string{"fd00::1", "10.0.0.1", "10.0.0.2"}, nil, "10.0.0.1,fd00::1"},
		{[]string{"fd00::1", "10.0.0.1"}, []string{"fd00::9"}, "fd00::1,10.0.0.1"},
		{[]string{"bogus", "fd00::1"}, []string{"10.0.0.9"}, "fd00::1"},
		{[]string{"::ffff:10.0.0.1"}, nil, "::ffff:10.0.0.1"},
	}
	for _, tt := range tests {
		if got := strings.Join(selectIPs(tt.ips, tt.prefer), ","); got != tt.want {
			t.Errorf("selectIPs(%v, %v) = %q, want %q", tt.ips, tt.prefer, got, tt.want)
		}
	}
}
