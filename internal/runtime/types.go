// Package runtime wraps the CRI (gRPC) runtime and image services: typed
// errors, io.kubernetes.* labels and annotations, container hashes, and a
// runtime-neutral view of a pod's sandboxes and containers.
package runtime

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Label and annotation keys written on sandboxes and containers, in the
// io.kubernetes.* convention shared with the upstream kubelet so that
// crictl and other tools show pod and container names.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	LabelContainerType = "io.kubernetes.container.type" // kept for tools; not required
	LabelManagedBy     = "io.heartlet.managed"          // "true" on everything heartlet creates
	AnnotationHash     = "io.kubernetes.container.hash"
	AnnotationRestart  = "io.kubernetes.container.restartCount"
	AnnotationTermPath = "io.kubernetes.container.terminationMessagePath"
	AnnotationTermPol  = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationGrace    = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationInit     = "io.heartlet.container.init"    // "true" for init containers
	AnnotationPorts    = "io.kubernetes.container.ports" // JSON list of the container's ports
)

// SandboxState is the runtime state of a pod sandbox.
type SandboxState string

const (
	SandboxReady    SandboxState = "ready"
	SandboxNotReady SandboxState = "notready"
)

// ContainerState is the runtime state of a container.
type ContainerState string

const (
	ContainerCreated ContainerState = "created"
	ContainerRunning ContainerState = "running"
	ContainerExited  ContainerState = "exited"
	ContainerUnknown ContainerState = "unknown"
)

// SandboxStatus is what the runtime reports about one pod sandbox.
type SandboxStatus struct {
	ID        string
	State     SandboxState
	CreatedAt time.Time
	Attempt   uint32
	// IPs are the sandbox's pod IPs, primary first. Empty for host-network
	// sandboxes: the caller reports the node IP itself.
	IPs         []string
	HostNetwork bool
	Labels      map[string]string
	Annotations map[string]string
}

// ContainerStatus is what the runtime reports about one container,
// decoded from CRI status plus heartlet's labels and annotations.
type ContainerStatus struct {
	ID           string
	Name         string // the pod spec's container name
	SandboxID    string
	State        ContainerState
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Reason       string // runtime reason, e.g. "OOMKilled", "Completed", "Error"
	Message      string
	Image        string // image reference as requested
	ImageRef     string // resolved image ID / digest
	Hash         uint64 // from AnnotationHash
	RestartCount int    // from AnnotationRestart
	Init         bool   // from AnnotationInit
	LogPath      string
	Attempt      uint32 // CRI metadata attempt
	// Mounts are the container's bind mounts as the runtime reports them.
	Mounts []Mount
	// Resources are the Linux resources the runtime reports the container
	// runs with; nil when it reports none.
	Resources *runtimeapi.LinuxContainerResources
	// Labels and Annotations are the container's CRI labels and annotations
	// (see ParseContainerAnnotations).
	Labels      map[string]string
	Annotations map[string]string
}

// Mount is one bind mount of a container: a host path seen at a path in
// the container.
type Mount struct {
	HostPath      string
	ContainerPath string
}

// PodStatus is the runtime's view of one pod: every sandbox and container
// labelled with its UID, newest first.
type PodStatus struct {
	UID        types.UID
	Name       string
	Namespace  string
	Sandboxes  []*SandboxStatus   // newest first
	Containers []*ContainerStatus // newest first, all attempts, init and app
}

// FindContainer returns the newest status of the named container, or nil.
func (s *PodStatus) FindContainer(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// IPs returns the pod IPs of the newest sandbox.
func (s *PodStatus) IPs() []string {
	if s == nil || len(s.Sandboxes) == 0 {
		return nil
	}
	return s.Sandboxes[0].IPs
}
