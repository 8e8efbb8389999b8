package podsync

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNamespaces holds the user namespaces of pods that set hostUsers:
// false (userns.Manager).
//
// Contract: Mapping returns the pod's CRI user namespace (mode POD with
// its ID mappings) once its pod resources are prepared (the user
// namespace handler gives the pod its IDs), an error before; it never
// returns a mapping another running pod holds. HandlerSupports tells
// whether the runtime reported user namespace support for a runtime
// handler ("" is the default). Both are safe for concurrent use.
type UserNamespaces interface {
	Mapping(pod *v1.Pod) (*runtimeapi.UserNamespace, error)
	HandlerSupports(handler string) bool
}

// userNamespace is the CRI user namespace of the pod: nil (the runtime's
// default, the node's) unless it sets hostUsers: false. Such a pod never
// runs in the node's user namespace: without a UserNamespaces it is an
// error.
func (s *Syncer) userNamespace(pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil, nil
	}
	if s.opts.UserNamespaces == nil {
		return nil, fmt.Errorf("hostUsers: false needs user namespaces, which this node does not set up")
	}
	return s.opts.UserNamespaces.Mapping(pod)
}

// checkUserNamespaceHandler refuses to create the sandbox of a pod that
// asks for a user namespace with a runtime handler that does not support
// them, with upstream's message.
func (s *Syncer) checkUserNamespaceHandler(pod *v1.Pod, handler string) error {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return nil
	}
	if s.opts.UserNamespaces == nil || !s.opts.UserNamespaces.HandlerSupports(handler) {
		return fmt.Errorf("RuntimeClass handler %q does not support user namespaces", handler)
	}
	return nil
}
