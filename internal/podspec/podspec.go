// Package podspec is the one home of the facts about a pod's spec and
// status that several domains ask about: whether an init container is a
// sidecar, whether a pod's phase is final, whether an exited container
// runs again and what an event about one of its containers refers to. It
// depends on the API types and apimachinery only, so every domain package
// may import it.
package podspec

import v1 "k8s.io/api/core/v1"

// IsSidecar reports whether an init container is a sidecar: restartable
// (restartPolicy Always), started in order with the other init containers
// and then running next to the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// RunningContainers are the containers that run for the pod's life: its
// sidecars, in order, then its app containers. They are the ones probed
// and the ones an in-place resize may change. The pointers are into pod.
func RunningContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; IsSidecar(c) {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// IsTerminalPhase reports whether a pod in phase p has finished for good
// (Succeeded or Failed); such a pod is never run again.
func IsTerminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}
