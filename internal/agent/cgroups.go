package agent

import (
	"context"
	"fmt"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/nodestatus"
	"github.com/heartlet/heartlet/internal/runtime"
)

// newCgroups builds the cgroup manager from the configuration: the cgroup
// driver agreed with the runtime's, the pod pids limit, the CFS quota
// settings and the node allocatable enforcement, with the machine's
// capacity measured by nodestatus.
func newCgroups(ctx context.Context, cfg *kubeletv1beta1.KubeletConfiguration, rt *runtime.Runtime) (*cgroups.Manager, error) {
	driver, err := cgroupDriverOf(ctx, rt, cfg.CgroupDriver)
	if err != nil {
		return nil, err
	}
	capacity, err := nodestatus.MachineCapacity()
	if err != nil {
		return nil, fmt.Errorf("machine capacity: %w", err)
	}
	if tasks, err := cgroups.MaxTasks(); err == nil {
		capacity = cgroups.TaskCapacity(capacity, tasks)
	}
	kubepods, reservedCgroups := cgroups.PlanNodeAllocatable(cgroups.NodeAllocatableConfig{
		Enforce:              cfg.EnforceNodeAllocatable,
		Capacity:             capacity,
		SystemReserved:       reserved(cfg.SystemReserved),
		KubeReserved:         reserved(cfg.KubeReserved),
		SystemReservedCgroup: cfg.SystemReservedCgroup,
		KubeReservedCgroup:   cfg.KubeReservedCgroup,
	})
	return cgroups.New(cgroups.Options{
		CgroupRoot:      cfg.CgroupRoot,
		Driver:          driver,
		PodPidsLimit:    derefInt64(cfg.PodPidsLimit),
		DisableCPUQuota: !cpuCFSQuota(cfg),
		CPUPeriod:       cpuCFSQuotaPeriod(cfg),
		NodeAllocatable: kubepods,
		ReservedCgroups: reservedCgroups,
	})
}

// cpuCFSQuota is cpuCFSQuota, true when unset.
func cpuCFSQuota(cfg *kubeletv1beta1.KubeletConfiguration) bool {
	return cfg.CPUCFSQuota == nil || *cfg.CPUCFSQuota
}

// cpuCFSQuotaPeriod is cpuCFSQuotaPeriod, 0 (the default) when unset.
func cpuCFSQuotaPeriod(cfg *kubeletv1beta1.KubeletConfiguration) time.Duration {
	if cfg.CPUCFSQuotaPeriod == nil {
		return 0
	}
	return cfg.CPUCFSQuotaPeriod.Duration
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// cgroupsPerQOS is cgroupsPerQOS, true when unset.
func cgroupsPerQOS(cfg *kubeletv1beta1.KubeletConfiguration) bool {
	return cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS
}
