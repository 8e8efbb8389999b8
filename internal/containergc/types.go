package containergc

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	hrt "github.com/heartlet/heartlet/internal/runtime"
)

// Runtime is what container garbage collection needs of the container
// runtime.
//
// Contract: ListPods returns every pod the runtime has sandboxes or
// containers for (labelled with a pod UID), each with its sandboxes and
// containers newest first, their IDs, names, states and creation times.
// GetPodStatus returns one pod's full status, the containers' log paths
// included. RemoveContainer and RemovePodSandbox remove one stopped
// object; an object already gone is an error wrapping errdefs.ErrNotFound
// or none. All are safe for concurrent use.
type Runtime interface {
	ListPods(ctx context.Context) ([]*hrt.PodStatus, error)
	GetPodStatus(ctx context.Context, uid types.UID) (*hrt.PodStatus, error)
	RemoveContainer(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
}

// Pods tells container garbage collection which pods still exist.
//
// Contract: SourcesReady is true once every pod source delivered its pods
// at least once (before that a pod no source wants may still be wanted);
// Desired tells whether a source wants the pod; Known whether a pod
// worker holds it in any state (it may still need its containers to
// stop the pod or report its status). All are safe for concurrent use and
// must not block.
type Pods interface {
	SourcesReady() bool
	Desired(uid types.UID) bool
	Known(uid types.UID) bool
}

// Recorder records events on the node; it must not block.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}
