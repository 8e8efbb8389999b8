package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Operation types of the stats calls, named as the upstream kubelet's.
const (
	opListContainerStats = "list_container_stats"
	opImageFsInfo        = "image_fs_info"
)

// ContainerStats are the resource usage figures the runtime reports for
// one container; nil fields were not reported.
type ContainerStats struct {
	ID        string
	Timestamp time.Time
	// CPUUsageNanos is the cumulative CPU time in nanoseconds.
	CPUUsageNanos *uint64
	// MemoryWorkingSet is the working set in bytes.
	MemoryWorkingSet *uint64
	// WritableLayer is the usage of the container's writable layer.
	WritableLayer *FsUsage
}

// FsUsage is the usage of one filesystem (or of one directory tree on it)
// as the runtime reports it.
type FsUsage struct {
	Timestamp time.Time
	// Mountpoint is where the filesystem is mounted, if reported.
	Mountpoint string
	UsedBytes  *uint64
	InodesUsed *uint64
}

// ListContainerStats returns the runtime's stats of its running
// containers.
func (r *Runtime) ListContainerStats(ctx context.Context) (_ []ContainerStats, err error) {
	defer r.record(opListContainerStats, r.clock.Now(), &err)
	items, err := r.rs.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, wrap(err, "list container stats")
	}
	out := make([]ContainerStats, 0, len(items))
	for _, s := range items {
		cs := ContainerStats{ID: s.GetAttributes().GetId()}
		if c := s.GetCpu(); c != nil {
			cs.Timestamp = fromNanos(c.GetTimestamp())
			if v := c.GetUsageCoreNanoSeconds(); v != nil {
				cs.CPUUsageNanos = ptr(v.GetValue())
			}
		}
		if m := s.GetMemory(); m != nil {
			if cs.Timestamp.IsZero() {
				cs.Timestamp = fromNanos(m.GetTimestamp())
			}
			if v := m.GetWorkingSetBytes(); v != nil {
				cs.MemoryWorkingSet = ptr(v.GetValue())
			}
		}
		if w := s.GetWritableLayer(); w != nil {
			cs.WritableLayer = fsUsage(w)
		}
		out = append(out, cs)
	}
	return out, nil
}

// ImageFsInfo returns the usage of the filesystems holding the runtime's
// images, the image filesystem first.
func (r *Runtime) ImageFsInfo(ctx context.Context) (_ []FsUsage, err error) {
	defer r.record(opImageFsInfo, r.clock.Now(), &err)
	resp, err := r.is.ImageFsInfo(ctx)
	if err != nil {
		return nil, wrap(err, "image filesystem info")
	}
	var out []FsUsage
	for _, f := range resp.GetImageFilesystems() {
		out = append(out, *fsUsage(f))
	}
	return out, nil
}

// SandboxPid returns the pid of a sandbox's first process, which holds
// the pod's namespaces, from the runtime's verbose sandbox status (the
// "info" JSON that containerd and CRI-O fill). It returns 0 when the
// runtime does not report one.
func (r *Runtime) SandboxPid(ctx context.Context, id string) (_ int, err error) {
	defer r.record(opPodSandboxStatus, r.clock.Now(), &err)
	resp, err := r.rs.PodSandboxStatus(ctx, id, true)
	if err != nil {
		return 0, wrap(err, "pod sandbox status of %s", id)
	}
	return sandboxPid(resp.GetInfo())
}

// sandboxPid reads the pid from a verbose sandbox status' info map.
func sandboxPid(info map[string]string) (int, error) {
	raw, ok := info["info"]
	if !ok {
		return 0, nil
	}
	var v struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return 0, fmt.Errorf("decode sandbox info: %w", err)
	}
	return v.Pid, nil
}

func fsUsage(f *runtimeapi.FilesystemUsage) *FsUsage {
	u := &FsUsage{Timestamp: fromNanos(f.GetTimestamp()), Mountpoint: f.GetFsId().GetMountpoint()}
	if v := f.GetUsedBytes(); v != nil {
		u.UsedBytes = ptr(v.GetValue())
	}
	if v := f.GetInodesUsed(); v != nil {
		u.InodesUsed = ptr(v.GetValue())
	}
	return u
}

func ptr[T any](v T) *T { return &v }
