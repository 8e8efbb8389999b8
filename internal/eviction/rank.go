package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Resource names a signal reclaims, as in upstream's messages.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// ResourceOf is the resource a signal's evictions reclaim.
func ResourceOf(s Signal) v1.ResourceName {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.ResourceMemory
	case SignalNodeFsInodesFree, SignalImageFsInodesFree:
		return resourceInodes
	case SignalPIDAvailable:
		return resourcePIDs
	}
	return v1.ResourceEphemeralStorage
}

// PodStats are the pods' stats by UID.
type PodStats map[types.UID]statsapi.PodStats

// PodStatsOf indexes a summary's pods by UID.
func PodStatsOf(s *statsapi.Summary) PodStats {
	out := PodStats{}
	if s == nil {
		return out
	}
	for _, p := range s.Pods {
		out[types.UID(p.PodRef.UID)] = p
	}
	return out
}

// usage is what a pod uses of r, and whether it is known.
func (ps PodStats) usage(pod *v1.Pod, r v1.ResourceName) (resource.Quantity, bool) {
	s, ok := ps[pod.UID]
	if !ok {
		return resource.Quantity{}, false
	}
	switch r {
	case v1.ResourceMemory:
		if s.Memory != nil && s.Memory.WorkingSetBytes != nil {
			return *resource.NewQuantity(int64(*s.Memory.WorkingSetBytes), resource.BinarySI), true
		}
		var sum uint64
		for _, c := range s.Containers {
			if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
				return resource.Quantity{}, false
			}
			sum += *c.Memory.WorkingSetBytes
		}
		return *resource.NewQuantity(int64(sum), resource.BinarySI), true
	case v1.ResourceEphemeralStorage:
		if e := s.EphemeralStorage; e != nil && e.UsedBytes != nil {
			return *resource.NewQuantity(int64(*e.UsedBytes), resource.BinarySI), true
		}
	case resourceInodes:
		if e := s.EphemeralStorage; e != nil && e.InodesUsed != nil {
			return *resource.NewQuantity(int64(*e.InodesUsed), resource.DecimalSI), true
		}
	}
	return resource.Quantity{}, false
}

// request is the pod's request of r (0 for inodes and pids).
func request(pod *v1.Pod, r v1.ResourceName) resource.Quantity {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	if q, ok := reqs[r]; ok {
		return q
	}
	return resource.Quantity{}
}

func priority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// Rank orders the candidate pods for a signal, the first to be evicted
// first, as upstream does:
//   - memory: pods whose usage exceeds their requests (or whose usage is
//     unknown) first, then lower priority, then larger usage above
//     requests;
//   - disk (bytes and inodes): likewise with local ephemeral storage (the
//     pod's writable layers, logs and local volumes) or its inodes;
//   - process IDs: lower priority first.
//
// The order of pods that compare equal is kept.
func Rank(s Signal, pods []*v1.Pod, stats PodStats) []*v1.Pod {
	out := slices.Clone(pods)
	r := ResourceOf(s)
	if r == resourcePIDs {
		slices.SortStableFunc(out, func(a, b *v1.Pod) int { return cmp.Compare(priority(a), priority(b)) })
		return out
	}
	type key struct {
		exceeds bool // usage above requests, or unknown
		prio    int32
		above   int64 // usage less requests
	}
	keys := make(map[types.UID]key, len(out))
	for _, p := range out {
		req := request(p, r)
		u, ok := stats.usage(p, r)
		k := key{exceeds: !ok, prio: priority(p)}
		if ok {
			u.Sub(req)
			k.exceeds = u.Sign() > 0
			k.above = u.Value()
		}
		keys[p.UID] = k
	}
	slices.SortStableFunc(out, func(a, b *v1.Pod) int {
		ka, kb := keys[a.UID], keys[b.UID]
		if ka.exceeds != kb.exceeds {
			if ka.exceeds {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(ka.prio, kb.prio); c != 0 {
			return c
		}
		return cmp.Compare(kb.above, ka.above)
	})
	return out
}

// Message is the evicted pod's status message, as upstream words it: the
// resource the node was low on, the threshold and what was available,
// and each container using more memory or ephemeral storage than it
// requests.
func Message(t Threshold, o Observation, pod *v1.Pod, stats PodStats) string {
	r := ResourceOf(t.Signal)
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. ", r)
	q := t.Value.Of(o.Capacity)
	fmt.Fprintf(&b, "Threshold quantity: %s, available: %s. ", q.String(), availableString(o.Available, r))
	if r != v1.ResourceMemory && r != v1.ResourceEphemeralStorage {
		return b.String()
	}
	s, ok := stats[pod.UID]
	if !ok {
		return b.String()
	}
	for _, c := range pod.Spec.Containers {
		for _, cs := range s.Containers {
			if cs.Name != c.Name {
				continue
			}
			var used uint64
			switch {
			case r == v1.ResourceMemory && cs.Memory != nil && cs.Memory.WorkingSetBytes != nil:
				used = *cs.Memory.WorkingSetBytes
			case r == v1.ResourceEphemeralStorage:
				if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil {
					used += *cs.Rootfs.UsedBytes
				}
				if cs.Logs != nil && cs.Logs.UsedBytes != nil {
					used += *cs.Logs.UsedBytes
				}
			default:
				continue
			}
			usage := resource.NewQuantity(int64(used), resource.BinarySI)
			req := c.Resources.Requests[r]
			if usage.Cmp(req) > 0 {
				fmt.Fprintf(&b, "Container %s was using %s, request is %s, has larger consumption of %s. ", c.Name, usage.String(), req.String(), r)
			}
		}
	}
	return b.String()
}

// availableString prints a byte amount in Ki as upstream's messages do.
func availableString(q resource.Quantity, r v1.ResourceName) string {
	if r == v1.ResourceMemory || r == v1.ResourceEphemeralStorage {
		return fmt.Sprintf("%dKi", q.Value()/1024)
	}
	return q.String()
}
