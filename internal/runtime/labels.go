package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/dump"
)

// SandboxLabels returns the labels for a pod's sandbox: the pod's own labels
// plus the pod name, namespace and UID and the managed marker. heartlet's
// keys win over pod labels with the same key.
func SandboxLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+4)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	labels[LabelManagedBy] = "true"
	return labels
}

// SandboxAnnotations returns the annotations for a pod's sandbox: a copy of
// the pod's annotations.
func SandboxAnnotations(pod *v1.Pod) map[string]string {
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	return annotations
}

// ContainerLabels returns the labels for one of a pod's containers. They
// identify the pod and the container; nothing else, so that labels never
// change for the life of a container.
func ContainerLabels(pod *v1.Pod, containerName string) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: containerName,
		LabelManagedBy:     "true",
	}
}

// ContainerAnnotations returns the annotations for one attempt of a
// container: its spec hash, restart count, termination message settings,
// the pod's termination grace period, the init marker and its ports.
// ParseContainerAnnotations reads them back.
func ContainerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int, init bool) map[string]string {
	annotations := map[string]string{
		AnnotationHash:     strconv.FormatUint(HashContainer(c), 16),
		AnnotationRestart:  strconv.Itoa(restartCount),
		AnnotationTermPath: c.TerminationMessagePath,
		AnnotationTermPol:  string(c.TerminationMessagePolicy),
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		annotations[AnnotationGrace] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if init {
		annotations[AnnotationInit] = "true"
	}
	if len(c.Ports) > 0 {
		// A slice of a plain struct always encodes.
		if b, err := json.Marshal(c.Ports); err == nil {
			annotations[AnnotationPorts] = string(b)
		}
	}
	return annotations
}

// ContainerAnnotationInfo is what ContainerAnnotations wrote on a container.
type ContainerAnnotationInfo struct {
	Hash                      uint64
	RestartCount              int
	Init                      bool
	TerminationMessagePath    string
	TerminationMessagePolicy  v1.TerminationMessagePolicy
	PodTerminationGracePeriod *int64 // nil when not recorded
	Ports                     []v1.ContainerPort
}

// ParseContainerAnnotations decodes the annotations ContainerAnnotations
// wrote. Missing keys leave zero values. Malformed values are reported in
// the error (one entry per key); the other fields are still filled.
func ParseContainerAnnotations(annotations map[string]string) (ContainerAnnotationInfo, error) {
	var info ContainerAnnotationInfo
	var errs []error
	if s, ok := annotations[AnnotationHash]; ok {
		h, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationHash, err))
		}
		info.Hash = h
	}
	if s, ok := annotations[AnnotationRestart]; ok {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationRestart, err))
		case n < 0:
			errs = append(errs, fmt.Errorf("annotation %s: negative restart count %d", AnnotationRestart, n))
		default:
			info.RestartCount = n
		}
	}
	if s, ok := annotations[AnnotationInit]; ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationInit, err))
		}
		info.Init = b
	}
	info.TerminationMessagePath = annotations[AnnotationTermPath]
	info.TerminationMessagePolicy = v1.TerminationMessagePolicy(annotations[AnnotationTermPol])
	if s, ok := annotations[AnnotationGrace]; ok {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationGrace, err))
		} else {
			info.PodTerminationGracePeriod = &n
		}
	}
	if s, ok := annotations[AnnotationPorts]; ok && s != "" {
		var ports []v1.ContainerPort
		if err := json.Unmarshal([]byte(s), &ports); err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", AnnotationPorts, err))
		} else {
			info.Ports = ports
		}
	}
	return info, errors.Join(errs...)
}

// HashContainer returns the hash of the container fields whose change
// requires a new container, with the upstream kubelet's definition and
// values: FNV-32a over the JSON of the name and image. Those are the only
// such fields the API lets change on a running pod (a static pod whose
// manifest changes gets a new UID and is replaced whole). Hashing nothing
// else means a new field or default in k8s.io/api never restarts running
// containers after an upgrade, and containers created by the upstream
// kubelet are adopted, not restarted.
func HashContainer(c *v1.Container) uint64 {
	if c == nil {
		return 0
	}
	fields, _ := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(fields))
	return uint64(h.Sum32())
}
