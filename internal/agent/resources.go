package agent

import (
	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/resize"
	"github.com/heartlet/heartlet/internal/userns"
	"github.com/heartlet/heartlet/internal/volume"
)

// The Set is the ResourceCleaner of housekeeping.
var _ podlifecycle.ResourceCleaner = (*podresources.Set)(nil)

// newPodResources is the node's one list of per-pod resource handlers,
// used by the pod syncer and by housekeeping alike. A nil cgroup manager
// (cgroupsPerQOS off) manages no pod cgroups; a nil allocation record
// keeps none; a nil user namespace allocator gives none.
func newPodResources(cg *cgroups.Manager, vols *volume.Manager, uns *userns.Manager, podLogsDir, rootDir string, alloc *resize.Store) *podresources.Set {
	h := podresources.NodeHandlers{
		Logs:           podsync.LogDir(podLogsDir),
		Volumes:        podresources.Volumes(vols),
		ContainerFiles: podsync.ContainerFiles(rootDir),
	}
	if cg != nil {
		h.Cgroup = podresources.PodCgroup(cg)
	}
	if alloc != nil {
		h.Allocation = alloc.Handler()
	}
	if uns != nil {
		h.UserNamespace = uns.Handler()
	}
	return podresources.ForNode(h)
}
