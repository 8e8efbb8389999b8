// Package qos computes a pod's quality-of-service class and its effective
// resource requests and limits, and converts CPU quantities into the values
// the Linux CFS scheduler takes (cpu.shares, cfs quota and period).
//
// The rules follow the upstream kubelet:
//   - only cpu and memory count, in init containers (sidecars included) and
//     app containers; ephemeral containers never count;
//   - a container's unset request defaults to its limit, as API defaulting
//     does, so a pod that was never defaulted gets the same answer;
//   - a pod is BestEffort when no container sets a cpu or memory request or
//     limit, Guaranteed when every container sets cpu and memory limits equal
//     to its requests, and Burstable otherwise;
//   - when pod-level resources (spec.resources) set cpu, memory or hugepages,
//     they alone decide the class.
package qos

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// computeResources are the resources that decide the QoS class.
var computeResources = [...]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// Class returns the pod's QoS class. A class recorded in the pod's status
// wins (the API server sets it once and it never changes over the pod's
// life); otherwise it is computed from the spec with Compute.
func Class(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return Compute(pod)
}

// Compute evaluates the pod's spec and returns its QoS class, ignoring any
// class recorded in its status.
func Compute(pod *v1.Pod) v1.PodQOSClass {
	if pl, ok := podLevel(pod); ok {
		return classOf(pl.Requests, pl.Limits)
	}
	var class v1.PodQOSClass
	visit := func(c *v1.Container) v1.PodQOSClass {
		cc := classOf(defaultedRequests(c.Resources), c.Resources.Limits)
		switch {
		case class == "":
			class = cc
		case class != cc:
			// BestEffort next to Guaranteed, or anything next to Burstable.
			class = v1.PodQOSBurstable
		}
		return class
	}
	for i := range pod.Spec.InitContainers {
		if visit(&pod.Spec.InitContainers[i]) == v1.PodQOSBurstable {
			return v1.PodQOSBurstable
		}
	}
	for i := range pod.Spec.Containers {
		if visit(&pod.Spec.Containers[i]) == v1.PodQOSBurstable {
			return v1.PodQOSBurstable
		}
	}
	if class == "" {
		return v1.PodQOSBestEffort
	}
	return class
}

// classOf is the QoS class of one set of requests and limits: BestEffort
// when neither cpu nor memory is set, Guaranteed when both have a request
// equal to a non-zero limit, Burstable otherwise.
func classOf(reqs, limits v1.ResourceList) v1.PodQOSClass {
	var class v1.PodQOSClass
	for _, name := range computeResources {
		req, lim := reqs[name], limits[name]
		if req.Cmp(lim) != 0 {
			return v1.PodQOSBurstable
		}
		rc := v1.PodQOSGuaranteed
		if lim.IsZero() {
			rc = v1.PodQOSBestEffort
		}
		switch {
		case class == "":
			class = rc
		case class != rc:
			return v1.PodQOSBurstable
		}
	}
	return class
}

// defaultedRequests returns the container's requests with every unset
// request defaulted to its limit, without modifying the container.
func defaultedRequests(r v1.ResourceRequirements) v1.ResourceList {
	missing := false
	for name := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			missing = true
			break
		}
	}
	if !missing {
		return r.Requests
	}
	out := make(v1.ResourceList, len(r.Requests)+len(r.Limits))
	for name, q := range r.Requests {
		out[name] = q.DeepCopy()
	}
	for name, q := range r.Limits {
		if _, ok := out[name]; !ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}

// isPodLevelResource reports whether a resource may be set in pod-level
// resources (spec.resources): cpu, memory and hugepages.
func isPodLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || isHugePages(name)
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func hasPodLevel(l v1.ResourceList) bool {
	for name := range l {
		if isPodLevelResource(name) {
			return true
		}
	}
	return false
}

// podLevel returns the pod's effective pod-level requests and limits, with
// the API's defaulting applied: an unset cpu or memory request defaults to
// the containers' aggregate request, or else to the pod-level limit; unset
// cpu or memory limits default to the containers' aggregate limit when
// pod-level requests are set and every container has that limit. The bool
// is false when the pod sets no pod-level resources.
func podLevel(pod *v1.Pod) (v1.ResourceRequirements, bool) {
	r := pod.Spec.Resources
	if r == nil || (!hasPodLevel(r.Requests) && !hasPodLevel(r.Limits)) {
		return v1.ResourceRequirements{}, false
	}
	reqs := r.Requests.DeepCopy()
	if reqs == nil {
		reqs = v1.ResourceList{}
	}
	limits := r.Limits.DeepCopy()
	if limits == nil {
		limits = v1.ResourceList{}
	}
	if len(r.Limits) > 0 {
		aggr := aggregate(pod, func(c *v1.Container) v1.ResourceList { return defaultedRequests(c.Resources) })
		for _, name := range computeResources {
			if _, set := reqs[name]; set {
				continue
			}
			if q, ok := aggr[name]; ok {
				reqs[name] = q
			}
		}
		for name, q := range r.Limits {
			if _, set := reqs[name]; !set && isPodLevelResource(name) {
				reqs[name] = q.DeepCopy()
			}
		}
	}
	if !hasPodLevel(r.Limits) && hasPodLevel(reqs) {
		aggr := aggregate(pod, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits })
		for _, name := range computeResources {
			if q, ok := aggr[name]; ok && AllContainersLimit(pod, name) {
				limits[name] = q
			}
		}
	}
	return v1.ResourceRequirements{Requests: reqs, Limits: limits}, true
}

// AllContainersLimit reports whether every init and app container of the
// pod sets a non-zero limit for the resource. A pod without containers
// reports false.
func AllContainersLimit(pod *v1.Pod, name v1.ResourceName) bool {
	n := 0
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			q, ok := cs[i].Resources.Limits[name]
			if !ok || q.IsZero() {
				return false
			}
			n++
		}
	}
	return n > 0
}

// PodLevelLimit returns the pod-level (spec.resources) limit for the
// resource after defaulting, and whether it is set and non-zero.
func PodLevelLimit(pod *v1.Pod, name v1.ResourceName) (resource.Quantity, bool) {
	pl, ok := podLevel(pod)
	if !ok {
		return resource.Quantity{}, false
	}
	q, ok := pl.Limits[name]
	if !ok || q.IsZero() {
		return resource.Quantity{}, false
	}
	return q, true
}
