package eviction

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/heartlet/heartlet/internal/podworker"
)

// SummaryProvider reads the node's and the pods' usage. The summary must
// be a full one (filesystems included) and is not modified. It may be
// called from one goroutine at a time; an error skips the pass.
//
// Contract: Summary has every running pod's stats and may be up to a
// second old; SummaryOf is collected when called and has the node's
// figures and the stats of only the pods pick returns true for (none for
// a nil pick). A pass reads the node's signals and the pods it checks
// for local storage limits through SummaryOf, and every pod's stats only
// when it ranks pods to evict.
type SummaryProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
	SummaryOf(ctx context.Context, pick func(types.UID) bool) (*statsapi.Summary, error)
}

// Pods lists the desired pods of the node. The result is not modified.
type Pods interface {
	Pods() []*v1.Pod
}

// WorkerKiller is the part of the pod workers eviction drives.
//
// Contract: State reports where a pod is in its lifecycle (false for an
// unknown UID); Cleaned reports that nothing of the pod is left (stopped
// and its volumes and cgroups released, or unknown); Update with
// UpdateKill and Keep stops the pod within the given grace period and
// never starts it again under its UID, without blocking. All are safe for
// concurrent use.
type WorkerKiller interface {
	State(uid types.UID) (podworker.State, bool)
	Cleaned(uid types.UID) bool
	Update(u podworker.Update)
}

// Statuses is the pod status cache: the evicted pod's status is set there
// (Failed, reason Evicted) before it is killed, and a terminal phase is
// never left again.
type Statuses interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
	SetPodStatus(pod *v1.Pod, st v1.PodStatus)
}

// Recorder records events; it must not block.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}
