package podspec

import (
	"fmt"
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

func TestRunningContainers(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}, {Name: "migrate"}, {Name: "log", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "app"}, {Name: "worker"}},
	}}
	var names []string
	for _, c := range RunningContainers(pod) {
		names = append(names, c.Name)
	}
	if got, want := fmt.Sprint(names), "[proxy log app worker]"; got != want {
		t.Errorf("RunningContainers = %s, want %s", got, want)
	}
	// The pointers are into the pod.
	RunningContainers(pod)[0].Image = "changed"
	if pod.Spec.InitContainers[1].Image != "changed" {
		t.Error("RunningContainers returned copies")
	}
	if n := len(RunningContainers(&v1.Pod{})); n != 0 {
		t.Errorf("an empty pod has %d running containers", n)
	}
}
