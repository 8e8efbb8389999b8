// Package podlifecycle decides what happens to a pod between the pod
// sources and its pod worker: whether a new pod is admitted, which worker
// update a change of the desired set becomes (start, update, terminate,
// delete), that a pod finished in the API is never run again, and what
// housekeeping removes: running pods no source wants are stopped, stopped
// ones are removed from the runtime, and the resources of pods nobody knows
// any more are cleaned up.
//
// It decides and drives; it does not do the work. Everything it drives is a
// small interface declared here, with its contract written beside it, so
// that every decision is tested on fakes.
package podlifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Workers are the pod workers (podworker.Workers), the authority on which
// pods actually run.
//
// Contract: every method is safe for concurrent use and never blocks on a
// pod's sync. Update hands the change to the pod's worker and returns; an
// UpdateKill for an unknown UID starts a worker directly in terminating. A
// UID stays Known from its first Update until it has terminated and its
// source removed it.
type Workers interface {
	Update(u podworker.Update)
	Known(uid types.UID) bool
	State(uid types.UID) (podworker.State, bool)
	// Pods returns the state of every known pod (a copy).
	Pods() map[types.UID]podworker.State
}

// Desired is the merged desired pod set of every source (podconfig.Config).
//
// Contract: safe for concurrent use; Pods returns a snapshot the caller may
// read but not modify. SeenAllSources is true once each named source has
// delivered its pods at least once.
type Desired interface {
	Pods() []*v1.Pod
	SeenAllSources(sources ...string) bool
}

// Statuses is the pod status cache (status.Manager), the authority on what
// is reported.
//
// Contract: safe for concurrent use; SetPodStatus replaces the pod's
// status; RemovePod of an unknown UID is a no-op.
type Statuses interface {
	SetPodStatus(pod *v1.Pod, st v1.PodStatus)
	// UIDs returns the UID of every pod with a status.
	UIDs() []types.UID
	RemovePod(uid types.UID)
}

// Probes are the probe workers (probe.Manager).
//
// Contract: safe for concurrent use and idempotent: AddPod with a pod
// already probed updates its probes to the pod's spec and deletion state,
// RemovePod of an unknown UID is a no-op.
type Probes interface {
	AddPod(pod *v1.Pod)
	RemovePod(uid types.UID)
}

// Startup tracks pod startup latency (podstartup.Tracker).
//
// Contract: safe for concurrent use; Seen records the first time a pod UID
// is seen (later calls change nothing), Forget drops the UID.
type Startup interface {
	Seen(pod *v1.Pod)
	Forget(uid types.UID)
}

// Recorder records events about a pod (an event recorder; nil in
// standalone mode).
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Journal keeps the per-pod record of decisions (journal.Journal).
//
// Contract: safe for concurrent use and never blocks; Pods lists the UIDs
// with entries, Forget drops a pod's entries (a no-op for an unknown UID).
type Journal interface {
	Record(uid types.UID, e journal.Entry)
	Pods() []types.UID
	Forget(uid types.UID)
}

// RuntimePods is what the runtime ran at the last relist (pleg.PLEG).
//
// Contract: Relisted's bool is false before the first successful relist and
// while the latest relist failed: then the pods are not (or no longer)
// known to be all that runs, and nothing may be removed on their account.
// The statuses are shared: the caller reads them and never modifies them.
type RuntimePods interface {
	Relisted() ([]*runtime.PodStatus, bool)
}

// PodRemover deletes what is left of a stopped pod in the runtime: its
// containers and sandboxes (podsync.Syncer).
//
// Contract: called only for a pod no source wants, no worker knows and of
// which nothing runs; idempotent, and retried on the next housekeeping pass
// after an error.
type PodRemover interface {
	RemovePod(ctx context.Context, uid types.UID) error
}

// ResourceCleaner releases the node resources of pods (pod directories and
// volumes, pod cgroups, ...) outside the runtime (podresources.Set, the
// same handler list the pod syncer uses).
//
// Contract: PodsWithResources lists the UIDs that hold any resource; when
// some kind of resource cannot be listed it returns those it could list
// with an error, and the listed ones are still cleaned. CleanupPod releases
// everything the pod holds; it is idempotent, safe for a pod that holds
// nothing, and called only for a pod that no source wants, no worker knows
// and the runtime's last successful relist did not see. An error means
// something is left; CleanupPod is called again on the next pass.
type ResourceCleaner interface {
	PodsWithResources(ctx context.Context) ([]types.UID, error)
	CleanupPod(ctx context.Context, uid types.UID) error
}

// MirrorSyncer keeps the API's mirror pods in step with the static pods
// (cluster mode only).
//
// Contract: SyncMirrors is idempotent and called once per housekeeping pass
// after every source has delivered its pods; an error is logged and the
// next pass tries again. MirrorCount is the number of mirror pods in the
// API.
type MirrorSyncer interface {
	SyncMirrors(ctx context.Context) error
	MirrorCount() int
}
