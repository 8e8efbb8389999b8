package cgroups

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The node allocatable enforcement's event reasons, upstream's.
const (
	ReasonNodeAllocatableEnforced          = "NodeAllocatableEnforced"
	ReasonFailedNodeAllocatableEnforcement = "FailedNodeAllocatableEnforcement"
)

// DefaultEnforceRetry is how often a refused kubepods limit is tried
// again, upstream's period.
const DefaultEnforceRetry = time.Minute

// RetryKubepodsLimit writes the kubepods limits again unless they are
// already in place, and returns the outcome: nil once they are. EnsureQOS
// must have run.
func (m *Manager) RetryKubepodsLimit(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.limitKubepods(ctx)
	return m.allocErr
}

// KubepodsLimitErr is the last failure to limit kubepods, nil once it is
// limited.
func (m *Manager) KubepodsLimitErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allocErr
}

// KubepodsPath is the cgroup path of kubepods.
func (m *Manager) KubepodsPath() string { return m.qosPath(v1.PodQOSGuaranteed) }

// ReservedCgroups are the reserved cgroups EnsureQOS limits.
func (m *Manager) ReservedCgroups() []ReservedCgroup { return m.reserved }

// KubepodsLimiter is the part of the Manager the Enforcer drives.
//
// Contract: RetryKubepodsLimit is safe to call repeatedly and
// concurrently with pod cgroup changes, and returns nil once the limits
// are in place; the others only read.
type KubepodsLimiter interface {
	RetryKubepodsLimit(ctx context.Context) error
	KubepodsPath() string
	ReservedCgroups() []ReservedCgroup
}

// Recorder records events; it must not block.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// EnforcerOptions configure an Enforcer.
type EnforcerOptions struct {
	Cgroups KubepodsLimiter
	// Recorder gets the node's events; nil records none (standalone).
	Recorder Recorder
	// Node is the object the events are about.
	Node  *v1.ObjectReference
	Clock clock.Clock
	// Retry is the period of the retries; default DefaultEnforceRetry.
	Retry time.Duration
}

// Enforcer reports the node allocatable enforcement as upstream does, on
// the Node: a NodeAllocatableEnforced event for each reserved cgroup
// limited at start, then, for kubepods, a NodeAllocatableEnforced event
// once its limits are in place or a FailedNodeAllocatableEnforcement
// warning for each failed attempt, tried again every Retry (memory in use
// above a lowered limit is refused by the kernel until evictions make
// room). Pod cgroup creation tries it too, so the limit may hold before
// the next period.
type Enforcer struct {
	opts EnforcerOptions
}

// NewEnforcer returns an Enforcer; it starts nothing.
func NewEnforcer(opts EnforcerOptions) *Enforcer {
	if opts.Retry <= 0 {
		opts.Retry = DefaultEnforceRetry
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Enforcer{opts: opts}
}

// Run reports the enforcement and retries kubepods' limits until they
// hold or ctx is done. It returns nil in both cases.
func (e *Enforcer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for _, rc := range e.opts.Cgroups.ReservedCgroups() {
		e.event(v1.EventTypeNormal, ReasonNodeAllocatableEnforced, "Updated limits on %s cgroup %s", reservedName(rc.Name), rc.Path)
	}
	path := e.opts.Cgroups.KubepodsPath()
	for {
		err := e.opts.Cgroups.RetryKubepodsLimit(ctx)
		if err == nil {
			e.event(v1.EventTypeNormal, ReasonNodeAllocatableEnforced, "Updated Node Allocatable limit across pods")
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		e.event(v1.EventTypeWarning, ReasonFailedNodeAllocatableEnforcement, "%s", fmt.Sprintf("Failed to update Node Allocatable Limits %q: %v", path, err))
		logger.V(2).Info("Node allocatable not enforced yet; retrying", "path", path, "retry", e.opts.Retry)
		select {
		case <-ctx.Done():
			return nil
		case <-e.opts.Clock.After(e.opts.Retry):
		}
	}
}

func (e *Enforcer) event(eventtype, reason, format string, args ...any) {
	if e.opts.Recorder != nil {
		e.opts.Recorder.Eventf(e.opts.Node, eventtype, reason, format, args...)
	}
}

// reservedName is an enforcement entry as upstream's messages word it:
// "system-reserved-compressible" is "system reserved".
func reservedName(entry string) string {
	return strings.ReplaceAll(strings.TrimSuffix(entry, "-compressible"), "-", " ")
}
