package cgroups

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ResizePod writes the pod cgroup's limits of one resource (cpu: the
// shares, the CFS period and quota; memory: the limit) from the pod's
// resources, leaving the other resource's files as they are, for an
// in-place resize that changes them in a set order. For cpu it first
// brings the burstable class's weight in step with the pod's new request.
// The pod cgroup must exist (EnsurePod made it); a memory limit below
// what the pod uses fails as the kernel refuses it.
func (m *Manager) ResizePod(ctx context.Context, pod *v1.Pod, r v1.ResourceName) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validUID(pod.UID); err != nil {
		return err
	}
	all := m.PodResources(pod)
	var part Resources
	switch r {
	case v1.ResourceCPU:
		m.mu.Lock()
		err := m.trackBurstable(pod, pod.UID, true)
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("update burstable cgroup: %w", err)
		}
		part = Resources{CPUShares: all.CPUShares, CPUPeriod: all.CPUPeriod, CPUQuota: all.CPUQuota}
	case v1.ResourceMemory:
		part = Resources{Memory: all.Memory}
	default:
		return fmt.Errorf("resize pod cgroup: resource %s cannot be resized", r)
	}
	p := m.PodCgroupParent(pod)
	if err := m.apply(p, part); err != nil {
		return fmt.Errorf("resize pod cgroup %s: %w", r, err)
	}
	klog.FromContext(ctx).V(2).Info("Resized pod cgroup", "pod", klog.KObj(pod), "podUID", pod.UID, "resource", r)
	return nil
}
