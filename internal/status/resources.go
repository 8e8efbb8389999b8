package status

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/qos"
	"github.com/heartlet/heartlet/internal/runtime"
)

// setResources fills allocatedResources and resources of the statuses of
// containers with an allocation: the allocated requests, and the
// allocation with the cpu and memory values the running container's
// runtime reports (what heartlet set, for a runtime that reports none).
func (c *computer) setResources(statuses []v1.ContainerStatus) {
	if c.in.Resize == nil {
		return
	}
	for i := range statuses {
		st := &statuses[i]
		alloc, ok := c.in.Resize.Allocated[st.Name]
		if !ok {
			continue
		}
		if len(alloc.Requests) > 0 {
			st.AllocatedResources = alloc.Requests.DeepCopy()
		}
		if st.State.Running == nil {
			continue
		}
		var reported *runtimeapi.LinuxContainerResources
		if rec := c.rs.FindContainer(st.Name); rec != nil && rec.State == runtime.ContainerRunning {
			reported = rec.Resources
		}
		if a, ok := c.in.Resize.Actuated[st.Name]; ok && reported == nil {
			st.Resources = a.DeepCopy()
			continue
		}
		st.Resources = ActualResources(alloc, reported)
	}
}

// setPodResources fills the pod-level allocatedResources and resources of
// a pod with pod-level resources, as upstream with
// InPlacePodLevelResourcesVerticalScaling: the allocated requests, and the
// cpu and memory requests and limits the pod cgroup runs with.
func (c *computer) setPodResources(s *v1.PodStatus) {
	if c.in.Resize == nil || c.in.Resize.PodAllocated == nil || c.pod.Spec.Resources == nil {
		return
	}
	if reqs := computeOnly(c.in.Resize.PodAllocated.Requests); len(reqs) > 0 {
		s.AllocatedResources = reqs
	}
	if a := c.in.Resize.PodActual; a != nil {
		r := &v1.ResourceRequirements{Requests: computeOnly(a.Requests), Limits: computeOnly(a.Limits)}
		if len(r.Requests) > 0 || len(r.Limits) > 0 {
			s.Resources = r
		}
	}
}

// computeOnly is the cpu and memory of l, nil when it has neither.
func computeOnly(l v1.ResourceList) v1.ResourceList {
	var out v1.ResourceList
	for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if q, ok := l[r]; ok {
			if out == nil {
				out = v1.ResourceList{}
			}
			out[r] = q.DeepCopy()
		}
	}
	return out
}

// ActualResources is the allocation alloc with the values the runtime
// reports in l: the cpu request from the shares, the cpu limit from the
// CFS quota and period, the memory limit. A value that the allocation
// converts to exactly is kept as allocated (the conversion loses
// precision); a resource without an allocated value is left out, as
// upstream reports it, and an allocated memory limit the runtime reports
// as unlimited (0) is left out.
func ActualResources(alloc v1.ResourceRequirements, l *runtimeapi.LinuxContainerResources) *v1.ResourceRequirements {
	out := alloc.DeepCopy()
	if l == nil {
		return out
	}
	if q, ok := alloc.Requests[v1.ResourceCPU]; ok && l.GetCpuShares() > 0 {
		if int64(qos.MilliCPUToShares(q.MilliValue())) != l.GetCpuShares() {
			out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(l.GetCpuShares()*1000/qos.SharesPerCPU, resource.DecimalSI)
		}
	}
	if q, ok := alloc.Limits[v1.ResourceCPU]; ok && l.GetCpuQuota() > 0 && l.GetCpuPeriod() > 0 {
		if qos.MilliCPUToQuota(q.MilliValue(), l.GetCpuPeriod()) != l.GetCpuQuota() {
			out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(l.GetCpuQuota()*1000/l.GetCpuPeriod(), resource.DecimalSI)
		}
	}
	if q, ok := alloc.Limits[v1.ResourceMemory]; ok && q.Value() != l.GetMemoryLimitInBytes() {
		if l.GetMemoryLimitInBytes() > 0 {
			out.Limits[v1.ResourceMemory] = *resource.NewQuantity(l.GetMemoryLimitInBytes(), resource.BinarySI)
		} else {
			// Reported unlimited.
			delete(out.Limits, v1.ResourceMemory)
		}
	}
	return out
}
