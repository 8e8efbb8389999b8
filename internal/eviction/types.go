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
type SummaryProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// Pods lists the desired pods of the node. The result is not modified.
type Pods interface {
	Pods() []*v1.Pod
}

// WorkerKiller is the part of the pod workers eviction drives.
//
// Contract: State reports where a pod is in its lifecycle (false for an
// unknown UID); Update with UpdateKill and Keep stops the pod within the
// given grace period and never starts it again under its UID, without
// blocking. Both are safe for concurrent use.
type WorkerKiller interface {
	State(uid types.UID) (podworker.State, bool)
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
