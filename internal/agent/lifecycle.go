package agent

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/mirror"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/podsource/apiserver"
)

// podDirs lists and removes the pods' directories under the root dir
// (volume.Manager).
type podDirs interface {
	PodDirs() ([]types.UID, error)
	Cleanup(ctx context.Context, uid types.UID) error
}

// podCgroups lists and removes pod cgroups (cgroups.Manager).
type podCgroups interface {
	ListPods(ctx context.Context) ([]types.UID, error)
	RemovePod(ctx context.Context, uid types.UID) error
}

// podResources are a pod's resources outside the runtime, cleaned up by
// housekeeping once nobody knows the pod: its directory (volumes and
// subPath mounts first) and its cgroup.
type podResources struct {
	dirs    podDirs
	cgroups podCgroups // nil without cgroupsPerQOS
}

// newPodResources keeps a nil cgroup manager a nil interface.
func newPodResources(dirs podDirs, cg *cgroups.Manager) *podResources {
	r := &podResources{dirs: dirs}
	if cg != nil {
		r.cgroups = cg
	}
	return r
}

var _ podlifecycle.ResourceCleaner = (*podResources)(nil)

// PodsWithResources lists the pods with a directory or a cgroup; what
// could be listed is returned with the error of what could not.
func (r *podResources) PodsWithResources(ctx context.Context) ([]types.UID, error) {
	var (
		uids []types.UID
		errs []error
		seen = map[types.UID]bool{}
	)
	add := func(list []types.UID) {
		for _, uid := range list {
			if !seen[uid] {
				seen[uid] = true
				uids = append(uids, uid)
			}
		}
	}
	if r.dirs != nil {
		list, err := r.dirs.PodDirs()
		if err != nil {
			errs = append(errs, fmt.Errorf("list pod directories: %w", err))
		}
		add(list)
	}
	if cg := r.cgroups; cg != nil {
		list, err := cg.ListPods(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list pod cgroups: %w", err))
		}
		add(list)
	}
	return uids, errors.Join(errs...)
}

// CleanupPod unmounts and removes the pod's directory, then removes its
// cgroup; both are idempotent and safe for a pod without them.
func (r *podResources) CleanupPod(ctx context.Context, uid types.UID) error {
	if r.dirs != nil {
		if err := r.dirs.Cleanup(ctx, uid); err != nil {
			return fmt.Errorf("remove pod directory: %w", err)
		}
	}
	if cg := r.cgroups; cg != nil {
		if err := cg.RemovePod(ctx, uid); err != nil {
			return fmt.Errorf("remove pod cgroup: %w", err)
		}
	}
	return nil
}

// mirrorPods keeps the API's mirror pods in step with the desired static
// pods.
type mirrorPods struct {
	mirrors *mirror.Manager
	desired *podconfig.Config
	api     *apiserver.Source
}

var _ podlifecycle.MirrorSyncer = (*mirrorPods)(nil)

func (m *mirrorPods) SyncMirrors(ctx context.Context) error {
	var static []*v1.Pod
	for _, p := range m.desired.Pods() {
		if podconfig.IsStatic(p) {
			static = append(static, p)
		}
	}
	if err := m.mirrors.Sync(ctx, static, m.api.MirrorPods()); err != nil {
		return fmt.Errorf("sync mirror pods: %w", err)
	}
	return nil
}

func (m *mirrorPods) MirrorCount() int { return len(m.api.MirrorPods()) }
