package podspec

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ContainerFieldPath locates a container in the pod's spec as an event's
// involvedObject.fieldPath does: spec.containers{name},
// spec.initContainers{name} or spec.ephemeralContainers{name}. ok is false
// when the pod has no container of that name.
func ContainerFieldPath(pod *v1.Pod, name string) (path string, ok bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return fmt.Sprintf("spec.containers{%s}", name), true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", name), true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return fmt.Sprintf("spec.ephemeralContainers{%s}", name), true
		}
	}
	return "", false
}

// EventObject is what an event about one of the pod's containers is
// about, as the upstream kubelet records it: a reference to the pod with
// the container's field path. It is the pod itself when the pod has no
// container of that name.
func EventObject(pod *v1.Pod, container string) runtime.Object {
	path, ok := ContainerFieldPath(pod, container)
	if !ok {
		return pod
	}
	return &v1.ObjectReference{
		Kind:            "Pod",
		APIVersion:      "v1",
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		FieldPath:       path,
	}
}
