package agent

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/runtime"
)

// cgroupDriverOf resolves the cgroup driver from the configured one and
// the runtime's (cgroups.ResolveDriver); a runtime that cannot say leaves
// the configured one, with a warning.
func cgroupDriverOf(ctx context.Context, rt *runtime.Runtime, configured string) (string, error) {
	logger := klog.FromContext(ctx)
	d, err := rt.CgroupDriver(ctx)
	if err != nil {
		logger.Info("Warning: cannot read the container runtime's cgroup driver; make sure it is the configured one", "cgroupDriver", configured, "err", err)
	} else if d.Driver == "" {
		logger.Info("Warning: the container runtime does not report its cgroup driver; make sure it is the configured one", "cgroupDriver", configured)
	}
	driver, err := cgroups.ResolveDriver(configured, d.Driver, d.Source, d.FromCRI)
	if err != nil {
		return "", err
	}
	if configured != "" && driver != configured {
		logger.Info("Using the container runtime's cgroup driver instead of the configured one", "cgroupDriver", driver, "configured", configured, "source", d.Source)
	}
	return driver, nil
}
