package status

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

// withContainerPolicy gives the named init or app container its own
// restartPolicy and restartPolicyRules.
func withContainerPolicy(name string, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range list {
				if list[i].Name == name {
					list[i].RestartPolicy = &policy
					list[i].RestartPolicyRules = rules
				}
			}
		}
	}
}

var restartOn42 = v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
	ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}

// TestComputeRestartRules: the status shows what the sync loop does with a
// container's own restart rules, and the phase follows upstream's getPhase
// with ContainerRestartRules (pkg/kubelet/kubelet_pods.go): a stopped
// container counts as final only when its rules, its own policy and the
// pod's do not restart it. Job pod failure policies read the terminated
// state's exit code, so a final container must show it.
func TestComputeRestartRules(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		recs  []*runtime.ContainerStatus
		phase v1.PodPhase
		// waiting is the sync loop's CrashLoopBackOff for these containers.
		waiting []string
		// terminated: containers shown terminated, with their exit code;
		// the others must not be.
		terminated map[string]int32
	}{
		{
			name:  "Never container exited in an Always pod, sibling running: Running, shown terminated",
			pod:   testPod(withContainers("once", "web"), withContainerPolicy("once", v1.ContainerRestartPolicyNever)),
			recs:  []*runtime.ContainerStatus{exited("once", "c1", 3, 0), running("web", "c2", 0)},
			phase: v1.PodRunning, terminated: map[string]int32{"once": 3},
		},
		{
			name: "every container final in an Always pod, one failed: Failed",
			pod: testPod(withContainers("a", "b"), withContainerPolicy("a", v1.ContainerRestartPolicyNever),
				withContainerPolicy("b", v1.ContainerRestartPolicyOnFailure)),
			recs:  []*runtime.ContainerStatus{exited("a", "c1", 1, 0), exited("b", "c2", 0, 0)},
			phase: v1.PodFailed, terminated: map[string]int32{"a": 1, "b": 0},
		},
		{
			name:  "every container succeeded and final in an Always pod: Succeeded",
			pod:   testPod(withContainerPolicy("app", v1.ContainerRestartPolicyOnFailure)),
			recs:  []*runtime.ContainerStatus{exited("app", "c1", 0, 0)},
			phase: v1.PodSucceeded, terminated: map[string]int32{"app": 0},
		},
		{
			name:  "rule In 42 in a Never pod, exit 42: Running, shown terminated until restarted",
			pod:   testPod(withPolicy(v1.RestartPolicyNever), withContainerPolicy("app", v1.ContainerRestartPolicyNever, restartOn42)),
			recs:  []*runtime.ContainerStatus{exited("app", "c1", 42, 0)},
			phase: v1.PodRunning, terminated: map[string]int32{"app": 42},
		},
		{
			name:    "rule In 42 in a Never pod, exit 42 in backoff: Running, waiting",
			pod:     testPod(withPolicy(v1.RestartPolicyNever), withContainerPolicy("app", v1.ContainerRestartPolicyNever, restartOn42)),
			recs:    []*runtime.ContainerStatus{exited("app", "c1", 42, 0)},
			waiting: []string{"app"}, phase: v1.PodRunning,
		},
		{
			// The sync loop never asks to restart a final container; were
			// it to, the status would still show it terminated.
			name:    "rule In 42 in a Never pod, exit 1: Failed with exit code 1",
			waiting: []string{"app"},
			pod:     testPod(withPolicy(v1.RestartPolicyNever), withContainerPolicy("app", v1.ContainerRestartPolicyNever, restartOn42)),
			recs:    []*runtime.ContainerStatus{exited("app", "c1", 1, 0)},
			phase:   v1.PodFailed, terminated: map[string]int32{"app": 1},
		},
		{
			name:    "Always container in a Never pod after success: Running",
			pod:     testPod(withPolicy(v1.RestartPolicyNever), withContainerPolicy("app", v1.ContainerRestartPolicyAlways)),
			recs:    []*runtime.ContainerStatus{exited("app", "c1", 0, 0)},
			waiting: []string{"app"}, phase: v1.PodRunning,
		},
		{
			name:  "init container Never failed in an OnFailure pod: Failed",
			pod:   testPod(withPolicy(v1.RestartPolicyOnFailure), withInit("i1"), withContainerPolicy("i1", v1.ContainerRestartPolicyNever)),
			recs:  []*runtime.ContainerStatus{initRec(exited("i1", "c1", 1, 0))},
			phase: v1.PodFailed,
		},
		{
			name:  "init container OnFailure failed in a Never pod: Pending, retried",
			pod:   testPod(withPolicy(v1.RestartPolicyNever), withInit("i1"), withContainerPolicy("i1", v1.ContainerRestartPolicyOnFailure)),
			recs:  []*runtime.ContainerStatus{initRec(exited("i1", "c1", 1, 0))},
			phase: v1.PodPending,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Inputs{Now: now, Waiting: map[string]Waiting{}}
			for _, n := range tt.waiting {
				in.Waiting[n] = Waiting{Reason: "CrashLoopBackOff"}
			}
			s := Compute(tt.pod, rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, tt.recs...), in)
			if s.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", s.Phase, tt.phase)
			}
			for _, c := range tt.pod.Spec.Containers {
				st := cstatus(t, s.ContainerStatuses, c.Name)
				code, final := tt.terminated[c.Name]
				switch term := st.State.Terminated; {
				case final && term == nil:
					t.Errorf("%s state = %+v, want terminated with exit code %d", c.Name, st.State, code)
				case final && term.ExitCode != code:
					t.Errorf("%s exit code = %d, want %d", c.Name, term.ExitCode, code)
				case !final && term != nil:
					t.Errorf("%s is shown terminated (%+v), want it on its way to a restart", c.Name, term)
				}
				if !final && slices.Contains(tt.waiting, c.Name) && (st.State.Waiting == nil || st.LastTerminationState.Terminated == nil) {
					t.Errorf("%s = %+v, want waiting with its last termination", c.Name, st)
				}
			}
		})
	}
}

