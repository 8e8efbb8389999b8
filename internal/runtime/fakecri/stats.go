package fakecri

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerUsage are the figures ListContainerStats and ContainerStats
// report for one container.
type ContainerUsage struct {
	CPUUsageNanos    uint64
	MemoryWorkingSet uint64
	// WritableLayerBytes and WritableLayerInodes are the usage of the
	// container's writable layer.
	WritableLayerBytes  uint64
	WritableLayerInodes uint64
}

// ImageFsMountpoint is the mountpoint ImageFsInfo and the writable layers
// report.
const ImageFsMountpoint = "/fakecri/images"

// SetContainerStats sets what the stats calls report for container id.
// Containers without stats set report zeros.
func (s *Server) SetContainerStats(id string, u ContainerUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.containers[id] == nil {
		s.tb.Errorf("fakecri: SetContainerStats: no container %q", id)
		return
	}
	if s.stats == nil {
		s.stats = map[string]ContainerUsage{}
	}
	s.stats[id] = u
}

// SetSandboxPid sets the pid a verbose PodSandboxStatus of sandbox id
// reports in its "info" JSON, as containerd does.
func (s *Server) SetSandboxPid(id string, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sandboxes[id] == nil {
		s.tb.Errorf("fakecri: SetSandboxPid: no sandbox %q", id)
		return
	}
	if s.sandboxPids == nil {
		s.sandboxPids = map[string]int{}
	}
	s.sandboxPids[id] = pid
}

// sandboxInfo is the verbose info of a sandbox. Callers hold mu.
func (s *Server) sandboxInfo(id string) map[string]string {
	b, err := json.Marshal(map[string]any{"pid": s.sandboxPids[id]})
	if err != nil {
		s.tb.Errorf("fakecri: encode sandbox info: %v", err)
		return nil
	}
	return map[string]string{"info": string(b)}
}

// containerStats are the CRI stats of c. Callers hold mu.
func (s *Server) containerStats(c *container) *runtimeapi.ContainerStats {
	u := s.stats[c.ID]
	ts := toNanos(s.peek())
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:          c.ID,
			Metadata:    c.Config.GetMetadata(),
			Labels:      c.Config.GetLabels(),
			Annotations: c.Config.GetAnnotations(),
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            ts,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: u.CPUUsageNanos},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       ts,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: u.MemoryWorkingSet},
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  ts,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
			UsedBytes:  &runtimeapi.UInt64Value{Value: u.WritableLayerBytes},
			InodesUsed: &runtimeapi.UInt64Value{Value: u.WritableLayerInodes},
		},
	}
}

// ListContainerStats reports the running containers, as containerd does.
func (r *runtimeServer) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ListContainerStats"); err != nil {
		return nil, err
	}
	f := req.GetFilter()
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, c := range s.sortedContainers() {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if f.GetId() != "" && f.GetId() != c.ID {
			continue
		}
		if f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.SandboxID {
			continue
		}
		if !matchLabels(c.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		resp.Stats = append(resp.Stats, s.containerStats(c))
	}
	return resp, nil
}

// ContainerStats reports one container.
func (r *runtimeServer) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ContainerStats"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.containerStats(c)}, nil
}
