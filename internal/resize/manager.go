package resize

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/qos"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/status"
)

// Event reasons, as upstream.
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeError      = "ResizeError"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
)

// ReasonError is the reason of a PodResizeInProgress condition whose
// last attempt to apply the resize failed, as upstream.
const ReasonError = "Error"

// PodCgroups resizes pod cgroups (cgroups.Manager).
//
// Contract: ResizePod writes the pod cgroup's values of one resource (cpu
// or memory) from the pod's container resources, leaving the other's; the
// pod cgroup exists. Safe for concurrent use for different pods.
type PodCgroups interface {
	ResizePod(ctx context.Context, pod *v1.Pod, r v1.ResourceName) error
}

// Containers changes running containers' resources (runtime.Runtime).
//
// Contract: UpdateContainerResources applies the Linux resources to the
// running container synchronously; safe for concurrent use.
type Containers interface {
	UpdateContainerResources(ctx context.Context, id string, r *runtimeapi.LinuxContainerResources) error
}

// Recorder records Kubernetes events.
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Options are a Manager's collaborators.
type Options struct {
	// Store is the allocation record; required.
	Store *Store
	// Cgroups resizes pod cgroups; nil when pod cgroups are not managed.
	Cgroups PodCgroups
	// Containers updates running containers; required.
	Containers Containers
	// Allocatable is the node's allocatable resources; nil means
	// unknown, and every resize that asks for more is deferred.
	Allocatable func() v1.ResourceList
	// Pods lists the node's pods (the other pods' allocations count
	// against a resize); pods in a terminal phase are left out. The
	// manager only reads them.
	Pods func() []*v1.Pod
	// IsStatic tells a static pod; nil means none is.
	IsStatic func(*v1.Pod) bool
	// Recorder records events; nil records none.
	Recorder Recorder
	// Resync asks the pod's worker for a sync (after a retry accepted its
	// deferred resize or changed its condition); it must not block. Nil
	// leaves the pod to its next sync.
	Resync func(types.UID)
	// Memory reads memory usage before a memory limit is lowered; nil
	// lowers it unchecked.
	Memory MemoryUsage
	// Metrics records the resize metrics; nil records none.
	Metrics Metrics
	Clock   clock.Clock
}

// MemoryUsage reads the memory usage of a pod's cgroup and of a running
// container's (cgroups.Manager).
//
// Contract: both return the bytes the cgroup uses now, or an error when
// they cannot be read (the cgroup does not exist, for example); safe for
// concurrent use.
type MemoryUsage interface {
	PodMemoryUsage(ctx context.Context, pod *v1.Pod) (int64, error)
	ContainerMemoryUsage(ctx context.Context, pod *v1.Pod, containerID string) (int64, error)
}

// Manager decides and applies in-place resizes of the node's pods. Its
// methods are safe for concurrent use; calls for one pod are not
// concurrent (the pod's worker makes them).
type Manager struct {
	opts Options

	// allocMu serializes the decisions, so that two resizes never take
	// the same free resources; it is taken before mu.
	allocMu sync.Mutex
	// pending are the pods whose resize is deferred, in the order of
	// the last retry; guarded by allocMu.
	pending []types.UID

	mu    sync.Mutex
	state map[types.UID]*podState
	// gone are the pods Forget named, which hold nothing any more.
	gone map[types.UID]bool

	// terminated wakes Run to retry after a pod stopped; retried tells
	// Run that a retry ran. Both hold one value and are never blocked on.
	terminated chan struct{}
	retried    chan struct{}
}

// podState is what the status reports of one pod's resize.
type podState struct {
	pending    *v1.PodCondition
	inProgress *v1.PodCondition
	// actuated is, by container name, what heartlet last set a running
	// container to, for runtimes that do not report a container's
	// resources (containerd 1.6).
	actuated map[string]actuated
	// desired is what the pod's spec asked for at its last sync, to count
	// each requested change once.
	desired Allocation
	// staleCgroup is set when applying a resize failed: the containers
	// may have their new limits while the pod cgroup has its old ones, so
	// the next attempt writes the pod cgroup again.
	staleCgroup bool
}

// actuated is what a container (by ID) was last set to.
type actuated struct {
	id        string
	resources v1.ResourceRequirements
}

