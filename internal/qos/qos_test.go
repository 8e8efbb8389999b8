package qos

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rl builds a resource list from name/quantity pairs.
func rl(kv ...string) v1.ResourceList {
	if len(kv)%2 != 0 {
		panic("rl needs name/quantity pairs")
	}
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// ctr builds a container with the given requests and limits (either nil).
func ctr(name string, reqs, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: reqs, Limits: limits}}
}

func sidecar(name string, reqs, limits v1.ResourceList) v1.Container {
	c := ctr(name, reqs, limits)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func pod(init []v1.Container, app ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{InitContainers: init, Containers: app}}
}

func withPodLevel(p *v1.Pod, reqs, limits v1.ResourceList) *v1.Pod {
	p.Spec.Resources = &v1.ResourceRequirements{Requests: reqs, Limits: limits}
	return p
}

func TestCompute(t *testing.T) {
	guaranteed := rl("cpu", "100m", "memory", "100Mi")
	tests := []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"no containers", pod(nil), v1.PodQOSBestEffort},
		{"no resources", pod(nil, ctr("a", nil, nil)), v1.PodQOSBestEffort},
		{"only other resources", pod(nil, ctr("a", rl("ephemeral-storage", "1Gi"), rl("ephemeral-storage", "1Gi"))), v1.PodQOSBestEffort},
		{"explicit zero cpu and memory", pod(nil, ctr("a", rl("cpu", "0", "memory", "0"), nil)), v1.PodQOSBestEffort},
		{"equal requests and limits", pod(nil, ctr("a", guaranteed, guaranteed)), v1.PodQOSGuaranteed},
		{"requests default to limits", pod(nil, ctr("a", nil, guaranteed)), v1.PodQOSGuaranteed},
		{"requests default per resource", pod(nil, ctr("a", rl("cpu", "100m"), guaranteed)), v1.PodQOSGuaranteed},
		{"equal in other units", pod(nil, ctr("a", rl("cpu", "0.1", "memory", "104857600"), guaranteed)), v1.PodQOSGuaranteed},
		{"guaranteed with extra resources", pod(nil, ctr("a", nil, rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"))), v1.PodQOSGuaranteed},
		{"two guaranteed containers", pod(nil, ctr("a", nil, guaranteed), ctr("b", nil, rl("cpu", "2", "memory", "2Gi"))), v1.PodQOSGuaranteed},
		{"request below limit", pod(nil, ctr("a", rl("cpu", "50m", "memory", "100Mi"), guaranteed)), v1.PodQOSBurstable},
		{"cpu limit only", pod(nil, ctr("a", nil, rl("cpu", "1"))), v1.PodQOSBurstable},
		{"memory request only", pod(nil, ctr("a", rl("memory", "1Gi"), nil)), v1.PodQOSBurstable},
		{"guaranteed next to best effort", pod(nil, ctr("a", nil, guaranteed), ctr("b", nil, nil)), v1.PodQOSBurstable},
		{"best effort next to burstable", pod(nil, ctr("a", nil, nil), ctr("b", rl("cpu", "1"), nil)), v1.PodQOSBurstable},
		{"init container burstable", pod([]v1.Container{ctr("i", rl("cpu", "1"), nil)}, ctr("a", nil, nil)), v1.PodQOSBurstable},
		{"init container best effort next to guaranteed", pod([]v1.Container{ctr("i", nil, nil)}, ctr("a", nil, guaranteed)), v1.PodQOSBurstable},
		{"init and app guaranteed", pod([]v1.Container{ctr("i", nil, guaranteed)}, ctr("a", nil, guaranteed)), v1.PodQOSGuaranteed},
		{"sidecar guaranteed", pod([]v1.Container{sidecar("s", nil, guaranteed)}, ctr("a", guaranteed, guaranteed)), v1.PodQOSGuaranteed},
		{"pod level guaranteed", withPodLevel(pod(nil, ctr("a", nil, nil)), nil, guaranteed), v1.PodQOSGuaranteed},
		{"pod level overrides container", withPodLevel(pod(nil, ctr("a", rl("cpu", "1"), nil)), guaranteed, guaranteed), v1.PodQOSGuaranteed},
		{"pod level requests default to container requests", withPodLevel(pod(nil, ctr("a", rl("cpu", "50m"), nil)), nil, guaranteed), v1.PodQOSBurstable},
		{"pod level burstable", withPodLevel(pod(nil, ctr("a", nil, nil)), rl("cpu", "1"), nil), v1.PodQOSBurstable},
		{"pod level limits default to container limits", withPodLevel(pod(nil, ctr("a", nil, guaranteed)), guaranteed, nil), v1.PodQOSGuaranteed},
		{"pod level with only other resources is ignored", withPodLevel(pod(nil, ctr("a", nil, guaranteed)), rl("ephemeral-storage", "1Gi"), nil), v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Compute(tt.pod); got != tt.want {
				t.Errorf("Compute() = %s, want %s", got, tt.want)
			}
			if got := Class(tt.pod); got != tt.want {
				t.Errorf("Class() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestComputeDoesNotModifyPod(t *testing.T) {
	p := pod(nil, ctr("a", nil, rl("cpu", "1", "memory", "1Gi")))
	p = withPodLevel(p, nil, rl("cpu", "1"))
	Compute(p)
	PodRequestsAndLimits(p)
	if p.Spec.Containers[0].Resources.Requests != nil {
		t.Errorf("container requests were modified: %v", p.Spec.Containers[0].Resources.Requests)
	}
	if p.Spec.Resources.Requests != nil {
		t.Errorf("pod-level requests were modified: %v", p.Spec.Resources.Requests)
	}
}

func TestClassPrefersStatus(t *testing.T) {
	p := pod(nil, ctr("a", nil, nil))
	p.Status.QOSClass = v1.PodQOSBurstable
	if got := Class(p); got != v1.PodQOSBurstable {
		t.Errorf("Class() = %s, want the status class %s", got, v1.PodQOSBurstable)
	}
	if got := Compute(p); got != v1.PodQOSBestEffort {
		t.Errorf("Compute() = %s, want %s", got, v1.PodQOSBestEffort)
	}
}

func TestAllContainersLimit(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no containers", pod(nil), false},
		{"all limited", pod(nil, ctr("a", nil, rl("cpu", "1")), ctr("b", nil, rl("cpu", "2"))), true},
		{"one unlimited", pod(nil, ctr("a", nil, rl("cpu", "1")), ctr("b", nil, nil)), false},
		{"zero limit", pod(nil, ctr("a", nil, rl("cpu", "0"))), false},
		{"init unlimited", pod([]v1.Container{ctr("i", nil, nil)}, ctr("a", nil, rl("cpu", "1"))), false},
		{"init limited", pod([]v1.Container{ctr("i", nil, rl("cpu", "1"))}, ctr("a", nil, rl("cpu", "1"))), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AllContainersLimit(tt.pod, v1.ResourceCPU); got != tt.want {
				t.Errorf("AllContainersLimit() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodLevelLimit(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		want   string
		wantOK bool
	}{
		{"none", pod(nil, ctr("a", nil, rl("memory", "1Gi"))), "", false},
		{"set", withPodLevel(pod(nil, ctr("a", nil, nil)), nil, rl("memory", "1Gi")), "1Gi", true},
		{"other resource set", withPodLevel(pod(nil, ctr("a", nil, nil)), nil, rl("cpu", "1")), "", false},
		{"defaulted from containers", withPodLevel(pod(nil, ctr("a", nil, rl("memory", "1Gi")), ctr("b", nil, rl("memory", "1Gi"))), rl("memory", "1Gi"), nil), "2Gi", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PodLevelLimit(tt.pod, v1.ResourceMemory)
			if ok != tt.wantOK {
				t.Fatalf("PodLevelLimit() ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && got.Cmp(resource.MustParse(tt.want)) != 0 {
				t.Errorf("PodLevelLimit() = %s, want %s", got.String(), tt.want)
			}
		})
	}
}
