package podsync

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

// withPolicy gives the named container (init or app) its own restartPolicy
// and restartPolicyRules.
func withPolicy(p *v1.Pod, name string, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Pod {
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = &policy
				list[i].RestartPolicyRules = rules
			}
		}
	}
	return p
}

func rule(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// TestComputeActionsRestartRules: a container's own restartPolicy and
// restartPolicyRules override the pod's restartPolicy (KEP-5307, upstream
// kuberuntime computePodActions with ContainerRestartRules, on by default
// since 1.35; the scenarios of upstream's test/e2e/node
// container_restart_rules tests).
func TestComputeActionsRestartRules(t *testing.T) {
	in42 := rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	tests := []struct {
		name         string
		pod          *v1.Pod
		containers   []*runtime.ContainerStatus
		wantStart    []string
		wantTerminal bool
	}{
		{
			name: "Never container in an Always pod stays exited while its sibling restarts",
			pod:  withPolicy(testPod(v1.RestartPolicyAlways, nil, "once", "web"), "once", v1.ContainerRestartPolicyNever),
			containers: []*runtime.ContainerStatus{
				ctr("c1", "once", runtime.ContainerExited, 1, 0),
				ctr("c2", "web", runtime.ContainerExited, 0, 0),
			},
			wantStart: []string{"web"},
		},
		{
			name: "every container Never in an Always pod: the pod is finished",
			pod: withPolicy(withPolicy(testPod(v1.RestartPolicyAlways, nil, "a", "b"),
				"a", v1.ContainerRestartPolicyNever), "b", v1.ContainerRestartPolicyNever),
			containers: []*runtime.ContainerStatus{
				ctr("c1", "a", runtime.ContainerExited, 0, 0),
				ctr("c2", "b", runtime.ContainerExited, 1, 0),
			},
			wantTerminal: true,
		},
		{
			name:       "rule In 42 restarts on 42 in a Never pod",
			pod:        withPolicy(testPod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyNever, in42),
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 42, 0)},
			wantStart:  []string{"a"},
		},
		{
			name:         "rule In 42 does not restart on 1 in a Never pod",
			pod:          withPolicy(testPod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyNever, in42),
			containers:   []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 1, 0)},
			wantTerminal: true,
		},
		{
			name:       "Always container in a Never pod restarts after success",
			pod:        withPolicy(testPod(v1.RestartPolicyNever, nil, "a"), "a", v1.ContainerRestartPolicyAlways),
			containers: []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0)},
			wantStart:  []string{"a"},
		},
		{
			name:         "OnFailure container in an Always pod is done after success",
			pod:          withPolicy(testPod(v1.RestartPolicyAlways, nil, "a"), "a", v1.ContainerRestartPolicyOnFailure),
			containers:   []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0)},
			wantTerminal: true,
		},
		{
			name:       "init container OnFailure in a Never pod is retried",
			pod:        withPolicy(testPod(v1.RestartPolicyNever, []string{"i1"}, "a"), "i1", v1.ContainerRestartPolicyOnFailure),
			containers: []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 1, 0)},
			wantStart:  []string{"i1"},
		},
		{
			name:         "init container Never in an OnFailure pod fails the pod",
			pod:          withPolicy(testPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a"), "i1", v1.ContainerRestartPolicyNever),
			containers:   []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 1, 0)},
			wantTerminal: true,
		},
		{
			name:       "init container rule In 42 in a Never pod is retried on 42",
			pod:        withPolicy(testPod(v1.RestartPolicyNever, []string{"i1"}, "a"), "i1", v1.ContainerRestartPolicyNever, in42),
			containers: []*runtime.ContainerStatus{ctr("c1", "i1", runtime.ContainerExited, 42, 0)},
			wantStart:  []string{"i1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{readySandbox()}, Containers: tt.containers}
			a := computeActions(tt.pod, rs, fixedHash, holdAll{}, nil)
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if a.terminal != tt.wantTerminal {
				t.Errorf("terminal = %v, want %v", a.terminal, tt.wantTerminal)
			}
			for _, s := range a.start {
				if s.restartCount != 1 {
					t.Errorf("%s restartCount = %d, want 1", s.container.Name, s.restartCount)
				}
			}
		})
	}
}

