package agent

import (
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/logrotate"
)

// newLogRotation builds the container log manager from the
// containerLog* fields of the (defaulted, validated) configuration.
func newLogRotation(cfg *kubeletv1beta1.KubeletConfiguration, rt logrotate.Runtime, clk clock.WithTicker) *logrotate.Manager {
	opts := logrotate.Options{
		MaxFiles:   int(derefInt32(cfg.ContainerLogMaxFiles)),
		MaxWorkers: int(derefInt32(cfg.ContainerLogMaxWorkers)),
		Clock:      clk,
	}
	if q, err := resource.ParseQuantity(cfg.ContainerLogMaxSize); err == nil {
		opts.MaxSize = q.Value()
	}
	if cfg.ContainerLogMonitorInterval != nil {
		opts.Interval = cfg.ContainerLogMonitorInterval.Duration
	}
	return logrotate.New(rt, opts)
}
