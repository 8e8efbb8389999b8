package resize

import (
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Metrics records what upstream's kubelet_pod_resize_* and
// kubelet_container_requested_resizes_total metrics count
// (metrics.Resize).
//
// Contract: every method is cheap, never blocks and is safe for
// concurrent use. RequestedResize counts one changed request or limit of
// one container (resource cpu or memory, requirement requests or limits,
// operation add, remove, increase or decrease); ResizeDuration observes
// one attempt to apply an accepted resize; InfeasibleResize counts a
// resize found infeasible (reasonDetail as Decision.Detail);
// DeferredAccepted counts a deferred resize accepted on a retry (trigger
// as the Trigger* values); SetPending and SetInProgress set the numbers of
// pods whose resize is pending (deferred, infeasible) and in progress.
type Metrics interface {
	RequestedResize(resource, requirement, operation string)
	ResizeDuration(d time.Duration, success bool)
	InfeasibleResize(reasonDetail string)
	DeferredAccepted(trigger string)
	SetPending(deferred, infeasible int)
	SetInProgress(n int)
}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) RequestedResize(string, string, string) {}
func (noMetrics) ResizeDuration(time.Duration, bool)     {}
func (noMetrics) InfeasibleResize(string)                {}
func (noMetrics) DeferredAccepted(string)                {}
func (noMetrics) SetPending(int, int)                    {}
func (noMetrics) SetInProgress(int)                      {}

// Change is one changed request or limit of one container.
type Change struct {
	Resource    string // cpu or memory
	Requirement string // requests or limits
	Operation   string // add, remove, increase or decrease
}

// Changes lists the changes of cpu and memory requests and limits from
// old to next, container by container (containers in only one of them
// are left out, and so are pod-level resources, as upstream counts), in a
// fixed order. A quantity that is absent or zero
// counts as none, as upstream: from none is add, to none is remove.
func Changes(old, next Allocation) []Change {
	var out []Change
	for _, name := range slices.Sorted(maps.Keys(next)) {
		o, ok := old[name]
		if !ok || name == PodLevel {
			continue
		}
		n := next[name]
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			for _, req := range []struct {
				name      string
				old, next v1.ResourceList
			}{{"requests", o.Requests, n.Requests}, {"limits", o.Limits, n.Limits}} {
				if op := operation(req.old[r], req.next[r]); op != "" {
					out = append(out, Change{Resource: string(r), Requirement: req.name, Operation: op})
				}
			}
		}
	}
	return out
}

// operation is how a quantity changes from old to next; "" when it does
// not.
func operation(old, next resource.Quantity) string {
	switch {
	case old.IsZero() && next.IsZero():
		return ""
	case next.IsZero():
		return "remove"
	case old.IsZero():
		return "add"
	}
	switch next.Cmp(old) {
	case -1:
		return "decrease"
	case 1:
		return "increase"
	}
	return ""
}
