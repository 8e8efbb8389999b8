package resize

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/heartlet/heartlet/internal/qos"
)

// Outcome is what becomes of a pod's resize request.
type Outcome int

const (
	// None: the pod asks for what it was allocated; nothing to resize.
	None Outcome = iota
	// Accepted: the resize fits; the allocation becomes the pod's request
	// and the pod is PodResizeInProgress until the runtime reflects it.
	Accepted
	// Deferred: the resize fits the node but not beside the other pods'
	// allocations now; it is retried when they change
	// (PodResizePending, reason Deferred).
	Deferred
	// Infeasible: the resize can never be applied on this node
	// (PodResizePending, reason Infeasible).
	Infeasible
)

func (o Outcome) String() string {
	switch o {
	case None:
		return "None"
	case Accepted:
		return "Accepted"
	case Deferred:
		return v1.PodReasonDeferred
	case Infeasible:
		return v1.PodReasonInfeasible
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Decision is an Outcome with the message of the PodResizePending
// condition (empty unless Deferred or Infeasible).
type Decision struct {
	Outcome Outcome
	Message string
	// Detail is the reason_detail label of an infeasible decision in
	// kubelet_pod_infeasible_resizes_total (upstream's values); empty
	// for a check upstream leaves to the API server's validation.
	Detail string
}

// Values of Decision.Detail, as upstream.
const (
	DetailStaticPod               = "static_pod"
	DetailInsufficientAllocatable = "insufficient_node_allocatable"
)

// Inputs are the node's facts a decision depends on.
type Inputs struct {
	// Allocatable is the node's allocatable cpu and memory.
	Allocatable v1.ResourceList
	// OthersRequested is the sum of the cpu and memory requests of every
	// other admitted pod, at their allocations.
	OthersRequested v1.ResourceList
	// Static is true for a static pod (from a file or URL), which cannot
	// be resized through the API.
	Static bool
}

// Messages of the PodResizePending condition, as upstream words them.
const (
	msgStatic = "In-place resize of static-pods is not supported."
)

// Decide decides a resize of pod, running at the allocation allocated: the
// pod's spec is what is asked for. It is a pure function.
//
// The rules are upstream's (KEP-1287 and the kubelet's allocation
// manager): a static pod, a change of the QoS class, of a resource other
// than cpu and memory (of a container or of the pod-level resources,
// which resize as upstream's default InPlacePodLevelResourcesVerticalScaling
// does), or one that
// would restart a container of a pod whose restartPolicy is Never is
// infeasible; a request for more cpu or memory than the node's allocatable
// is infeasible; one that does not fit beside the other pods' allocations
// is deferred; anything else is accepted.
func Decide(pod *v1.Pod, allocated Allocation, in Inputs) Decision {
	want := FromPod(pod)
	if want.Equal(allocated) {
		return Decision{Outcome: None}
	}
	if in.Static {
		return Decision{Outcome: Infeasible, Message: msgStatic, Detail: DetailStaticPod}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		old, ok := allocated[name]
		if !ok {
			continue
		}
		if r, changed := otherResourceChanged(old, want[name]); changed {
			if name == PodLevel {
				return Decision{Outcome: Infeasible, Message: fmt.Sprintf("In-place resize of pod-level resources: resource %s cannot be resized in place.", r)}
			}
			return Decision{Outcome: Infeasible, Message: fmt.Sprintf("In-place resize of container %q: resource %s cannot be resized in place.", name, r)}
		}
	}
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		for _, c := range resizable(pod) {
			old, ok := allocated[c.Name]
			if !ok {
				continue
			}
			plan := MakePlan(pod, Allocation{c.Name: old}, Allocation{c.Name: c.Resources})
			if len(plan.Restart) > 0 {
				return Decision{Outcome: Infeasible, Message: fmt.Sprintf("In-place resize of container %q needs a restart (resizePolicy RestartContainer), which the pod's restartPolicy Never forbids.", c.Name)}
			}
		}
	}
	before := WithAllocation(pod, allocated)
	if qb, qa := qos.Compute(before), qos.Compute(pod); qb != qa {
		return Decision{Outcome: Infeasible, Message: fmt.Sprintf("In-place resize would change the pod's QoS class from %s to %s.", qb, qa)}
	}

	reqs, _ := qos.PodRequestsAndLimits(pod)
	cpuReq, memReq := reqs.Cpu().MilliValue(), reqs.Memory().Value()
	cpuCap, memCap := in.Allocatable.Cpu().MilliValue(), in.Allocatable.Memory().Value()
	if memReq > memCap {
		return Decision{Outcome: Infeasible, Message: fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", memReq, memCap), Detail: DetailInsufficientAllocatable}
	}
	if cpuReq > cpuCap {
		return Decision{Outcome: Infeasible, Message: fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpuReq, cpuCap), Detail: DetailInsufficientAllocatable}
	}
	cpuUsed, memUsed := in.OthersRequested.Cpu().MilliValue(), in.OthersRequested.Memory().Value()
	if cpuUsed+cpuReq > cpuCap {
		return Decision{Outcome: Deferred, Message: fmt.Sprintf("Node didn't have enough resource: cpu, requested: %d, used: %d, capacity: %d", cpuReq, cpuUsed, cpuCap)}
	}
	if memUsed+memReq > memCap {
		return Decision{Outcome: Deferred, Message: fmt.Sprintf("Node didn't have enough resource: memory, requested: %d, used: %d, capacity: %d", memReq, memUsed, memCap)}
	}
	return Decision{Outcome: Accepted}
}

// otherResourceChanged returns a resource other than cpu and memory whose
// request or limit differs between a and b.
func otherResourceChanged(a, b v1.ResourceRequirements) (v1.ResourceName, bool) {
	for _, pair := range [][2]v1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
		names := map[v1.ResourceName]bool{}
		for n := range pair[0] {
			names[n] = true
		}
		for n := range pair[1] {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			if n == v1.ResourceCPU || n == v1.ResourceMemory {
				continue
			}
			x, okx := pair[0][n]
			y, oky := pair[1][n]
			if okx != oky || !apiequality.Semantic.DeepEqual(x, y) {
				return n, true
			}
		}
	}
	return "", false
}

// WithAllocation returns a copy of pod whose containers have the resources
// of alloc (those alloc names; the others keep the spec's), and whose
// pod-level resources are alloc's when it has them.
func WithAllocation(pod *v1.Pod, alloc Allocation) *v1.Pod {
	p := pod.DeepCopy()
	if r, ok := alloc[PodLevel]; ok {
		p.Spec.Resources = r.DeepCopy()
	}
	for i := range p.Spec.Containers {
		if r, ok := alloc[p.Spec.Containers[i].Name]; ok {
			p.Spec.Containers[i].Resources = *r.DeepCopy()
		}
	}
	for i := range p.Spec.InitContainers {
		if r, ok := alloc[p.Spec.InitContainers[i].Name]; ok {
			p.Spec.InitContainers[i].Resources = *r.DeepCopy()
		}
	}
	return p
}
