package agent

import (
	"context"

	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/cgroups"
)

// warnCgroupV1 logs cgroups.V1Warning for this host and failCgroupV1.
func warnCgroupV1(ctx context.Context, cfg *kubeletv1beta1.KubeletConfiguration) {
	logger := klog.FromContext(ctx)
	version, err := cgroups.HostVersion("")
	if err != nil {
		logger.Info("Cannot tell the host's cgroup version", "err", err)
		return
	}
	if w := cgroups.V1Warning(version, cfg.FailCgroupV1 == nil || *cfg.FailCgroupV1); w != "" {
		logger.Info("Configuration warning", "warning", w)
	}
}
