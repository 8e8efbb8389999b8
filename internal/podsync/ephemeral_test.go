package podsync

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

// withEphemeral adds ephemeral containers; target is their
// targetContainerName ("" for none).
func withEphemeral(p *v1.Pod, target string, names ...string) *v1.Pod {
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "debug"},
			TargetContainerName:      target,
		})
	}
	return p
}

// Each ephemeral container without a runtime record starts once, before
// the init containers and whether or not initialization is done; one that
// ran is never started again nor stopped by a sync; the target of one with
// targetContainerName is the running instance of that container.
func TestComputeActionsEphemeral(t *testing.T) {
	tests := []struct {
		name       string
		pod        *v1.Pod
		containers []*runtime.ContainerStatus
		wantStart  []string
		wantTarget map[string]string // name → targetID, or "!" for a target error
		wantKill   []string
	}{
		{
			name:       "added to a running pod starts, targeting the app's instance",
			pod:        withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg"),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			wantStart:  []string{"dbg"},
			wantTarget: map[string]string{"dbg": "c1"},
		},
		{
			name:       "without a target",
			pod:        withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "", "dbg"),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			wantStart:  []string{"dbg"},
			wantTarget: map[string]string{"dbg": ""},
		},
		{
			name:       "target not running",
			pod:        withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg"),
			containers: []*runtime.ContainerStatus{ctr("c1", "app", runtime.ContainerExited, 1, 0)},
			wantStart:  []string{"dbg", "app"},
			wantTarget: map[string]string{"dbg": "!"},
		},
		{
			name:       "running: left alone",
			pod:        withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg"),
			containers: []*runtime.ContainerStatus{ctr("e1", "dbg", runtime.ContainerRunning, 0, 0), ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
		},
		{
			name: "exited with a failure under restartPolicy Always: never restarted",
			pod:  withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg"),
			containers: []*runtime.ContainerStatus{
				ctr("e1", "dbg", runtime.ContainerExited, 1, 0), ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
		},
		{
			name:       "while init containers run, before them",
			pod:        withEphemeral(testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "app"), "i1", "dbg"),
			containers: []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 0, 0)},
			wantStart:  []string{"dbg", "i2"},
			wantTarget: map[string]string{"dbg": "!"},
		},
		{
			name: "a second one added later starts alone",
			pod:  withEphemeral(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg", "dbg2"),
			containers: []*runtime.ContainerStatus{
				ctr("e1", "dbg", runtime.ContainerExited, 0, 0), ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			wantStart:  []string{"dbg2"},
			wantTarget: map[string]string{"dbg2": "c1"},
		},
		{
			name: "one the spec does not name is stopped",
			pod:  testPod(v1.RestartPolicyAlways, nil, "app"),
			containers: []*runtime.ContainerStatus{
				ctr("e1", "dbg", runtime.ContainerRunning, 0, 0), ctr("c1", "app", runtime.ContainerRunning, 0, 0)},
			wantKill: []string{"e1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{readySandbox()}, Containers: tt.containers}
			a := computeActions(tt.pod, rs, func(*v1.Container) uint64 { return 3 }, holdAll{}, nil)
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Errorf("started %v, want %v", got, tt.wantStart)
			}
			if got := killed(a); !slices.Equal(got, tt.wantKill) {
				t.Errorf("killed %v, want %v", got, tt.wantKill)
			}
			for _, s := range a.start {
				want, ok := tt.wantTarget[s.container.Name]
				if !ok {
					if s.ephemeral {
						t.Errorf("%s started as ephemeral", s.container.Name)
					}
					continue
				}
				if !s.ephemeral || s.restartCount != 0 || s.backoffKey != "" {
					t.Errorf("%s: ephemeral %v, restart count %d, backoff %q; want an ephemeral first start", s.container.Name, s.ephemeral, s.restartCount, s.backoffKey)
				}
				switch {
				case want == "!" && s.targetErr == "":
					t.Errorf("%s: target %q without error, want an error", s.container.Name, s.targetID)
				case want != "!" && (s.targetID != want || s.targetErr != ""):
					t.Errorf("%s: target %q (error %q), want %q", s.container.Name, s.targetID, s.targetErr, want)
				}
			}
		})
	}
}

// The PID namespace of an ephemeral container with a target is the
// target's, unless the pod shares one namespace already.
func TestTargetPIDNamespace(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mode   runtimeapi.NamespaceMode
		target string
		want   runtimeapi.NamespaceMode
		wantID string
	}{
		{"own namespace, target", runtimeapi.NamespaceMode_CONTAINER, "c1", runtimeapi.NamespaceMode_TARGET, "c1"},
		{"own namespace, no target", runtimeapi.NamespaceMode_CONTAINER, "", runtimeapi.NamespaceMode_CONTAINER, ""},
		{"shareProcessNamespace", runtimeapi.NamespaceMode_POD, "c1", runtimeapi.NamespaceMode_POD, ""},
		{"hostPID", runtimeapi.NamespaceMode_NODE, "c1", runtimeapi.NamespaceMode_NODE, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: tt.mode},
			}}}
			targetPIDNamespace(cfg, tt.target)
			ns := cfg.Linux.SecurityContext.NamespaceOptions
			if ns.Pid != tt.want || ns.TargetId != tt.wantID {
				t.Errorf("pid %s target %q, want %s %q", ns.Pid, ns.TargetId, tt.want, tt.wantID)
			}
		})
	}
}

// An ephemeral container added to a running pod starts in the target's PID
// namespace and is reported running; after it exits it is reported
// terminated and not started again by later syncs; it stops with the pod.
func TestSyncPodEphemeralContainer(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	h.sync(pod)
	app := h.running("app")

	pod = pod.DeepCopy()
	withEphemeral(pod, "app", "dbg")
	pod.Spec.EphemeralContainers[0].Image = "busybox:1.35"
	pod.Spec.EphemeralContainers[0].ImagePullPolicy = v1.PullIfNotPresent
	h.sync(pod)
	dbg := h.running("dbg")
	ns := dbg.Config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app.ID {
		t.Errorf("dbg pid namespace %s target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), app.ID)
	}
	if h.running("app").ID != app.ID {
		t.Error("the app container was replaced")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if len(st.EphemeralContainerStatuses) != 1 || st.EphemeralContainerStatuses[0].State.Running == nil {
		t.Fatalf("ephemeral statuses %+v, want dbg running", st.EphemeralContainerStatuses)
	}

	h.fake.SetExit(dbg.ID, 2, "Error")
	for range 3 {
		h.sync(pod)
	}
	if n := len(h.containers("dbg")); n != 1 {
		t.Errorf("%d dbg containers after it exited, want 1 (never restarted)", n)
	}
	st, _ = h.status.GetPodStatus(pod.UID)
	if term := st.EphemeralContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 2 {
		t.Errorf("dbg state %+v, want terminated with 2", st.EphemeralContainerStatuses[0].State)
	}

	// A second one, then the pod stops: both stopped with the app.
	withEphemeral(pod, "", "dbg2")
	pod.Spec.EphemeralContainers[1].Image = "busybox:1.35"
	pod.Spec.EphemeralContainers[1].ImagePullPolicy = v1.PullIfNotPresent
	h.sync(pod)
	h.running("dbg2")
	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 1); err != nil {
		t.Fatalf("SyncTerminatingPod: %v", err)
	}
	for _, c := range h.fake.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still running after the pod stopped", c.Config.GetMetadata().GetName())
		}
	}
}
