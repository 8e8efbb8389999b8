package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func ctrPolicy(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }

func exitRule(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// The cases follow upstream's ContainerShouldRestart (pkg/api/v1/pod) and
// KEP-5307: rules first, then the container's policy, then the pod's.
func TestRestartsOnExit(t *testing.T) {
	tests := []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		exit   int32
		want   bool
	}{
		{"pod Always, exit 0", v1.RestartPolicyAlways, nil, nil, 0, true},
		{"pod OnFailure, exit 0", v1.RestartPolicyOnFailure, nil, nil, 0, false},
		{"pod OnFailure, exit 1", v1.RestartPolicyOnFailure, nil, nil, 1, true},
		{"pod Never, exit 1", v1.RestartPolicyNever, nil, nil, 1, false},
		{"pod policy empty means Always", "", nil, nil, 0, true},
		{"container Never overrides pod Always", v1.RestartPolicyAlways, ctrPolicy(v1.ContainerRestartPolicyNever), nil, 1, false},
		{"container Always overrides pod Never", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyAlways), nil, 0, true},
		{"container OnFailure, exit 0", v1.RestartPolicyAlways, ctrPolicy(v1.ContainerRestartPolicyOnFailure), nil, 0, false},
		{"container OnFailure, exit 3", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyOnFailure), nil, 3, true},
		{"rule In 42 matches", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 42, true},
		{"rule In 42 does not match 1: the container's Never applies", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 1, false},
		{"rule NotIn 0 matches 1", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, 1, true},
		{"rule NotIn 0 does not match 0", v1.RestartPolicyAlways, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}, 0, false},
		{"second rule matches", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpIn, 1), exitRule(v1.ContainerRestartRuleOnExitCodesOpIn, 2)}, 2, true},
		{"unknown operator never matches", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{exitRule("Between", 42)}, 42, false},
		{"rule without exit codes never matches", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}, 42, false},
		{"RestartAllContainers falls through to the container's policy", v1.RestartPolicyAlways, ctrPolicy(v1.ContainerRestartPolicyNever),
			[]v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}, 42, false},
		{"rules without a container policy are not looked at", v1.RestartPolicyNever, nil,
			[]v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpIn, 42)}, 42, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			if got := RestartsOnExit(c, &v1.PodSpec{RestartPolicy: tc.pod}, tc.exit); got != tc.want {
				t.Errorf("RestartsOnExit = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartsWithoutExitCode(t *testing.T) {
	tests := []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		want   bool
	}{
		{"pod Always", v1.RestartPolicyAlways, nil, true},
		{"pod OnFailure", v1.RestartPolicyOnFailure, nil, true},
		{"pod Never", v1.RestartPolicyNever, nil, false},
		{"container Never in an Always pod", v1.RestartPolicyAlways, ctrPolicy(v1.ContainerRestartPolicyNever), false},
		{"container OnFailure in a Never pod", v1.RestartPolicyNever, ctrPolicy(v1.ContainerRestartPolicyOnFailure), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tc.policy,
				// Rules are never looked at without an exit code.
				RestartPolicyRules: []v1.ContainerRestartRule{exitRule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)}}
			if got := RestartsWithoutExitCode(c, &v1.PodSpec{RestartPolicy: tc.pod}); got != tc.want {
				t.Errorf("RestartsWithoutExitCode = %v, want %v", got, tc.want)
			}
		})
	}
}
