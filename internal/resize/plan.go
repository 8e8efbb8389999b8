package resize

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/qos"
)

// StepKind is what one step of a resize writes.
type StepKind int

const (
	// PodCgroup writes the pod cgroup's limit of the step's resource.
	PodCgroup StepKind = iota
	// ContainerUpdate updates one container's resources in place (CRI
	// UpdateContainerResources).
	ContainerUpdate
)

// Step is one write of an accepted resize.
type Step struct {
	Kind      StepKind
	Resource  v1.ResourceName // cpu or memory
	Container string          // for ContainerUpdate
}

// Plan is how an accepted resize is applied: Steps in order, then the
// Restart containers are restarted (their resizePolicy for a changed
// resource is RestartContainer) and start with the new resources.
type Plan struct {
	Steps   []Step
	Restart []string
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool { return len(p.Steps) == 0 && len(p.Restart) == 0 }

// MakePlan plans the change of the pod's running containers from actual
// (the resources they run with, by container name) to want (the
// allocation). Containers missing from actual are not running: they start
// with want and need no step. It is a pure function.
//
// As upstream: memory is resized before cpu; for each, a pod cgroup
// limit that grows is written before the containers' (so no container is
// ever allowed more than its pod), one that shrinks after them; among the
// containers, those that shrink go before those that grow. A container
// whose changed resource has resizePolicy RestartContainer is restarted
// instead of being updated. Only a change of the cpu request or limit or
// of the memory limit needs the runtime; a memory request is bookkeeping.
func MakePlan(pod *v1.Pod, actual, want Allocation) Plan {
	var p Plan
	restart := map[string]bool{}
	type change struct {
		name   string
		shrink bool
	}
	changes := map[v1.ResourceName][]change{}
	for _, c := range resizable(pod) {
		cur, running := actual[c.Name]
		next, ok := want[c.Name]
		if !running || !ok {
			continue
		}
		var changed []v1.ResourceName
		if !sameQ(cur.Limits, next.Limits, v1.ResourceMemory) {
			changed = append(changed, v1.ResourceMemory)
		}
		if !sameQ(cur.Limits, next.Limits, v1.ResourceCPU) || !sameQ(cur.Requests, next.Requests, v1.ResourceCPU) {
			changed = append(changed, v1.ResourceCPU)
		}
		if len(changed) == 0 {
			continue
		}
		for _, r := range changed {
			if policy(c, r) == v1.RestartContainer {
				restart[c.Name] = true
			}
		}
		if restart[c.Name] {
			p.Restart = append(p.Restart, c.Name)
			continue
		}
		for _, r := range changed {
			changes[r] = append(changes[r], change{c.Name, grows(next, cur, r) < 0})
		}
	}
	before := WithAllocation(pod, actual)
	after := WithAllocation(pod, want)
	for _, r := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		podCmp := podGrows(after, before, r)
		cs := changes[r]
		if len(cs) == 0 && podCmp == 0 {
			continue
		}
		var ordered []Step
		for _, shrink := range []bool{true, false} {
			for _, c := range cs {
				if c.shrink == shrink {
					ordered = append(ordered, Step{Kind: ContainerUpdate, Resource: r, Container: c.name})
				}
			}
		}
		podStep := Step{Kind: PodCgroup, Resource: r}
		if podCmp < 0 {
			p.Steps = append(p.Steps, ordered...)
			p.Steps = append(p.Steps, podStep)
		} else {
			p.Steps = append(p.Steps, podStep)
			p.Steps = append(p.Steps, ordered...)
		}
	}
	return p
}

// policy is the container's resize policy for r; NotRequired by default.
func policy(c *v1.Container, r v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == r {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

func sameQ(a, b v1.ResourceList, r v1.ResourceName) bool {
	x, okx := a[r]
	y, oky := b[r]
	return okx == oky && x.Cmp(y) == 0
}

// grows compares next with cur for r: the limit first (absent is
// unlimited, the largest), then for cpu the request. It is 1 when next is
// larger, -1 when smaller, 0 when equal.
func grows(next, cur v1.ResourceRequirements, r v1.ResourceName) int {
	if c := cmpLimit(next.Limits, cur.Limits, r); c != 0 {
		return c
	}
	if r == v1.ResourceCPU {
		return cmpQ(next.Requests, cur.Requests, r)
	}
	return 0
}

// podGrows is grows for the pod's totals, the values of its cgroup.
func podGrows(after, before *v1.Pod, r v1.ResourceName) int {
	ra, la := podTotals(after)
	rb, lb := podTotals(before)
	if c := cmpLimit(la, lb, r); c != 0 {
		return c
	}
	if r == v1.ResourceCPU {
		return cmpQ(ra, rb, r)
	}
	return 0
}

func cmpLimit(a, b v1.ResourceList, r v1.ResourceName) int {
	x, okx := a[r]
	y, oky := b[r]
	switch {
	case !okx && !oky:
		return 0
	case !okx:
		return 1
	case !oky:
		return -1
	}
	return x.Cmp(y)
}

func cmpQ(a, b v1.ResourceList, r v1.ResourceName) int {
	x, y := a[r], b[r]
	return x.Cmp(y)
}

// podTotals are the summed requests and the summed limits of the pod's
// containers, or its pod-level ones where it has them; a resource is
// absent from the limits when a container has no limit for it and the
// pod none either (the pod is then unlimited).
func podTotals(pod *v1.Pod) (reqs, limits v1.ResourceList) {
	reqs, limits = v1.ResourceList{}, v1.ResourceList{}
	unlimited := map[v1.ResourceName]bool{}
	for _, c := range podspec.RunningContainers(pod) {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; ok {
				add(reqs, r, q)
			} else if q, ok := c.Resources.Limits[r]; ok {
				add(reqs, r, q)
			}
			if q, ok := c.Resources.Limits[r]; ok {
				add(limits, r, q)
			} else {
				unlimited[r] = true
			}
		}
	}
	for r := range unlimited {
		delete(limits, r)
	}
	// Pod-level resources set the pod cgroup's values instead.
	if pod.Spec.Resources != nil {
		preqs, _ := qos.PodRequestsAndLimits(pod)
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := qos.PodLevelLimit(pod, r); ok {
				limits[r] = q
			}
			if q, ok := preqs[r]; ok {
				reqs[r] = q
			}
		}
	}
	return reqs, limits
}

func add(l v1.ResourceList, r v1.ResourceName, q resource.Quantity) {
	s := l[r]
	s.Add(q)
	l[r] = s
}