// NewManager returns a Manager.
func NewManager(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		opts.Metrics = noMetrics{}
	}
	return &Manager{
		opts: opts, state: map[types.UID]*podState{}, gone: map[types.UID]bool{},
		terminated: make(chan struct{}, 1), retried: make(chan struct{}, 1),
	}
}

// Allocated returns pod with its resizable containers' resources at their
// allocation: the pod the node runs, where the API's spec may ask for a
// resize not applied yet. A pod without an allocation is returned as is.
func (m *Manager) Allocated(pod *v1.Pod) *v1.Pod {
	a, ok := m.opts.Store.Get(pod.UID)
	if !ok {
		return pod
	}
	if FromPod(pod).Equal(a) {
		return pod
	}
	return WithAllocation(pod, a)
}

// LinuxResources gives a container's CRI Linux resources in its pod.
type LinuxResources = func(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources

// Sync runs on every sync of a pod that is not terminal, before its
// containers are started. It records the allocation of a pod seen for the
// first time; decides a resize the pod's spec asks for (Decide); and
// applies the allocation to the pod cgroup and the running containers of
// rs in the order of MakePlan, each container with the resources linux
// gives. It returns the containers to restart for the resize (their
// resizePolicy is RestartContainer): the caller stops them and starts
// them again at the allocation (Allocated). An accepted resize that
// lowers the pod's requests retries the deferred resizes of other pods.
func (m *Manager) Sync(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, linux LinuxResources) ([]string, error) {
	logger := klog.FromContext(ctx)
	alloc, ok := m.opts.Store.Get(pod.UID)
	var err error
	if !ok {
		// Admitted: the pod runs with what it asks for.
		next := FromPod(pod)
		if err := m.opts.Store.Set(pod.UID, next); err != nil {
			return nil, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
		}
		m.noteDesired(pod.UID, next, next)
		return nil, nil
	}
	if alloc, err = m.adopt(pod, alloc); err != nil {
		return nil, err
	}
	m.noteDesired(pod.UID, alloc, FromPod(pod))

	// What the running containers were allocated before this sync: what
	// they run with unless the runtime or an update says otherwise.
	before := alloc
	m.allocMu.Lock()
	out, next, err := m.allocateLocked(ctx, pod, TriggerPodUpdated)
	m.allocMu.Unlock()
	if err != nil {
		return nil, err
	}
	alloc = next
	lowered := out == Accepted && lowersRequests(pod, before, alloc)

	allocPod := WithAllocation(pod, alloc)
	actual, ids := m.actual(allocPod, rs, alloc, before)
	plan := MakePlan(allocPod, actual, alloc)
	if m.isStale(pod.UID) {
		plan = withPodCgroupSteps(plan)
	}
	if plan.Empty() {
		if m.setInProgress(pod, nil) {
			logger.Info("Pod resize completed", "generation", pod.Generation)
			m.event(pod, v1.EventTypeNormal, EventResizeCompleted, "%s", summary("Pod resize completed", allocPod, pod.Generation, ""))
		}
		m.retryIfLowered(ctx, lowered)
		return nil, nil
	}
	start := m.opts.Clock.Now()
	err = m.apply(ctx, allocPod, plan, actual, ids, linux)
	m.opts.Metrics.ResizeDuration(m.opts.Clock.Since(start), err == nil)
	m.setStale(pod.UID, err != nil)
	if err != nil {
		cond := &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: ReasonError, Message: err.Error(), ObservedGeneration: pod.Generation}
		if m.setInProgress(pod, cond) {
			m.event(pod, v1.EventTypeWarning, EventResizeError, "%s", summary("Pod resize error", allocPod, pod.Generation, err.Error()))
		}
		return nil, err
	}
	m.retryIfLowered(ctx, lowered)
	if len(plan.Restart) > 0 {
		m.setInProgress(pod, &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: pod.Generation})
		return plan.Restart, nil
	}
	// Every write succeeded (CRI updates are synchronous): the containers
	// run at their allocation now.
	if m.setInProgress(pod, nil) {
		logger.Info("Pod resize completed", "generation", pod.Generation)
		m.event(pod, v1.EventTypeNormal, EventResizeCompleted, "%s", summary("Pod resize completed", allocPod, pod.Generation, ""))
	}
	return nil, nil
}

