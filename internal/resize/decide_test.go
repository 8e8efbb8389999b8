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

// Pod-level resources resize in place, as with upstream 1.37's default
// gates (InPlacePodLevelResourcesVerticalScaling is beta and on): cpu and
// memory change, within the node; other resources cannot.
func TestDecidePodLevelResources(t *testing.T) {
	pod := mkPod(ctr{name: "c", r: res4{"100m", "", "64Mi", ""}})
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: list("200m", "64Mi"), Limits: list("1", "1Gi")}
	allocated := FromPod(pod)
	if _, ok := allocated[PodLevel]; !ok {
		t.Fatal("FromPod left out the pod-level resources")
	}
	node := Inputs{Allocatable: list("2", "4Gi")}
	for _, tc := range []struct {
		name string
		r    v1.ResourceRequirements
		want Outcome
	}{
		{"unchanged", v1.ResourceRequirements{Requests: list("200m", "64Mi"), Limits: list("1", "1Gi")}, None},
		{"cpu and memory up", v1.ResourceRequirements{Requests: list("500m", "128Mi"), Limits: list("1500m", "2Gi")}, Accepted},
		{"memory limit down", v1.ResourceRequirements{Requests: list("200m", "64Mi"), Limits: list("1", "512Mi")}, Accepted},
		{"beyond the node", v1.ResourceRequirements{Requests: list("3", "64Mi"), Limits: list("3", "1Gi")}, Infeasible},
		{"hugepages", v1.ResourceRequirements{Requests: list("200m", "64Mi"), Limits: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi"), "hugepages-2Mi": resource.MustParse("2Mi")}}, Infeasible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod.DeepCopy()
			p.Spec.Resources = tc.r.DeepCopy()
			got := Decide(p, allocated, node)
			if got.Outcome != tc.want {
				t.Fatalf("Decide = %v %q, want %v", got.Outcome, got.Message, tc.want)
			}
			if tc.name == "hugepages" && got.Message != "In-place resize of pod-level resources: resource hugepages-2Mi cannot be resized in place." {
				t.Errorf("message %q", got.Message)
			}
			if got.Outcome == Accepted {
				if a := WithAllocation(pod, FromPod(p)); !a.Spec.Resources.Limits.Memory().Equal(*tc.r.Limits.Memory()) {
					t.Errorf("WithAllocation pod-level limits %v, want %v", a.Spec.Resources.Limits, tc.r.Limits)
				}
			}
		})
	}
}

// Every init container resizes, sidecar or not, as upstream 1.37
// (InPlacePodVerticalScalingInitContainers is GA).
func TestFromPodTakesInitContainers(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := mkPod(ctr{name: "app", r: res4{cpuReq: "1"}})
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init", Resources: res4{cpuReq: "2"}.reqs()},
		{Name: "side", RestartPolicy: &always, Resources: res4{cpuReq: "3"}.reqs()},
	}
	a := FromPod(pod)
	if _, ok := a["init"]; !ok {
		t.Error("an init container is missing from the allocation")
	}
	if len(a) != 3 {
		t.Errorf("allocation %v, want 3 containers", a)
	}
}
