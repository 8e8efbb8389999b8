package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

func rlist(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestActualResources(t *testing.T) {
	alloc := v1.ResourceRequirements{Requests: rlist("cpu", "100m", "memory", "64Mi"), Limits: rlist("cpu", "200m", "memory", "128Mi")}
	for _, tc := range []struct {
		name string
		l    *runtimeapi.LinuxContainerResources
		want v1.ResourceRequirements
	}{
		{name: "nothing reported: the allocation", want: alloc},
		{name: "as allocated, despite rounding",
			l:    &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20},
			want: alloc},
		{name: "still the old values during a resize",
			l:    &runtimeapi.LinuxContainerResources{CpuShares: 51, CpuQuota: 10000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20},
			want: v1.ResourceRequirements{Requests: rlist("cpu", "49m", "memory", "64Mi"), Limits: rlist("cpu", "100m", "memory", "64Mi")}},
		{name: "an unlimited memory reported drops the limit",
			l:    &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuQuota: 20000, CpuPeriod: 100000},
			want: v1.ResourceRequirements{Requests: rlist("cpu", "100m", "memory", "64Mi"), Limits: rlist("cpu", "200m")}},
		{name: "no quota reported keeps the allocated limit",
			l:    &runtimeapi.LinuxContainerResources{CpuShares: 102, MemoryLimitInBytes: 128 << 20},
			want: alloc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ActualResources(alloc, tc.l)
			for _, pair := range [][2]v1.ResourceList{{got.Requests, tc.want.Requests}, {got.Limits, tc.want.Limits}} {
				if len(pair[0]) != len(pair[1]) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
				for n, q := range pair[1] {
					if g := pair[0][n]; g.Cmp(q) != 0 {
						t.Errorf("%s = %s, want %s", n, g.String(), q.String())
					}
				}
			}
		})
	}
}

func TestComputeReportsResize(t *testing.T) {
	pod := testPod(withContainers("app", "other"))
	alloc := v1.ResourceRequirements{Requests: rlist("cpu", "500m", "memory", "64Mi"), Limits: rlist("cpu", "1", "memory", "256Mi")}
	rec := running("app", "c1", 0)
	rec.Resources = &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuQuota: 100000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20}
	pending := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible, Message: "no"}
	stale := pod.DeepCopy()
	stale.Status.Conditions = []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue}}
	s := Compute(stale, rstatus([]*runtime.SandboxStatus{sandbox("10.0.0.2")}, rec, running("other", "c2", 0)), Inputs{
		Now:    t0,
		Resize: &Resize{Allocated: map[string]v1.ResourceRequirements{"app": alloc}, Conditions: []v1.PodCondition{pending}},
	})
	st := cstatus(t, s.ContainerStatuses, "app")
	if q := st.AllocatedResources[v1.ResourceCPU]; q.Cmp(resource.MustParse("500m")) != 0 {
		t.Errorf("allocatedResources cpu = %s, want 500m", q.String())
	}
	if st.Resources == nil {
		t.Fatal("no resources in the status")
	}
	if q := st.Resources.Limits[v1.ResourceMemory]; q.Value() != 128<<20 {
		t.Errorf("resources memory limit = %s, want what the runtime reports (128Mi)", q.String())
	}
	if q := st.Resources.Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("500m")) != 0 {
		t.Errorf("resources cpu request = %s, want 500m", q.String())
	}
	if o := cstatus(t, s.ContainerStatuses, "other"); o.Resources != nil || o.AllocatedResources != nil {
		t.Errorf("a container without an allocation reports %v %v", o.Resources, o.AllocatedResources)
	}
	wantCond(t, s, v1.PodResizePending, v1.ConditionTrue, v1.PodReasonInfeasible)
	if c := findCondition(s.Conditions, v1.PodResizeInProgress); c != nil {
		t.Errorf("a stale PodResizeInProgress condition stayed: %+v", c)
	}
}

// A pod with pod-level resources reports their allocated requests as the
// pod's allocatedResources and what its cgroup runs with as its
// resources (cpu and memory only); a pod without reports neither.
func TestComputeReportsPodLevelResources(t *testing.T) {
	pod := testPod(withContainers("app"))
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: rlist("cpu", "300m", "memory", "64Mi"), Limits: rlist("cpu", "800m", "memory", "256Mi")}
	allocated := &v1.ResourceRequirements{Requests: rlist("cpu", "300m", "memory", "64Mi", "hugepages-2Mi", "2Mi"), Limits: rlist("cpu", "800m", "memory", "256Mi")}
	actual := &v1.ResourceRequirements{Requests: rlist("cpu", "200m", "memory", "64Mi"), Limits: rlist("cpu", "400m", "memory", "128Mi")}
	rs := rstatus([]*runtime.SandboxStatus{sandbox("10.0.0.2")}, running("app", "c1", 0))
	in := Inputs{Now: t0, Resize: &Resize{Allocated: map[string]v1.ResourceRequirements{}, PodAllocated: allocated, PodActual: actual}}
	s := Compute(pod, rs, in)
	if want := rlist("cpu", "300m", "memory", "64Mi"); !equalLists(s.AllocatedResources, want) {
		t.Errorf("allocatedResources = %v, want %v", s.AllocatedResources, want)
	}
	if s.Resources == nil || !equalLists(s.Resources.Limits, actual.Limits) || !equalLists(s.Resources.Requests, actual.Requests) {
		t.Errorf("resources = %v, want %v", s.Resources, actual)
	}
	pod.Spec.Resources = nil
	if s := Compute(pod, rs, in); s.AllocatedResources != nil || s.Resources != nil {
		t.Errorf("a pod without pod-level resources reports %v %v", s.AllocatedResources, s.Resources)
	}
}

func equalLists(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for n, q := range b {
		if g, ok := a[n]; !ok || g.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