// withPodCgroupSteps is plan with a write of the pod cgroup's memory and
// cpu values at the end where it has none: after a failed attempt the
// containers may run at their allocation while the pod cgroup does not.
func withPodCgroupSteps(plan Plan) Plan {
	for _, r := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if !slices.ContainsFunc(plan.Steps, func(s Step) bool { return s.Kind == PodCgroup && s.Resource == r }) {
			plan.Steps = append(plan.Steps, Step{Kind: PodCgroup, Resource: r})
		}
	}
	return plan
}

func (m *Manager) isStale(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state[uid]
	return st != nil && st.staleCgroup
}

func (m *Manager) setStale(uid types.UID, stale bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.state[uid]; st != nil {
		st.staleCgroup = stale
	}
}

// adopt adds to a pod's allocation what the pod asks for of its parts
// that the record lacks: a record written before init containers and
// pod-level resources were resizable lacks them, and those parts run at
// their spec, so adopting it is no resize.
func (m *Manager) adopt(pod *v1.Pod, alloc Allocation) (Allocation, error) {
	var next Allocation
	for name, r := range FromPod(pod) {
		if _, ok := alloc[name]; ok {
			continue
		}
		if next == nil {
			next = maps.Clone(alloc)
		}
		next[name] = r
	}
	if next == nil {
		return alloc, nil
	}
	if err := m.opts.Store.Set(pod.UID, next); err != nil {
		return alloc, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
	}
	return next, nil
}

// retryIfLowered retries the deferred resizes after a resize that lowered
// a pod's requests.
func (m *Manager) retryIfLowered(ctx context.Context, lowered bool) {
	if lowered {
		m.RetryPendingResizes(ctx, TriggerPodResized)
	}
}

// allocateLocked decides the resize pod asks for and records its outcome:
// the new allocation of an accepted resize, the pod's resize conditions,
// events, metrics and the queue of deferred resizes. It returns the
// outcome and the pod's allocation after it. allocMu is held; the pod has
// an allocation.
func (m *Manager) allocateLocked(ctx context.Context, pod *v1.Pod, trigger string) (Outcome, Allocation, error) {
	logger := klog.FromContext(ctx)
	alloc, _ := m.opts.Store.Get(pod.UID)
	wasDeferred := false
	if c := m.pendingCondition(pod.UID); c != nil && c.Reason == v1.PodReasonDeferred {
		wasDeferred = true
	}
	// A pod that asks for its allocation is no resize, whatever the other
	// pods hold: only a resize reads the node's pods, so a sync without
	// one costs the same on a node of 1 or of 100 pods.
	var in Inputs
	if !FromPod(pod).Equal(alloc) {
		in = m.inputs(pod)
	}
	d := Decide(pod, alloc, in)
	switch d.Outcome {
	case None:
		m.dropPending(pod.UID)
		m.setPending(pod, nil)
	case Accepted:
		next := FromPod(pod)
		if err := m.opts.Store.Set(pod.UID, next); err != nil {
			return d.Outcome, alloc, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
		}
		alloc = next
		m.dropPending(pod.UID)
		m.setPending(pod, nil)
		m.setInProgress(pod, &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: pod.Generation})
		if wasDeferred {
			m.opts.Metrics.DeferredAccepted(trigger)
		}
		logger.Info("Pod resize accepted", "pod", klog.KObj(pod), "podUID", pod.UID, "generation", pod.Generation, "trigger", trigger)
		m.event(pod, v1.EventTypeNormal, EventResizeStarted, "%s", summary("Pod resize started", WithAllocation(pod, alloc), pod.Generation, ""))
	case Deferred, Infeasible:
		if d.Outcome == Deferred {
			m.pushPending(pod.UID)
		} else {
			m.dropPending(pod.UID)
		}
		cond := &v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: d.Outcome.String(), Message: d.Message, ObservedGeneration: pod.Generation}
		if m.setPending(pod, cond) {
			logger.Info("Pod resize pending", "pod", klog.KObj(pod), "podUID", pod.UID, "reason", cond.Reason, "message", cond.Message)
			reason := EventResizeDeferred
			if d.Outcome == Infeasible {
				reason = EventResizeInfeasible
				if d.Detail != "" {
					m.opts.Metrics.InfeasibleResize(d.Detail)
				}
			}
			m.event(pod, v1.EventTypeWarning, reason, "%s", summary("Pod resize "+d.Outcome.String(), pod, pod.Generation, d.Message))
		}
	}
	return d.Outcome, alloc, nil
}

