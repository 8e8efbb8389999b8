package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Reasons of the kubelet-owned pod conditions.
const (
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
)

// kubeletConditions are the condition types the node agent owns; every
// other condition in the pod's status belongs to someone else and is kept.
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled:              true,
	v1.PodReady:                  true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReadyToStartContainers: true,
	v1.PodResizePending:          true,
	v1.PodResizeInProgress:       true,
}

// conditions builds the pod's conditions: foreign conditions from the
// pod's own status, a disruption condition from the previous status, then
// the kubelet-owned ones, with transition times kept for unchanged
// statuses.
func (c *computer) conditions(s *v1.PodStatus, all []v1.ContainerStatus) []v1.PodCondition {
	var out []v1.PodCondition
	for _, cond := range c.pod.Status.Conditions {
		if !kubeletConditions[cond.Type] {
			out = append(out, *cond.DeepCopy())
		}
	}
	if old := findCondition(c.old.Conditions, v1.DisruptionTarget); old != nil {
		out = replaceOrAppend(out, *old.DeepCopy())
	}
	spec := &c.pod.Spec
	owned := []v1.PodCondition{
		readyToStartContainersCondition(c.pod, c.rs),
		initializedCondition(spec, all, s.Phase),
		podReadyCondition(spec, out, all, s.Phase),
		containersReadyCondition(spec, all, s.Phase),
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	if c.in.Resize != nil {
		for _, rc := range c.in.Resize.Conditions {
			owned = append(owned, *rc.DeepCopy())
		}
	}
	for i := range owned {
		cond := &owned[i]
		if old := findCondition(c.old.Conditions, cond.Type); old != nil && old.Status == cond.Status && !old.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = old.LastTransitionTime
		} else if !c.in.Now.IsZero() {
			cond.LastTransitionTime = metav1.NewTime(c.in.Now)
		}
	}
	return append(out, owned...)
}

// readyToStartContainersCondition is True when the pod's sandbox exists,
// is the only ready one, matches the pod's network mode, and has an IP
// unless it uses the host network.
func readyToStartContainersCondition(pod *v1.Pod, rs *runtime.PodStatus) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if len(rs.Sandboxes) == 0 {
		return cond
	}
	ready := 0
	for _, sb := range rs.Sandboxes {
		if sb.State == runtime.SandboxReady {
			ready++
		}
	}
	sb := rs.Sandboxes[0]
	if ready > 1 || sb.State != runtime.SandboxReady || sb.HostNetwork != pod.Spec.HostNetwork {
		return cond
	}
	if !pod.Spec.HostNetwork && len(sb.IPs) == 0 {
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// containersReadyCondition is True when every app container and sidecar
// is ready.
func containersReadyCondition(spec *v1.PodSpec, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if all == nil {
		return v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: ReasonUnknownContainerStatuses}
	}
	var unknown, unready []string
	check := func(name string) {
		st := findStatus(all, name)
		switch {
		case st == nil:
			unknown = append(unknown, name)
		case !st.Ready:
			unready = append(unready, name)
		}
	}
	for i := range spec.InitContainers {
		if podspec.IsSidecar(&spec.InitContainers[i]) {
			check(spec.InitContainers[i].Name)
		}
	}
	for i := range spec.Containers {
		check(spec.Containers[i].Name)
	}
	if (phase == v1.PodSucceeded && len(unknown) == 0) || phase == v1.PodFailed {
		return terminalContainersReady(phase)
	}
	return containerListCondition(v1.ContainersReady, ReasonContainersNotReady, unknown, "unready", unready)
}

// containerListCondition is True when no container is listed, else False
// with reason and upstream's message naming the containers whose status
// is unknown and those in the state named by what.
func containerListCondition(typ v1.PodConditionType, reason string, unknown []string, what string, listed []string) v1.PodCondition {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(listed) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", what, listed))
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: typ, Status: v1.ConditionFalse, Reason: reason, Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: typ, Status: v1.ConditionTrue}
}

// terminalContainersReady is the ContainersReady condition of a pod in a
// terminal phase.
func terminalContainersReady(phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	switch phase {
	case v1.PodFailed:
		cond.Reason = ReasonPodFailed
	case v1.PodSucceeded:
		cond.Reason = ReasonPodCompleted
	}
	return cond
}

// podReadyCondition is ContainersReady further gated by the pod's
// readiness gates, looked up in conds.
func podReadyCondition(spec *v1.PodSpec, conds []v1.PodCondition, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(spec, all, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, rg := range spec.ReadinessGates {
		c := findCondition(conds, rg.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(rg.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(rg.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{
			Type:    v1.PodReady,
			Status:  v1.ConditionFalse,
			Reason:  ReasonReadinessGatesNotReady,
			Message: strings.Join(msgs, ", "),
		}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// initializedCondition is True once every regular init container has
// completed and every sidecar has started, or once an app container has
// run.
func initializedCondition(spec *v1.PodSpec, all []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	if all == nil && len(spec.InitContainers) > 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: ReasonUnknownContainerStatuses}
	}
	var unknown, incomplete []string
	for i := range spec.InitContainers {
		ctr := &spec.InitContainers[i]
		st := findStatus(all, ctr.Name)
		if st == nil {
			unknown = append(unknown, ctr.Name)
			continue
		}
		if podspec.IsSidecar(ctr) {
			if st.Started == nil || !*st.Started {
				incomplete = append(incomplete, ctr.Name)
			}
		} else if !st.Ready {
			incomplete = append(incomplete, ctr.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue, Reason: ReasonPodCompleted}
	}
	if anyAppContainerRan(spec, all) {
		return v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	}
	return containerListCondition(v1.PodInitialized, ReasonContainersNotInitialized, unknown, "incomplete", incomplete)
}

// anyAppContainerRan reports whether an app container is running or has
// terminated, which means initialization completed at some point.
func anyAppContainerRan(spec *v1.PodSpec, all []v1.ContainerStatus) bool {
	for i := range spec.Containers {
		if st := findStatus(all, spec.Containers[i].Name); st != nil && (st.State.Running != nil || st.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// findStatus returns the named container's status, or nil.
func findStatus(all []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range all {
		if all[i].Name == name {
			return &all[i]
		}
	}
	return nil
}

// findCondition returns the condition of type t, or nil.
func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// replaceOrAppend sets cond in conds, replacing one of the same type.
func replaceOrAppend(conds []v1.PodCondition, cond v1.PodCondition) []v1.PodCondition {
	if c := findCondition(conds, cond.Type); c != nil {
		*c = cond
		return conds
	}
	return append(conds, cond)
}
