package qos

import (
	"math"

	"github.com/heartlet/heartlet/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CPU conversion constants, as the Linux scheduler defines them.
const (
	// MinShares is the smallest cpu.shares value the kernel accepts; it is
	// also what a pod or container without a cpu request gets.
	MinShares = 2
	// MaxShares is the largest cpu.shares value the kernel accepts.
	MaxShares = 262144
	// SharesPerCPU is the cpu.shares value of one whole CPU.
	SharesPerCPU = 1024
	// MilliCPUToCPU is the number of millicpus in one CPU.
	MilliCPUToCPU = 1000
	// DefaultCPUPeriod is the default CFS period in microseconds (100ms).
	DefaultCPUPeriod = 100000
	// MinQuota is the smallest CFS quota in microseconds (1ms) the kernel
	// accepts.
	MinQuota = 1000
)

// MilliCPUToShares converts a cpu request in millicpus to cpu.shares:
// 1024 per CPU, at least MinShares (also for no request) and at most
// MaxShares.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	if milliCPU > MaxShares*MilliCPUToCPU/SharesPerCPU {
		// Also keeps the multiplication below from overflowing.
		return MaxShares
	}
	shares := milliCPU * SharesPerCPU / MilliCPUToCPU
	if shares < MinShares {
		return MinShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a cpu limit in millicpus to a CFS quota in
// microseconds for the given period (microseconds, DefaultCPUPeriod when
// not positive). No limit (0) gives 0, which callers treat as unlimited;
// any limit gives at least MinQuota.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	if period <= 0 {
		period = DefaultCPUPeriod
	}
	if milliCPU > math.MaxInt64/period {
		// Saturate instead of overflowing; the kernel rejects it anyway.
		return math.MaxInt64 / MilliCPUToCPU
	}
	quota := milliCPU * period / MilliCPUToCPU
	if quota < MinQuota {
		return MinQuota
	}
	return quota
}

// PodRequestsAndLimits returns the pod's effective requests and limits for
// every resource, the way the scheduler and the kubelet account a pod:
//   - app containers and sidecars (init containers with restartPolicy
//     Always) are summed;
//   - each regular init container runs alone next to the sidecars started
//     before it, so the pod needs the largest of those init phases when it
//     exceeds the sum above;
//   - pod-level resources (spec.resources) replace the aggregate for cpu,
//     memory and hugepages;
//   - the pod overhead (spec.overhead) is added to the requests and to the
//     non-zero limits.
//
// Unset container requests default to the container's limits. A resource
// that no container limits is absent from limits (unlimited).
func PodRequestsAndLimits(pod *v1.Pod) (reqs, limits v1.ResourceList) {
	reqs = aggregate(pod, func(c *v1.Container) v1.ResourceList { return defaultedRequests(c.Resources) })
	limits = aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits })
	if pl, ok := podLevel(pod); ok {
		for name, q := range pl.Requests {
			if isPodLevelResource(name) {
				reqs[name] = q.DeepCopy()
			}
		}
		for name, q := range pl.Limits {
			if isPodLevelResource(name) {
				limits[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		addTo(reqs, name, q)
		if l, ok := limits[name]; ok && !l.IsZero() {
			addTo(limits, name, q)
		}
	}
	return reqs, limits
}

// aggregate sums get(c) over the app containers and sidecars and takes the
// per-resource maximum with every init phase (a regular init container plus
// the sidecars started before it).
func aggregate(pod *v1.Pod, get func(c *v1.Container) v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for i := range pod.Spec.Containers {
		addAll(out, get(&pod.Spec.Containers[i]))
	}
	sidecars := v1.ResourceList{}
	peak := v1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := get(c)
		var phase v1.ResourceList
		if podspec.IsSidecar(c) {
			addAll(out, r)
			addAll(sidecars, r)
			phase = sidecars
		} else {
			phase = v1.ResourceList{}
			addAll(phase, r)
			addAll(phase, sidecars)
		}
		maxAll(peak, phase)
	}
	maxAll(out, peak)
	return out
}

func addTo(l v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
	if cur, ok := l[name]; ok {
		cur.Add(q)
		l[name] = cur
		return
	}
	l[name] = q.DeepCopy()
}

func addAll(l, add v1.ResourceList) {
	for name, q := range add {
		addTo(l, name, q)
	}
}

func maxAll(l, other v1.ResourceList) {
	for name, q := range other {
		if cur, ok := l[name]; !ok || q.Cmp(cur) > 0 {
			l[name] = q.DeepCopy()
		}
	}
}

// SubtractReserved returns capacity minus every reservation, resource by
// resource, never below zero: the node allocatable before eviction
// thresholds, which the kubepods cgroup is limited to.
func SubtractReserved(capacity v1.ResourceList, reserved ...v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for name, c := range capacity {
		v := c.DeepCopy()
		for _, r := range reserved {
			if q, ok := r[name]; ok {
				v.Sub(q)
			}
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}