// noteDesired counts the changes the pod's spec asks for since its last
// sync (at first: since its allocation alloc).
func (m *Manager) noteDesired(uid types.UID, alloc, desired Allocation) {
	m.mu.Lock()
	st := m.state[uid]
	if st == nil {
		st = &podState{}
		m.state[uid] = st
	}
	last := st.desired
	if last == nil {
		last = alloc
	}
	st.desired = desired
	m.mu.Unlock()
	for _, c := range Changes(last, desired) {
		m.opts.Metrics.RequestedResize(c.Resource, c.Requirement, c.Operation)
	}
}

// pendingCondition is a copy of the pod's PodResizePending condition, or
// nil.
func (m *Manager) pendingCondition(uid types.UID) *v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.state[uid]; st != nil && st.pending != nil {
		return st.pending.DeepCopy()
	}
	return nil
}

// apply runs the plan's steps in order and stops at the first error. A
// container's step for one resource sends the container's resources with
// that resource at its allocation and the other as it runs (actual), so
// each write changes one resource, in the plan's order.
func (m *Manager) apply(ctx context.Context, pod *v1.Pod, plan Plan, actual Allocation, ids map[string]string, linux LinuxResources) error {
	logger := klog.FromContext(ctx)
	alloc := FromPod(pod)
	// The pod cgroup's memory limit before this attempt, for the usage
	// check of its step.
	_, podBefore := podTotals(WithAllocation(pod, actual))
	for _, st := range plan.Steps {
		switch st.Kind {
		case PodCgroup:
			if m.opts.Cgroups == nil {
				continue
			}
			if st.Resource == v1.ResourceMemory {
				if err := m.checkPodMemory(ctx, pod, podBefore); err != nil {
					return err
				}
			}
			if err := m.opts.Cgroups.ResizePod(ctx, pod, st.Resource); err != nil {
				return fmt.Errorf("resize the pod cgroup's %s: %w", st.Resource, err)
			}
			if want, ok := alloc[PodLevel]; ok {
				next := withResource(actual[PodLevel], want, st.Resource)
				actual[PodLevel] = next
				m.setActuated(pod.UID, PodLevel, "", next)
			}
		case ContainerUpdate:
			c := containerByName(pod, st.Container)
			if c == nil {
				continue
			}
			next := withResource(actual[c.Name], alloc[c.Name], st.Resource)
			if st.Resource == v1.ResourceMemory {
				if err := m.checkContainerMemory(ctx, pod, c.Name, ids[c.Name], actual[c.Name], next); err != nil {
					return err
				}
			}
			cc := c.DeepCopy()
			cc.Resources = next
			logger.V(2).Info("Resizing container", "container", c.Name, "resource", st.Resource)
			if err := m.opts.Containers.UpdateContainerResources(ctx, ids[c.Name], linux(pod, cc)); err != nil {
				return fmt.Errorf("resize container %s: %w", c.Name, err)
			}
			actual[c.Name] = next
			m.setActuated(pod.UID, c.Name, ids[c.Name], next)
		}
	}
	return nil
}

// checkContainerMemory refuses to lower a container's memory limit (from
// cur to next) below what it uses now, as upstream does on a best-effort
// basis before it lowers one: cgroup v1 would refuse it anyway, cgroup v2
// would OOM-kill the container. A usage that cannot be read leaves the
// check to the kernel.
func (m *Manager) checkContainerMemory(ctx context.Context, pod *v1.Pod, name, id string, cur, next v1.ResourceRequirements) error {
	limit, ok := next.Limits[v1.ResourceMemory]
	if m.opts.Memory == nil || !ok || cmpLimit(next.Limits, cur.Limits, v1.ResourceMemory) >= 0 {
		return nil
	}
	usage, err := m.opts.Memory.ContainerMemoryUsage(ctx, pod, id)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot read a container's memory usage before lowering its limit", "pod", klog.KObj(pod), "podUID", pod.UID, "container", name, "err", err)
		return nil
	}
	if usage >= limit.Value() {
		return fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", name, limit.Value(), usage)
	}
	return nil
}