// TestComputeActionsNewSandboxRunOnce: when the sandbox is replaced, app
// containers that run once (OnFailure, their own or the pod's) and already
// succeeded are not run again, and a pod with none left is finished
// (upstream computePodActions, containerSucceeded).
func TestComputeActionsNewSandboxRunOnce(t *testing.T) {
	dead := &runtime.SandboxStatus{ID: "sb1", State: runtime.SandboxNotReady, IPs: []string{"10.0.0.2"}, Attempt: 0}
	tests := []struct {
		name         string
		pod          *v1.Pod
		containers   []*runtime.ContainerStatus
		wantSandbox  bool
		wantStart    []string
		wantTerminal bool
	}{
		{
			name:        "OnFailure pod: the succeeded container is not run again",
			pod:         testPod(v1.RestartPolicyOnFailure, nil, "done", "web"),
			containers:  []*runtime.ContainerStatus{ctr("c1", "done", runtime.ContainerExited, 0, 0), ctr("c2", "web", runtime.ContainerExited, 137, 0)},
			wantSandbox: true, wantStart: []string{"web"},
		},
		{
			name:        "container OnFailure in an Always pod: the succeeded one is not run again",
			pod:         withPolicy(testPod(v1.RestartPolicyAlways, nil, "done", "web"), "done", v1.ContainerRestartPolicyOnFailure),
			containers:  []*runtime.ContainerStatus{ctr("c1", "done", runtime.ContainerExited, 0, 0), ctr("c2", "web", runtime.ContainerExited, 0, 0)},
			wantSandbox: true, wantStart: []string{"web"},
		},
		{
			name:         "every container ran once and succeeded: finished, no sandbox",
			pod:          testPod(v1.RestartPolicyOnFailure, nil, "a"),
			containers:   []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0)},
			wantTerminal: true,
		},
		{
			name:        "container Always in an OnFailure pod runs again after success",
			pod:         withPolicy(testPod(v1.RestartPolicyOnFailure, nil, "a"), "a", v1.ContainerRestartPolicyAlways),
			containers:  []*runtime.ContainerStatus{ctr("c1", "a", runtime.ContainerExited, 0, 0)},
			wantSandbox: true, wantStart: []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{dead}, Containers: tt.containers}
			a := computeActions(tt.pod, rs, fixedHash, holdAll{}, nil)
			if a.createSandbox != tt.wantSandbox {
				t.Errorf("createSandbox = %v, want %v", a.createSandbox, tt.wantSandbox)
			}
			if got := started(a); !slices.Equal(got, tt.wantStart) {
				t.Errorf("start = %v, want %v", got, tt.wantStart)
			}
			if a.terminal != tt.wantTerminal {
				t.Errorf("terminal = %v, want %v", a.terminal, tt.wantTerminal)
			}
		})
	}
}

// TestComputeActionsEarlierSandboxRecord: after init in a new sandbox, an
// app container that exited for good in the earlier sandbox is not run
// again; one its rules restart is.
func TestComputeActionsEarlierSandboxRecord(t *testing.T) {
	pod := withPolicy(withPolicy(testPod(v1.RestartPolicyAlways, []string{"i"}, "once", "web"), "once", v1.ContainerRestartPolicyNever), "web", v1.ContainerRestartPolicyNever,
		rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42))
	sb2 := &runtime.SandboxStatus{ID: "sb2", State: runtime.SandboxReady, IPs: []string{"10.0.0.3"}, Attempt: 1}
	old := func(id, name string, code int32) *runtime.ContainerStatus {
		c := ctr(id, name, runtime.ContainerExited, code, 0)
		c.SandboxID = "sb1"
		return c
	}
	initDone := ctr("c3", "i", runtime.ContainerExited, 0, 1)
	initDone.SandboxID = "sb2"
	rs := &runtime.PodStatus{UID: pod.UID, Sandboxes: []*runtime.SandboxStatus{sb2, readySandbox()},
		Containers: []*runtime.ContainerStatus{initDone, old("c1", "once", 1), old("c2", "web", 42)}}
	a := computeActions(pod, rs, fixedHash, holdAll{}, nil)
	if got := started(a); !slices.Equal(got, []string{"web"}) {
		t.Errorf("start = %v, want [web]", got)
	}
	if a.terminal {
		t.Error("terminal, want the pod running on")
	}
}
