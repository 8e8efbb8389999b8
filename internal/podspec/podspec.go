// Package podspec is the one home of the facts about a pod's spec and
// status that several domains ask about: whether an init container is a
// sidecar, whether a pod's phase is final and whether an exited container
// runs again. It depends on the API types only, so every domain package
// may import it.
package podspec

import v1 "k8s.io/api/core/v1"

// IsSidecar reports whether an init container is a sidecar: restartable
// (restartPolicy Always), started in order with the other init containers
// and then running next to the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// IsTerminalPhase reports whether a pod in phase p has finished for good
// (Succeeded or Failed); such a pod is never run again.
func IsTerminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}
