package resize

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/podspec"
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
	// against a resize); pods in a terminal phase are left out.
	Pods func() []*v1.Pod
	// IsStatic tells a static pod; nil means none is.
	IsStatic func(*v1.Pod) bool
	// Recorder records events; nil records none.
	Recorder Recorder
	Clock    clock.Clock
}

// Manager decides and applies in-place resizes of the node's pods. Its
// methods are safe for concurrent use; calls for one pod are not
// concurrent (the pod's worker makes them).
type Manager struct {
	opts Options

	mu    sync.Mutex
	state map[types.UID]*podState
}

// podState is what the status reports of one pod's resize.
type podState struct {
	pending    *v1.PodCondition
	inProgress *v1.PodCondition
	// actuated is, by container name, what heartlet last set a running
	// container to, for runtimes that do not report a container's
	// resources (containerd 1.6).
	actuated map[string]actuated
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
	return &Manager{opts: opts, state: map[types.UID]*podState{}}
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
// them again at the allocation (Allocated).
func (m *Manager) Sync(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, linux LinuxResources) ([]string, error) {
	logger := klog.FromContext(ctx)
	alloc, ok := m.opts.Store.Get(pod.UID)
	if !ok {
		// Admitted: the pod runs with what it asks for.
		if err := m.opts.Store.Admit(pod); err != nil {
			return nil, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
		}
		return nil, nil
	}

	if full, added := withInitContainers(pod, alloc); added {
		if err := m.opts.Store.Set(pod.UID, full); err != nil {
			return nil, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
		}
		alloc = full
	}

	// What the running containers were allocated before this sync: what
	// they run with unless the runtime or an update says otherwise.
	before := alloc
	d := Decide(pod, alloc, m.inputs(pod))
	switch d.Outcome {
	case None:
		m.setPending(pod, nil)
	case Accepted:
		next := FromPod(pod)
		if err := m.opts.Store.Set(pod.UID, next); err != nil {
			return nil, fmt.Errorf("record the allocation of pod %s: %w", klog.KObj(pod), err)
		}
		alloc = next
		m.setPending(pod, nil)
		m.setInProgress(pod, &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: pod.Generation})
		logger.Info("Pod resize accepted", "generation", pod.Generation)
		m.event(pod, v1.EventTypeNormal, EventResizeStarted, "%s", summary("Pod resize started", WithAllocation(pod, alloc), pod.Generation, ""))
	case Deferred, Infeasible:
		cond := &v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: d.Outcome.String(), Message: d.Message, ObservedGeneration: pod.Generation}
		if m.setPending(pod, cond) {
			logger.Info("Pod resize pending", "reason", cond.Reason, "message", cond.Message)
			reason := EventResizeDeferred
			if d.Outcome == Infeasible {
				reason = EventResizeInfeasible
			}
			m.event(pod, v1.EventTypeWarning, reason, "%s", summary("Pod resize "+d.Outcome.String(), pod, pod.Generation, d.Message))
		}
	}

	allocPod := WithAllocation(pod, alloc)
	actual, ids := m.actual(allocPod, rs, alloc, before)
	plan := MakePlan(allocPod, actual, alloc)
	if plan.Empty() {
		if m.setInProgress(pod, nil) {
			logger.Info("Pod resize completed", "generation", pod.Generation)
			m.event(pod, v1.EventTypeNormal, EventResizeCompleted, "%s", summary("Pod resize completed", allocPod, pod.Generation, ""))
		}
		return nil, nil
	}
	if err := m.apply(ctx, allocPod, plan, actual, ids, linux); err != nil {
		cond := &v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, Reason: ReasonError, Message: err.Error(), ObservedGeneration: pod.Generation}
		if m.setInProgress(pod, cond) {
			m.event(pod, v1.EventTypeWarning, EventResizeError, "%s", summary("Pod resize error", allocPod, pod.Generation, err.Error()))
		}
		return nil, err
	}
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

// apply runs the plan's steps in order and stops at the first error. A
// container's step for one resource sends the container's resources with
// that resource at its allocation and the other as it runs (actual), so
// each write changes one resource, in the plan's order.
func (m *Manager) apply(ctx context.Context, pod *v1.Pod, plan Plan, actual Allocation, ids map[string]string, linux LinuxResources) error {
	logger := klog.FromContext(ctx)
	alloc := FromPod(pod)
	for _, st := range plan.Steps {
		switch st.Kind {
		case PodCgroup:
			if m.opts.Cgroups == nil {
				continue
			}
			if err := m.opts.Cgroups.ResizePod(ctx, pod, st.Resource); err != nil {
				return fmt.Errorf("resize the pod cgroup's %s: %w", st.Resource, err)
			}
		case ContainerUpdate:
			c := containerByName(pod, st.Container)
			if c == nil {
				continue
			}
			next := withResource(actual[c.Name], alloc[c.Name], st.Resource)
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
	if rs == nil {
		return out, ids
	}
	for _, c := range podspec.RunningContainers(pod) {
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

// inputs are the node's facts for a decision about pod.
func (m *Manager) inputs(pod *v1.Pod) Inputs {
	in := Inputs{OthersRequested: v1.ResourceList{}}
	if m.opts.Allocatable != nil {
		in.Allocatable = m.opts.Allocatable()
	}
	if m.opts.IsStatic != nil {
		in.Static = m.opts.IsStatic(pod)
	}
	if m.opts.Pods == nil {
		return in
	}
	for _, p := range m.opts.Pods() {
		if p.UID == pod.UID || podspec.IsTerminalPhase(p.Status.Phase) {
			continue
		}
		a, ok := m.opts.Store.Get(p.UID)
		if !ok {
			// Not admitted yet.
			continue
		}
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
	out := &status.Resize{Allocated: a}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.state[pod.UID]; st != nil {
		for name, a := range st.actuated {
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

// Forget drops what is kept in memory for the pod (the allocation record
// is the resource handler's to remove).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.state, uid)
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
		return changed
	}
	if *cur != nil && (*cur).Reason == c.Reason && (*cur).Message == c.Message {
		(*cur).ObservedGeneration = c.ObservedGeneration
		return false
	}
	c.LastTransitionTime = metav1.NewTime(m.opts.Clock.Now())
	c.LastProbeTime = c.LastTransitionTime
	*cur = c
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
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; podspec.IsSidecar(c) {
			s.InitContainers = append(s.InitContainers, ctr{c.Name, c.Resources})
		}
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
	for _, c := range podspec.RunningContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}
