package podsync

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RuntimeClassGetter reads RuntimeClass objects from the API server.
// GetRuntimeClass returns an error for which apierrors.IsNotFound holds
// when no RuntimeClass has that name. It is called before every sandbox
// creation of a pod that names a RuntimeClass and must be safe for
// concurrent use.
type RuntimeClassGetter interface {
	GetRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
}

// runtimeHandler is the CRI runtime handler of the pod's sandbox: the
// handler of the RuntimeClass it names, else the node's default. As
// upstream, a RuntimeClass that does not exist is an error, so the
// sandbox is not created and the pod waits with FailedCreatePodSandBox.
// Without an API server a RuntimeClass cannot be resolved, and a pod
// naming one never runs with the default handler instead.
func (s *Syncer) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return s.opts.RuntimeHandler, nil
	}
	if s.opts.RuntimeClasses == nil {
		return "", fmt.Errorf("runtimeClassName %q cannot be resolved: RuntimeClasses are API objects and heartlet runs without an API server", *name)
	}
	rc, err := s.opts.RuntimeClasses.GetRuntimeClass(ctx, *name)
	if apierrors.IsNotFound(err) {
		// Upstream's wording, from its RuntimeClass lister.
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), *name)
	}
	if err != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", *name, err)
	}
	return rc.Handler, nil
}
