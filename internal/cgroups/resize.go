package cgroups

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
	m.mu.Lock()
	delete(m.ensured, pod.UID) // its limits change here, part by part
	m.mu.Unlock()
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

// Memory usage files of cgroup v1 and v2.
const (
	fileMemoryUsage   = "memory.usage_in_bytes"
	fileMemoryCurrent = "memory.current"
)

// PodMemoryUsage is the memory the pod's cgroup uses, in bytes, read
// before its memory limit is lowered by an in-place resize.
func (m *Manager) PodMemoryUsage(ctx context.Context, pod *v1.Pod) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := validUID(pod.UID); err != nil {
		return 0, err
	}
	return m.memoryUsage(m.PodCgroupParent(pod))
}

// ContainerMemoryUsage is the memory a running container's cgroup uses,
// in bytes: with the cgroupfs driver the runtime puts it in the pod
// cgroup, named by the container's ID.
func (m *Manager) ContainerMemoryUsage(ctx context.Context, pod *v1.Pod, containerID string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := validUID(pod.UID); err != nil {
		return 0, err
	}
	if err := validUID(types.UID(containerID)); err != nil {
		return 0, fmt.Errorf("container id %q: not usable in a cgroup name", containerID)
	}
	return m.memoryUsage(path.Join(m.PodCgroupParent(pod), containerID))
}

func (m *Manager) memoryUsage(cg string) (int64, error) {
	rel := filepath.FromSlash(strings.TrimPrefix(cg, "/"))
	p := filepath.Join(m.root, "memory", rel, fileMemoryUsage)
	if m.v2 {
		p = filepath.Join(m.root, rel, fileMemoryCurrent)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("read memory usage: %w", err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read memory usage %s: %w", p, err)
	}
	return v, nil
}