// checkPodMemory is checkContainerMemory for the pod cgroup, whose limit
// goes from the totals cur to those of pod (at its allocation).
func (m *Manager) checkPodMemory(ctx context.Context, pod *v1.Pod, cur v1.ResourceList) error {
	if m.opts.Memory == nil {
		return nil
	}
	_, next := podTotals(pod)
	limit, ok := next[v1.ResourceMemory]
	if !ok || cmpLimit(next, cur, v1.ResourceMemory) >= 0 {
		return nil
	}
	usage, err := m.opts.Memory.PodMemoryUsage(ctx, pod)
	if err != nil {
		return fmt.Errorf("read the memory usage of pod %s: %w", pod.Name, err)
	}
	if usage >= limit.Value() {
		// Upstream's message, capitalized as it is.
		//lint:ignore ST1005 the condition's message is upstream's word for word
		return fmt.Errorf("Aborting attempt to set pod memory limit less than current memory usage for pod %s", pod.Name)
	}
	return nil
}

// withResource is cur with the request and limit of r taken from want.
func withResource(cur, want v1.ResourceRequirements, r v1.ResourceName) v1.ResourceRequirements {
	out := *cur.DeepCopy()
	for _, pair := range []struct {
		dst *v1.ResourceList
		src v1.ResourceList
	}{{&out.Requests, want.Requests}, {&out.Limits, want.Limits}} {
		q, ok := pair.src[r]
		if !ok {
			delete(*pair.dst, r)
			continue
		}
		if *pair.dst == nil {
			*pair.dst = v1.ResourceList{}
		}
		(*pair.dst)[r] = q.DeepCopy()
	}
	return out
}

// actual is the resources the running containers of rs run with, and
// their IDs: as their runtime reports them (status.ActualResources); for
// a runtime that reports none, what heartlet last set the container to,
// else what it was allocated before (before).
func (m *Manager) actual(pod *v1.Pod, rs *runtime.PodStatus, alloc, before Allocation) (Allocation, map[string]string) {
	out, ids := Allocation{}, map[string]string{}
	// The pod cgroup runs the pod-level resources heartlet last wrote,
	// else those allocated before.
	if _, ok := alloc[PodLevel]; ok {
		if a, ok := m.getActuated(pod.UID, PodLevel); ok {
			out[PodLevel] = a.resources
		} else if b, ok := before[PodLevel]; ok {
			out[PodLevel] = *b.DeepCopy()
			m.setActuated(pod.UID, PodLevel, "", b)
		}
	}
	if rs == nil {
		return out, ids
	}
	for _, c := range resizable(pod) {
		rec := rs.FindContainer(c.Name)
		if rec == nil || rec.State != runtime.ContainerRunning {
			continue
		}
		ids[c.Name] = rec.ID
		if rec.Resources != nil {
			out[c.Name] = *status.ActualResources(alloc[c.Name], rec.Resources)
			continue
		}
		if a, ok := m.getActuated(pod.UID, c.Name); ok && a.id == rec.ID {
			out[c.Name] = a.resources
			continue
		}
		r, ok := before[c.Name]
		if !ok {
			r = alloc[c.Name]
		}
		out[c.Name] = *r.DeepCopy()
		m.setActuated(pod.UID, c.Name, rec.ID, r)
	}
	return out, ids
}

func (m *Manager) getActuated(uid types.UID, name string) (actuated, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state[uid]
	if st == nil {
		return actuated{}, false
	}
	a, ok := st.actuated[name]
	return a, ok
}

func (m *Manager) setActuated(uid types.UID, name, id string, r v1.ResourceRequirements) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state[uid]
	if st == nil {
		st = &podState{}
		m.state[uid] = st
	}
	if st.actuated == nil {
		st.actuated = map[string]actuated{}
	}
	st.actuated[name] = actuated{id: id, resources: *r.DeepCopy()}
}

// inputs are the node's facts for a decision about pod: the other active
// pods count at their allocations.
func (m *Manager) inputs(pod *v1.Pod) Inputs {
	in := Inputs{OthersRequested: v1.ResourceList{}}
	if m.opts.Allocatable != nil {
		in.Allocatable = m.opts.Allocatable()
	}
	if m.opts.IsStatic != nil {
		in.Static = m.opts.IsStatic(pod)
	}
	for uid, p := range m.activePods() {
		if uid == pod.UID {
			continue
		}
		a, _ := m.opts.Store.Get(uid)
		reqs, _ := qos.PodRequestsAndLimits(WithAllocation(p, a))
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			q := in.OthersRequested[r]
			q.Add(reqs[r])
			in.OthersRequested[r] = q
		}
	}
	return in
}

