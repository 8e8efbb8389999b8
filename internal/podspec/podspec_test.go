package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestIsSidecar(t *testing.T) {
	always, onFailure := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicy("OnFailure")
	tests := []struct {
		name   string
		policy *v1.ContainerRestartPolicy
		want   bool
	}{
		{"no restart policy", nil, false},
		{"Always", &always, true},
		{"another policy", &onFailure, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsSidecar(&v1.Container{Name: "c", RestartPolicy: tc.policy}); got != tc.want {
				t.Errorf("IsSidecar = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsTerminalPhase(t *testing.T) {
	want := map[v1.PodPhase]bool{
		v1.PodPending: false, v1.PodRunning: false, v1.PodUnknown: false, "": false,
		v1.PodSucceeded: true, v1.PodFailed: true,
	}
	for phase, w := range want {
		if got := IsTerminalPhase(phase); got != w {
			t.Errorf("IsTerminalPhase(%q) = %v, want %v", phase, got, w)
		}
	}
}
