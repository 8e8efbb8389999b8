package cgroups

import (
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/qos"
)

// Resources are the limits written to one cgroup. A nil field leaves the
// cgroup's current value; -1 means unlimited.
type Resources struct {
	// CPUShares is the v1 cpu.shares value; on v2 it is converted to
	// cpu.weight the way runc converts it.
	CPUShares *uint64
	// CPUQuota is the CFS quota in microseconds per CPUPeriod; -1 is
	// unlimited.
	CPUQuota *int64
	// CPUPeriod is the CFS period in microseconds.
	CPUPeriod *uint64
	// Memory is the memory limit in bytes; -1 is unlimited.
	Memory *int64
	// PidsMax is the maximum number of tasks; -1 is unlimited.
	PidsMax *int64
}

// equal reports whether r and o set the same limits.
func (r Resources) equal(o Resources) bool {
	return eqPtr(r.CPUShares, o.CPUShares) && eqPtr(r.CPUQuota, o.CPUQuota) &&
		eqPtr(r.CPUPeriod, o.CPUPeriod) && eqPtr(r.Memory, o.Memory) && eqPtr(r.PidsMax, o.PidsMax)
}

func eqPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// PodResources returns the pod-level limits of the pod's cgroup:
//   - cpu.shares from the pod's effective cpu requests (the minimum for
//     BestEffort pods);
//   - a CFS quota from the summed cpu limits when the pod is Guaranteed, or
//     Burstable with a cpu limit on every container or at pod level, and
//     CPU limits are enforced;
//   - a memory limit from the summed memory limits under the same rule;
//   - pids.max from the pod pids limit when positive.
//
// Everything else is unlimited, so calling EnsurePod again resets limits
// that no longer apply.
func (m *Manager) PodResources(pod *v1.Pod) Resources {
	reqs, limits := qos.PodRequestsAndLimits(pod)
	var cpuReq, cpuLimit, memLimit int64
	if q, ok := reqs[v1.ResourceCPU]; ok {
		cpuReq = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceCPU]; ok {
		cpuLimit = q.MilliValue()
	}
	if q, ok := limits[v1.ResourceMemory]; ok {
		memLimit = q.Value()
	}

	shares := uint64(qos.MinShares)
	quota, memory := int64(-1), int64(-1)
	switch qos.Class(pod) {
	case v1.PodQOSGuaranteed:
		shares = qos.MilliCPUToShares(cpuReq)
		quota = qos.MilliCPUToQuota(cpuLimit, int64(m.period))
		memory = memLimit
	case v1.PodQOSBurstable:
		shares = qos.MilliCPUToShares(cpuReq)
		if limitDeclared(pod, v1.ResourceCPU) {
			quota = qos.MilliCPUToQuota(cpuLimit, int64(m.period))
		}
		if limitDeclared(pod, v1.ResourceMemory) {
			memory = memLimit
		}
	}
	if m.noQuota || quota <= 0 {
		quota = -1
	}
	if memory <= 0 {
		memory = -1
	}
	pids := int64(-1)
	if m.pidsLimit > 0 {
		pids = m.pidsLimit
	}
	r := Resources{CPUShares: &shares, CPUQuota: &quota, Memory: &memory, PidsMax: &pids}
	if quota > 0 {
		period := m.period
		r.CPUPeriod = &period
	}
	return r
}

// limitDeclared reports whether the pod as a whole is limited in the
// resource: every container limits it, or the pod-level resources do.
func limitDeclared(pod *v1.Pod, name v1.ResourceName) bool {
	if _, ok := qos.PodLevelLimit(pod, name); ok {
		return true
	}
	return qos.AllContainersLimit(pod, name)
}
