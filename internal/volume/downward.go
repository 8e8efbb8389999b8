package volume

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/qos"
)

// podFieldValue returns the value of a downward API field path of the pod
// metadata: metadata.name, metadata.namespace, metadata.uid,
// metadata.labels, metadata.annotations (all pairs, one key="value" per
// line, sorted) and metadata.labels['k'] / metadata.annotations['k'] (one
// raw value, empty when absent).
func podFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
		switch path {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", fieldPath)
}

// splitSubscript splits "path['key']" into path and key.
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	path, key, ok = strings.Cut(strings.TrimSuffix(fieldPath, "']"), "['")
	if !ok || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// formatMap renders a map the way downward API files show labels and
// annotations: key="value" lines sorted by key, values quoted with Go
// escapes, no newline after the last line.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + "=" + strconv.Quote(m[k])
	}
	return strings.Join(lines, "\n")
}

// ContainerResourceValue returns the value of a resourceFieldRef for the
// named container, divided by the divisor (default 1) and rounded up. An
// unset cpu, memory or ephemeral-storage limit falls back to the pod-level
// limit, then to the node's allocatable amount, as upstream reports it.
func ContainerResourceValue(pod *v1.Pod, defaultContainer string, fs *v1.ResourceFieldSelector, allocatable v1.ResourceList) (string, error) {
	name := fs.ContainerName
	if name == "" {
		name = defaultContainer
	}
	c := findContainer(pod, name)
	if c == nil {
		return "", fmt.Errorf("container %q referenced by resourceFieldRef %s not found in pod", name, fs.Resource)
	}

	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}

	kind, res, ok := strings.Cut(fs.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource: %s", fs.Resource)
	}
	rname := v1.ResourceName(res)
	switch rname {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
	default:
		if !strings.HasPrefix(res, v1.ResourceHugePagesPrefix) {
			return "", fmt.Errorf("unsupported container resource: %s", fs.Resource)
		}
	}

	var q resource.Quantity
	if kind == "limits" {
		q = effectiveLimit(pod, c, rname, allocatable)
	} else {
		q = c.Resources.Requests[rname]
	}
	if rname == v1.ResourceCPU {
		if divisor.MilliValue() == 0 {
			return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	if divisor.Value() == 0 {
		return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// effectiveLimit is the container's limit for name, else the pod-level
// limit, else (for cpu, memory and ephemeral-storage) the node's
// allocatable amount.
func effectiveLimit(pod *v1.Pod, c *v1.Container, name v1.ResourceName, allocatable v1.ResourceList) resource.Quantity {
	if q, ok := c.Resources.Limits[name]; ok && !q.IsZero() {
		return q
	}
	if q, ok := qos.PodLevelLimit(pod, name); ok {
		return q
	}
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		if q, ok := allocatable[name]; ok {
			return q
		}
	}
	return resource.Quantity{}
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