// Status is the resize part of the pod's status: the allocation and the
// resize conditions. Nil for a pod without an allocation.
func (m *Manager) Status(pod *v1.Pod) *status.Resize {
	a, ok := m.opts.Store.Get(pod.UID)
	if !ok {
		return nil
	}
	out := &status.Resize{Allocated: map[string]v1.ResourceRequirements{}}
	for name, r := range a {
		if name == PodLevel {
			out.PodAllocated = r.DeepCopy()
			out.PodActual = r.DeepCopy()
			continue
		}
		out.Allocated[name] = r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.state[pod.UID]; st != nil {
		for name, a := range st.actuated {
			if name == PodLevel {
				out.PodActual = a.resources.DeepCopy()
				continue
			}
			if out.Actuated == nil {
				out.Actuated = map[string]v1.ResourceRequirements{}
			}
			out.Actuated[name] = *a.resources.DeepCopy()
		}
		for _, c := range []*v1.PodCondition{st.pending, st.inProgress} {
			if c != nil {
				out.Conditions = append(out.Conditions, *c.DeepCopy())
			}
		}
	}
	return out
}

// Forget drops what is kept in memory for a pod that stopped for good
// (the allocation record is the resource handler's to remove): it no
// longer counts against other pods' resizes, and Run retries the deferred
// ones.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.state, uid)
	m.gone[uid] = true
	m.updateGaugesLocked()
	m.mu.Unlock()
	select {
	case m.terminated <- struct{}{}:
	default:
	}
}

// updateGaugesLocked sets the pending and in-progress gauges from the
// pods' conditions; mu is held.
func (m *Manager) updateGaugesLocked() {
	var deferred, infeasible, inProgress int
	for _, st := range m.state {
		if st.pending != nil {
			if st.pending.Reason == v1.PodReasonInfeasible {
				infeasible++
			} else {
				deferred++
			}
		}
		if st.inProgress != nil {
			inProgress++
		}
	}
	m.opts.Metrics.SetPending(deferred, infeasible)
	m.opts.Metrics.SetInProgress(inProgress)
}

// setPending sets (nil: clears) the pod's PodResizePending condition and
// reports whether its reason or message changed.
func (m *Manager) setPending(pod *v1.Pod, c *v1.PodCondition) bool {
	return m.set(pod, c, func(st *podState) **v1.PodCondition { return &st.pending })
}

// setInProgress is setPending for PodResizeInProgress.
func (m *Manager) setInProgress(pod *v1.Pod, c *v1.PodCondition) bool {
	return m.set(pod, c, func(st *podState) **v1.PodCondition { return &st.inProgress })
}

func (m *Manager) set(pod *v1.Pod, c *v1.PodCondition, field func(*podState) **v1.PodCondition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.state[pod.UID]
	if st == nil {
		if c == nil {
			return false
		}
		st = &podState{}
		m.state[pod.UID] = st
	}
	cur := field(st)
	if c == nil {
		changed := *cur != nil
		*cur = nil
		if changed {
			m.updateGaugesLocked()
		}
		return changed
	}
	if *cur != nil && (*cur).Reason == c.Reason && (*cur).Message == c.Message {
		(*cur).ObservedGeneration = c.ObservedGeneration
		return false
	}
	c.LastTransitionTime = metav1.NewTime(m.opts.Clock.Now())
	c.LastProbeTime = c.LastTransitionTime
	*cur = c
	m.updateGaugesLocked()
	return true
}

func (m *Manager) event(pod *v1.Pod, eventtype, reason, format string, args ...any) {
	if m.opts.Recorder != nil {
		m.opts.Recorder.Eventf(pod, eventtype, reason, format, args...)
	}
}

// summary is an event message: prefix, then the containers' resources,
// the generation and an error as JSON.
func summary(prefix string, pod *v1.Pod, generation int64, errMsg string) string {
	type ctr struct {
		Name      string                  `json:"name"`
		Resources v1.ResourceRequirements `json:"resources,omitempty"`
	}
	var s struct {
		InitContainers []ctr  `json:"initContainers,omitempty"`
		Containers     []ctr  `json:"containers,omitempty"`
		Generation     int64  `json:"generation"`
		Error          string `json:"error,omitempty"`
	}
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, ctr{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, ctr{c.Name, c.Resources})
	}
	s.Generation, s.Error = generation, errMsg
	b, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}

func containerByName(pod *v1.Pod, name string) *v1.Container {
	for _, c := range resizable(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}
