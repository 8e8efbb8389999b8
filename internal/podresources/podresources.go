// Package podresources is the one ordered list of a pod's resources on the
// node outside the container runtime (its cgroup, its log directory, its
// volumes and subPath mounts, the files heartlet mounts into its
// containers) and the one path by which they are set up, adopted after a
// restart, released and removed.
//
// Each resource is a Handler. A Set runs them: Prepare in list order,
// Release and Cleanup in reverse order. podsync prepares a pod's resources
// before it creates anything in the runtime, releases them once the pod has
// terminated and removes them with the pod; housekeeping removes those of
// pods nobody knows through the same Set. A new kind of resource (CSI
// publications, ephemeral-storage accounting, ...) is one more Handler in
// ForNode, never another path.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Handler sets up and removes one kind of per-pod resource.
//
// Contract:
//   - Prepare sets up the resource for pod before anything of the pod is
//     created in the runtime. It is idempotent: it runs before every start
//     of a container, creates what is missing and leaves what exists (it may
//     bring it in step with the pod's latest spec). A Prepare error stops
//     the Set: no later handler is prepared and the pod's containers wait.
//   - Reconstruct adopts what exists for a pod whose containers survived a
//     restart of heartlet: it rebuilds the handler's memory of the pod from
//     the node and never creates, rewrites or removes anything there. It is
//     idempotent and safe for a pod that holds nothing.
//   - Cleanup removes everything the resource holds for the pod UID. It is
//     called only once nothing of the pod runs. It is idempotent, safe
//     without Prepare, and safe after a restart of heartlet (it finds what
//     to remove on the node, not in memory). An error means something is
//     left; the caller calls Cleanup again later.
//   - Name is a short noun phrase for errors and logs ("pod cgroup").
//
// Calls for one pod are never concurrent; calls for different pods may be.
type Handler interface {
	Name() string
	Prepare(ctx context.Context, pod *v1.Pod) error
	Reconstruct(ctx context.Context, pod *v1.Pod) error
	Cleanup(ctx context.Context, uid types.UID) error
}

// Releaser is implemented by a Handler whose resource is given back as
// soon as the pod has terminated, before the pod is removed (volumes are
// unmounted before the API object may be deleted; the pod cgroup goes once
// no process is left in it). Resources without it (such as container logs)
// stay until Cleanup.
//
// Contract: Release is called once no container of the pod runs and never
// will again; it is idempotent and safe without Prepare. Cleanup still
// follows, and must succeed after a Release.
type Releaser interface {
	Release(ctx context.Context, pod *v1.Pod) error
}

// Lister is implemented by a Handler that can find the pods holding its
// resource on the node, for housekeeping after a restart or a missed
// removal.
//
// Contract: List returns every UID that holds the resource; when only part
// could be listed it returns that part with an error.
type Lister interface {
	List(ctx context.Context) ([]types.UID, error)
}

// Operations named in a HandlerError.
const (
	OpPrepare     = "prepare"
	OpReconstruct = "reconstruct"
	OpRelease     = "release"
	OpCleanup     = "clean up"
	OpList        = "list"
)

// HandlerError is the error of one handler's operation.
type HandlerError struct {
	Handler string // the handler's Name
	Op      string // one of the Op constants
	Err     error
}

func (e *HandlerError) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Handler, e.Err) }
func (e *HandlerError) Unwrap() error { return e.Err }

// Set runs an ordered list of handlers. Its methods are safe for
// concurrent use when its handlers' are.
type Set struct {
	handlers []Handler
}

// New returns a Set of handlers in this order; nil handlers are left out.
func New(handlers ...Handler) *Set {
	s := &Set{}
	for _, h := range handlers {
		if h != nil {
			s.handlers = append(s.handlers, h)
		}
	}
	return s
}

