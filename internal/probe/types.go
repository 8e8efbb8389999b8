// Package probe runs the liveness, readiness and startup probes of a
// pod's containers (exec, httpGet, tcpSocket, grpc), one worker goroutine
// per container and probe kind, keeps their results per container ID and
// publishes every change, so the pod's sync can restart a container that
// failed its liveness or startup probe and report readiness.
//
// The semantics follow the upstream kubelet's prober: thresholds, initial
// delay from the container's start, liveness and readiness held until the
// startup probe succeeded, initial results (readiness Failure, liveness
// Success, startup Unknown), a worker on hold after a liveness or startup
// failure until the container is replaced, Unhealthy events and the
// prober_probe_total and prober_probe_duration_seconds metrics.
package probe

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Kind is the kind of a probe.
type Kind int

// Probe kinds.
const (
	Liveness Kind = iota
	Readiness
	Startup
)

// String returns the kind as upstream spells it in events and metrics.
func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// Result is the state a probe has established for a container.
type Result int

// Probe results.
const (
	Unknown Result = iota
	Success
	Failure
)

// String returns the result's name.
func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// Update reports that the result of one probe of one container changed.
type Update struct {
	PodUID        types.UID
	ContainerName string
	// ContainerID is the runtime's ID, without the "<runtime>://" prefix.
	ContainerID string
	Kind        Kind
	Result      Result
}

// ExecRunner runs a command in a container; *runtime.Runtime is one.
// An error wrapping runtime.ErrExecTimeout means the command did not
// finish within timeout.
type ExecRunner interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (runtime.ExecResult, error)
}

// StatusGetter returns the pod's current status: its IP and, per
// container, the ID, state, start time and started flag.
type StatusGetter interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Recorder records Kubernetes events.
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Journal records probe failures in the pod's journal (journal.Journal).
//
// Contract: safe for concurrent use and never blocks.
type Journal interface {
	Record(uid types.UID, e journal.Entry)
}

// Event reasons, as upstream.
const (
	ReasonUnhealthy    = "Unhealthy"
	ReasonProbeWarning = "ProbeWarning"
)
