package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/eviction"
)

// reclaimableReader is the eviction manager's reader of reclaimable
// memory for --eviction-memory-signal: nil (upstream's working-set
// signal) unless the signal is reclaimable. A host where it cannot be
// read is named in a warning at start (each pass then logs the error and
// uses the working-set signal).
func reclaimableReader(ctx context.Context, c *components, signal string) eviction.ReclaimableReader {
	if signal != config.EvictionMemoryReclaimable {
		return nil
	}
	r := eviction.HostReclaimable{
		CgroupRoot:   "/sys/fs/cgroup",
		PressureFile: "/proc/pressure/memory",
		// Read when ranking, after c is built.
		PodCgroup: func(p *v1.Pod) string {
			if c.cgroups == nil {
				return ""
			}
			return c.cgroups.PodCgroupPath(p)
		},
	}
	logger := klog.FromContext(ctx)
	switch got, err := r.Read(ctx); {
	case err != nil:
		logger.Info("Warning: --eviction-memory-signal=reclaimable but the reclaimable memory is unreadable; memory.available stays the working-set signal while it is", "err", err)
	case got.PSI == nil:
		logger.Info("Warning: --eviction-memory-signal=reclaimable without memory pressure information (no /proc/pressure/memory): the active page cache always counts as available")
	}
	return r
}