// NodeHandlers are the resource handlers of this node; nil when a kind is
// not managed (no pod cgroups without cgroupsPerQOS, no files without a
// root directory).
type NodeHandlers struct {
	// Allocation is the record of the resources allocated to the pod
	// (in-place resize): first, and removed last.
	Allocation Handler
	// Cgroup is the pod cgroup: first, so the pod is accounted for before
	// anything is written on its behalf, and removed last.
	Cgroup Handler
	// Logs is the pod's container log directory.
	Logs Handler
	// Volumes are the pod directory, its volumes and subPath mounts.
	Volumes Handler
	// UserNamespace is the pod's user namespace IDs (hostUsers: false),
	// recorded in the pod directory, so after the volumes.
	UserNamespace Handler
	// ContainerFiles are the files heartlet mounts into containers (hosts
	// file, termination message files); removed first, as they sit in the
	// pod directory.
	ContainerFiles Handler
}

// ForNode returns the Set of the node's handlers in their order:
// allocation record, pod cgroup, log directory, volumes, user namespace,
// container files.
func ForNode(h NodeHandlers) *Set {
	return New(h.Allocation, h.Cgroup, h.Logs, h.Volumes, h.UserNamespace, h.ContainerFiles)
}

// Names lists the handlers in order.
func (s *Set) Names() []string {
	out := make([]string, len(s.handlers))
	for i, h := range s.handlers {
		out[i] = h.Name()
	}
	return out
}

// Prepare prepares every handler in order and stops at the first error,
// a *HandlerError.
func (s *Set) Prepare(ctx context.Context, pod *v1.Pod) error {
	for _, h := range s.handlers {
		if err := h.Prepare(ctx, pod); err != nil {
			return &HandlerError{Handler: h.Name(), Op: OpPrepare, Err: err}
		}
	}
	return nil
}

// Reconstruct lets every handler, in order, adopt what exists for pod. It
// goes on after an error and returns every handler's error joined.
func (s *Set) Reconstruct(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for _, h := range s.handlers {
		if err := h.Reconstruct(ctx, pod); err != nil {
			errs = append(errs, &HandlerError{Handler: h.Name(), Op: OpReconstruct, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Release releases, in reverse order, the resources of the handlers that
// are Releasers. It goes on after an error and returns every error joined.
func (s *Set) Release(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for _, h := range slices.Backward(s.handlers) {
		r, ok := h.(Releaser)
		if !ok {
			continue
		}
		if err := r.Release(ctx, pod); err != nil {
			errs = append(errs, &HandlerError{Handler: h.Name(), Op: OpRelease, Err: err})
		}
	}
	return errors.Join(errs...)
}

// Cleanup removes every handler's resources of the pod, in reverse order.
// It goes on after an error (what one handler leaves does not keep the
// others' resources) and returns every error joined.
func (s *Set) Cleanup(ctx context.Context, uid types.UID) error {
	var errs []error
	for _, h := range slices.Backward(s.handlers) {
		if err := h.Cleanup(ctx, uid); err != nil {
			klog.FromContext(ctx).V(2).Info("Pod resource clean-up failed", "podUID", uid, "resource", h.Name(), "err", err)
			errs = append(errs, &HandlerError{Handler: h.Name(), Op: OpCleanup, Err: err})
		}
	}
	return errors.Join(errs...)
}

// PodsWithResources lists, each once, the UIDs that hold a resource of any
// handler that is a Lister. What could be listed is returned with the
// errors of what could not. It implements podlifecycle.ResourceCleaner.
func (s *Set) PodsWithResources(ctx context.Context) ([]types.UID, error) {
	var (
		uids []types.UID
		errs []error
		seen = map[types.UID]bool{}
	)
	for _, h := range s.handlers {
		l, ok := h.(Lister)
		if !ok {
			continue
		}
		list, err := l.List(ctx)
		if err != nil {
			errs = append(errs, &HandlerError{Handler: h.Name(), Op: OpList, Err: err})
		}
		for _, uid := range list {
			if !seen[uid] {
				seen[uid] = true
				uids = append(uids, uid)
			}
		}
	}
	return uids, errors.Join(errs...)
}

// CleanupPod is Cleanup; it implements podlifecycle.ResourceCleaner.
func (s *Set) CleanupPod(ctx context.Context, uid types.UID) error {
	return s.Cleanup(ctx, uid)
}
