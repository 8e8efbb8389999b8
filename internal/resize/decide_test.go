package resize

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type res4 struct{ cpuReq, cpuLim, memReq, memLim string }

func (r res4) reqs() v1.ResourceRequirements {
	out := v1.ResourceRequirements{}
	set := func(l *v1.ResourceList, n v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[n] = resource.MustParse(q)
	}
	set(&out.Requests, v1.ResourceCPU, r.cpuReq)
	set(&out.Limits, v1.ResourceCPU, r.cpuLim)
	set(&out.Requests, v1.ResourceMemory, r.memReq)
	set(&out.Limits, v1.ResourceMemory, r.memLim)
	return out
}

type ctr struct {
	name           string
	r              res4
	cpuPol, memPol v1.ResourceResizeRestartPolicy
}

func mkPod(cs ...ctr) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid"}}
	for _, c := range cs {
		k := v1.Container{Name: c.name, Image: "busybox", Resources: c.r.reqs()}
		if c.cpuPol != "" {
			k.ResizePolicy = append(k.ResizePolicy, v1.ContainerResizePolicy{ResourceName: v1.ResourceCPU, RestartPolicy: c.cpuPol})
		}
		if c.memPol != "" {
			k.ResizePolicy = append(k.ResizePolicy, v1.ContainerResizePolicy{ResourceName: v1.ResourceMemory, RestartPolicy: c.memPol})
		}
		p.Spec.Containers = append(p.Spec.Containers, k)
	}
	return p
}

func list(cpu, mem string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
}

func TestDecide(t *testing.T) {
	node := list("2", "4Gi")
	burst := res4{"100m", "200m", "64Mi", "128Mi"}
	for _, tc := range []struct {
		name      string
		allocated Allocation
		pod       *v1.Pod
		in        Inputs
		want      Outcome
		msg       string
	}{
		{name: "no change", allocated: Allocation{"c": burst.reqs()}, pod: mkPod(ctr{name: "c", r: burst}),
			in: Inputs{Allocatable: node}, want: None},
		{name: "increase that fits", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"500m", "1", "128Mi", "256Mi"}}),
			in:  Inputs{Allocatable: node, OthersRequested: list("1", "1Gi")}, want: Accepted},
		{name: "decrease", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"50m", "100m", "32Mi", "64Mi"}}),
			in:  Inputs{Allocatable: node, OthersRequested: list("1900m", "3Gi")}, want: Accepted},
		{name: "cpu beyond allocatable", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"3", "3", "64Mi", "128Mi"}}),
			in:  Inputs{Allocatable: node}, want: Infeasible,
			msg: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"},
		{name: "memory beyond allocatable is named before cpu", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"3", "4", "5Gi", "6Gi"}}),
			in:  Inputs{Allocatable: node}, want: Infeasible,
			msg: "Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"},
		{name: "cpu taken by other pods", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"1500m", "1500m", "64Mi", "128Mi"}}),
			in:  Inputs{Allocatable: node, OthersRequested: list("1", "0")}, want: Deferred,
			msg: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{name: "memory taken by other pods", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"100m", "200m", "2Gi", "2Gi"}}),
			in:  Inputs{Allocatable: node, OthersRequested: list("0", "3Gi")}, want: Deferred,
			msg: "Node didn't have enough resource: memory, requested: 2147483648, used: 3221225472, capacity: 4294967296"},
		{name: "static pod", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"150m", "200m", "64Mi", "128Mi"}}),
			in:  Inputs{Allocatable: node, Static: true}, want: Infeasible, msg: msgStatic},
		{name: "burstable to guaranteed", allocated: Allocation{"c": burst.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"200m", "200m", "128Mi", "128Mi"}}),
			in:  Inputs{Allocatable: node}, want: Infeasible,
			msg: "In-place resize would change the pod's QoS class from Burstable to Guaranteed."},
		{name: "guaranteed stays guaranteed", allocated: Allocation{"c": res4{"1", "1", "1Gi", "1Gi"}.reqs()},
			pod: mkPod(ctr{name: "c", r: res4{"1500m", "1500m", "2Gi", "2Gi"}}),
			in:  Inputs{Allocatable: node}, want: Accepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.pod, tc.allocated, tc.in)
			if got.Outcome != tc.want || got.Message != tc.msg {
				t.Fatalf("Decide = %v %q, want %v %q", got.Outcome, got.Message, tc.want, tc.msg)
			}
		})
	}
}

func TestDecideRefusesOtherResources(t *testing.T) {
	pod := mkPod(ctr{name: "c", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	allocated := FromPod(pod)
	pod.Spec.Containers[0].Resources.Limits["ephemeral-storage"] = resource.MustParse("1Gi")
	got := Decide(pod, allocated, Inputs{Allocatable: list("2", "4Gi")})
	if got.Outcome != Infeasible {
		t.Fatalf("a change of ephemeral-storage: %v %q, want Infeasible", got.Outcome, got.Message)
	}
}

func TestDecideRefusesRestartsOfNeverPods(t *testing.T) {
	pod := mkPod(ctr{name: "c", r: res4{"100m", "200m", "64Mi", "128Mi"}, memPol: v1.RestartContainer})
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	allocated := FromPod(pod)
	cpuOnly := pod.DeepCopy()
	cpuOnly.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("300m")
	if got := Decide(cpuOnly, allocated, Inputs{Allocatable: list("2", "4Gi")}); got.Outcome != Accepted {
		t.Errorf("a cpu resize (NotRequired) of a Never pod: %v %q, want Accepted", got.Outcome, got.Message)
	}
	mem := pod.DeepCopy()
	mem.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("256Mi")
	if got := Decide(mem, allocated, Inputs{Allocatable: list("2", "4Gi")}); got.Outcome != Infeasible {
		t.Errorf("a memory resize (RestartContainer) of a Never pod: %v, want Infeasible", got.Outcome)
	}
}

func TestDecideRefusesPodLevelResources(t *testing.T) {
	pod := mkPod(ctr{name: "c", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	allocated := FromPod(pod)
	pod.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("150m")
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: list("1", "1Gi")}
	if got := Decide(pod, allocated, Inputs{Allocatable: list("2", "4Gi")}); got.Outcome != Infeasible {
		t.Fatalf("a pod with pod-level resources: %v, want Infeasible", got.Outcome)
	}
}

// FromPod records every init and regular container, as the upstream
// kubelet v1.37.2 does (pkg/kubelet/allocation, ResourceInfoForPod and
// IsResizableContainer with InPlacePodVerticalScalingInitContainers GA).
func TestFromPodTakesEveryContainer(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := mkPod(ctr{name: "app", r: res4{cpuReq: "1"}})
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init", Resources: res4{cpuReq: "2"}.reqs()},
		{Name: "side", RestartPolicy: &always, Resources: res4{cpuReq: "3"}.reqs()},
	}
	a := FromPod(pod)
	for name, cpu := range map[string]string{"init": "2", "side": "3", "app": "1"} {
		r, ok := a[name]
		if !ok {
			t.Errorf("container %s is missing from the allocation", name)
			continue
		}
		if q := r.Requests[v1.ResourceCPU]; q.String() != cpu {
			t.Errorf("container %s: cpu request %s, want %s", name, q.String(), cpu)
		}
	}
	if len(a) != 3 {
		t.Errorf("allocation %v, want 3 containers", a)
	}
}
