// Package podworker is the per-pod state machine and the only authority on
// which pods are actually running on the node.
//
// Every pod UID moves through syncing → terminating → terminated and is then
// forgotten once its source has removed it. One goroutine per UID does the
// work while there is work to do; updates that arrive while it is busy are
// coalesced so that it only ever picks up the newest desired pod.
package podworker

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Syncer does the actual work for one pod. Workers calls it from one
// goroutine per pod UID.
//
// Concurrency contract: calls for one UID are serialized (never two at once,
// and in the order SyncPod* → SyncTerminatingPod → SyncTerminatedPod); calls
// for different UIDs run in parallel. Every method must be idempotent: it may
// be retried after an error, and after a heartlet restart it may be called
// for a pod whose containers already exist. The context is cancelled when
// the call's outcome no longer matters (the pod was killed while SyncPod ran,
// the termination grace period was shortened while SyncTerminatingPod ran, or
// Workers is shutting down); implementations should return promptly then.
type Syncer interface {
	// SyncPod makes the runtime match the desired pod: start what is
	// missing, restart what exited (per restart policy). It is called on
	// creation, on every change, on runtime events and periodically.
	// Returning Terminal moves the pod to terminating for good.
	SyncPod(ctx context.Context, t UpdateType, pod *v1.Pod) (SyncResult, error)
	// SyncTerminatingPod stops every container and the sandbox of the pod
	// within gracePeriod seconds. It returns nil only when nothing of the
	// pod runs any more.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, gracePeriod int64) error
	// SyncTerminatedPod releases what the stopped pod still holds (cgroups,
	// volumes, ...). It is retried until it returns nil.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod) error
}

// SyncResult is what a successful SyncPod reports.
type SyncResult struct {
	// Terminal is true when the pod has finished for good (every container
	// exited and the restart policy does not restart them): the pod moves to
	// terminating and is never started again under this UID.
	Terminal bool
	// RequeueAfter, when > 0, asks for another sync after that long (for
	// example when a crash-loop back-off expires). The periodic resync still
	// applies when it is sooner.
	RequeueAfter time.Duration
}

// UpdateType says why a pod is being updated or synced.
type UpdateType int

const (
	// UpdateCreate announces a new pod. SyncPod sees it on the first sync of
	// a UID (and on its retries until one succeeds).
	UpdateCreate UpdateType = iota
	// UpdateUpdate announces a change of a known pod's spec, labels or
	// annotations.
	UpdateUpdate
	// UpdateSync asks for a sync without a change of the desired pod
	// (runtime events, timers).
	UpdateSync
	// UpdateKill stops the pod: it was removed from its source, or it is an
	// orphan found in the runtime. The pod is forgotten once terminated.
	UpdateKill
)

// String returns the lower-case name of t.
func (t UpdateType) String() string {
	switch t {
	case UpdateCreate:
		return "create"
	case UpdateUpdate:
		return "update"
	case UpdateSync:
		return "sync"
	case UpdateKill:
		return "kill"
	}
	return fmt.Sprintf("UpdateType(%d)", int(t))
}

// Update is one change for Workers.Update.
type Update struct {
	// Type is what happened.
	Type UpdateType
	// Pod is the newest desired pod (UpdateCreate, UpdateUpdate), the pod to
	// stop (UpdateKill; for an orphan, a pod with at least UID, name and
	// namespace set), or only carries the UID (UpdateSync).
	Pod *v1.Pod
	// GracePeriod overrides the termination grace period in seconds for
	// UpdateKill. nil uses the pod's deletionGracePeriodSeconds or
	// spec.terminationGracePeriodSeconds (default 30). An override can only
	// shorten the grace period of a pod already terminating, never extend it.
	GracePeriod *int64
	// Keep, with UpdateKill, stops a pod that stays desired (an evicted
	// pod): its record is kept once terminated, so it is never started
	// again under its UID, until its source removes it (another
	// UpdateKill without Keep, or Forget).
	Keep bool
}

// State is where a pod is in its lifecycle.
type State int

const (
	// StateWaiting: the pod is desired but another UID with the same
	// namespace/name has not terminated yet; nothing was started for it.
	StateWaiting State = iota
	// StateSyncing: the pod should be running; SyncPod keeps it so.
	StateSyncing
	// StateTerminating: the pod is being stopped.
	StateTerminating
	// StateTerminated: nothing of the pod runs any more. It stays in this
	// state (and is never restarted) until its source removes it.
	StateTerminated
)

// String returns the lower-case name of s.
func (s State) String() string {
	switch s {
	case StateWaiting:
		return "waiting"
	case StateSyncing:
		return "syncing"
	case StateTerminating:
		return "terminating"
	case StateTerminated:
		return "terminated"
	}
	return fmt.Sprintf("State(%d)", int(s))
}