func TestCheckContainerTransitionsRestartRules(t *testing.T) {
	never, onFailure := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure
	terminated := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	runningState := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	tests := []struct {
		name    string
		pod     v1.RestartPolicy
		policy  *v1.ContainerRestartPolicy
		rules   []v1.ContainerRestartRule
		exit    int32
		wantErr bool
	}{
		{"Never pod, no container policy", v1.RestartPolicyNever, nil, nil, 1, true},
		{"Never pod, rule In 42 on 42", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{restartOn42}, 42, false},
		{"Never pod, rule In 42 on 1", v1.RestartPolicyNever, &never, []v1.ContainerRestartRule{restartOn42}, 1, true},
		{"Never pod, container OnFailure after failure", v1.RestartPolicyNever, &onFailure, nil, 2, false},
		{"OnFailure pod, container Never after failure", v1.RestartPolicyOnFailure, &never, nil, 2, false},
		{"OnFailure pod, container OnFailure after success", v1.RestartPolicyOnFailure, &onFailure, nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1.PodSpec{RestartPolicy: tt.pod, InitContainers: []v1.Container{{Name: "i", RestartPolicy: tt.policy, RestartPolicyRules: tt.rules}},
				Containers: []v1.Container{{Name: "a", RestartPolicy: tt.policy, RestartPolicyRules: tt.rules}}}
			for _, init := range []bool{false, true} {
				old, cur := &v1.PodStatus{}, &v1.PodStatus{}
				if init {
					old.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", State: terminated(tt.exit)}}
					cur.InitContainerStatuses = []v1.ContainerStatus{{Name: "i", State: runningState}}
				} else {
					old.ContainerStatuses = []v1.ContainerStatus{{Name: "a", State: terminated(tt.exit)}}
					cur.ContainerStatuses = []v1.ContainerStatus{{Name: "a", State: runningState}}
				}
				if err := checkContainerTransitions(old, cur, spec); (err != nil) != tt.wantErr {
					t.Errorf("init=%v: err = %v, want error %v", init, err, tt.wantErr)
				}
			}
		})
	}
}
