package podresources

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Handler names.
const (
	NamePodCgroup      = "pod cgroup"
	NameLogs           = "pod log directory"
	NameVolumes        = "volumes"
	NameContainerFiles = "container files"
)

// CgroupManager creates and removes pod cgroups (cgroups.Manager).
//
// Contract: EnsurePod creates the pod's cgroup and applies its limits, and
// is idempotent; AdoptPod records a pod whose cgroup exists (its share of
// its QoS class) without creating or writing the pod's cgroup; RemovePod kills nothing, fails while a process is left and
// succeeds for a pod without a cgroup; ListPods lists the UIDs of every pod
// cgroup.
type CgroupManager interface {
	EnsurePod(ctx context.Context, pod *v1.Pod) error
	AdoptPod(ctx context.Context, pod *v1.Pod) error
	RemovePod(ctx context.Context, uid types.UID) error
	ListPods(ctx context.Context) ([]types.UID, error)
}

// PodCgroup is the handler of pod cgroups; nil cg gives a nil Handler.
func PodCgroup(cg CgroupManager) Handler {
	if cg == nil {
		return nil
	}
	return podCgroup{cg}
}

type podCgroup struct{ cg CgroupManager }

var (
	_ Releaser = podCgroup{}
	_ Lister   = podCgroup{}
)

func (podCgroup) Name() string { return NamePodCgroup }

func (h podCgroup) Prepare(ctx context.Context, pod *v1.Pod) error { return h.cg.EnsurePod(ctx, pod) }

// Reconstruct counts an existing pod cgroup in its QoS class again.
func (h podCgroup) Reconstruct(ctx context.Context, pod *v1.Pod) error {
	return h.cg.AdoptPod(ctx, pod)
}

// Release removes the cgroup once the pod has terminated.
func (h podCgroup) Release(ctx context.Context, pod *v1.Pod) error {
	return h.cg.RemovePod(ctx, pod.UID)
}

func (h podCgroup) Cleanup(ctx context.Context, uid types.UID) error { return h.cg.RemovePod(ctx, uid) }

func (h podCgroup) List(ctx context.Context) ([]types.UID, error) { return h.cg.ListPods(ctx) }

// VolumeManager sets up and tears down pod directories and volumes
// (volume.Manager).
//
// Contract: Prepare is idempotent and remembers the pod so its volumes are
// refreshed; Adopt remembers a pod whose directory exists without writing
// anything; Cleanup unmounts subPath mounts, then volumes, then removes the
// pod directory, stops refreshing the pod and is idempotent and safe
// without Prepare; PodDirs lists the UIDs with a pod directory.
type VolumeManager interface {
	Prepare(ctx context.Context, pod *v1.Pod) error
	Adopt(ctx context.Context, pod *v1.Pod) error
	Cleanup(ctx context.Context, uid types.UID) error
	PodDirs() ([]types.UID, error)
}

// Volumes is the handler of the pod directory, its volumes and subPath
// mounts; nil vm gives a nil Handler.
func Volumes(vm VolumeManager) Handler {
	if vm == nil {
		return nil
	}
	return volumes{vm}
}

type volumes struct{ vm VolumeManager }

var (
	_ Releaser = volumes{}
	_ Lister   = volumes{}
)

func (volumes) Name() string { return NameVolumes }

// Prepare sets up the pod's volumes; a pod without volumes has nothing to
// prepare.
func (h volumes) Prepare(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.Volumes) == 0 {
		return nil
	}
	return h.vm.Prepare(ctx, pod)
}

// Reconstruct remembers the pod's volumes for refresh when they exist.
func (h volumes) Reconstruct(ctx context.Context, pod *v1.Pod) error {
	if len(pod.Spec.Volumes) == 0 {
		return nil
	}
	return h.vm.Adopt(ctx, pod)
}

// Release unmounts and removes the volumes once nothing of the pod runs,
// before the pod object may be deleted, as upstream.
func (h volumes) Release(ctx context.Context, pod *v1.Pod) error {
	return h.vm.Cleanup(ctx, pod.UID)
}

func (h volumes) Cleanup(ctx context.Context, uid types.UID) error { return h.vm.Cleanup(ctx, uid) }

func (h volumes) List(context.Context) ([]types.UID, error) { return h.vm.PodDirs() }
