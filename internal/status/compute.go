// Package status turns the runtime's view of a pod into the pod's API
// status (phase, conditions, container statuses, IPs) and keeps the one
// authoritative, versioned copy of every pod's status that the read-only
// server, and later the API server syncer, report.
//
// The rules follow the upstream kubelet's observable behaviour: the phase
// from container states and the restart policy, the kubelet-owned
// conditions with their reasons and messages, waiting reasons for
// containers that have not run, and terminal phases that never go back.
package status

import (
	"net/netip"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/qos"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Waiting reasons this package sets itself.
const (
	// ReasonContainerCreating is the waiting reason of an app container
	// that has no runtime record yet in a pod without init containers.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing is the waiting reason of a container that has
	// no runtime record yet in a pod with init containers.
	ReasonPodInitializing = "PodInitializing"
)

// Terminated reasons.
const (
	// ReasonCompleted is the reason of a container that exited with 0 when
	// the runtime gave none.
	ReasonCompleted = "Completed"
	// ReasonError is the reason of a container that exited non-zero when
	// the runtime gave none.
	ReasonError = "Error"
	// ReasonContainerStatusUnknown marks a container that was running and
	// then vanished from the runtime without an exit status.
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
)

// DefaultRuntimeName prefixes container IDs when Inputs.RuntimeName is
// empty.
const DefaultRuntimeName = "containerd"

// exitCodeUnknown is reported for containers that vanished while running.
const exitCodeUnknown = 137

// Waiting is why a container is not running, as decided by the sync loop
// (ContainerCreating, CrashLoopBackOff, ErrImagePull, ImagePullBackOff,
// CreateContainerError, ...).
type Waiting struct {
	Reason  string
	Message string
}

// Inputs are the facts Compute needs besides the pod and its runtime view.
type Inputs struct {
	// NodeIPs are the node's addresses, primary first. They become the
	// pod's hostIP/hostIPs, and the podIP/podIPs of host-network pods.
	// The family of the first one decides which pod IP is primary.
	NodeIPs []string
	// Now is the current time: the start time of a pod seen for the first
	// time and the transition time of a condition that changed.
	Now time.Time
	// Waiting holds, by container name, why the sync loop did not start a
	// container that should run. It only applies to containers that are
	// not running and would be restarted.
	Waiting map[string]Waiting
	// Old is the previously computed status; nil means the pod's own
	// status. It keeps start time, transition times, the phase's reason,
	// terminal phases and the last state of containers the runtime lost.
	Old *v1.PodStatus
	// Terminating is true once the pod is being stopped for good, so its
	// containers will not be restarted regardless of the restart policy.
	// Static pods keep the restart-policy phase, as upstream does.
	Terminating bool
	// Ready is the readiness of started containers by name. A container
	// absent from the map is ready when started.
	Ready map[string]bool
	// Started is the startup result of running containers by name. A
	// running container absent from the map has started.
	Started map[string]bool
	// RuntimeName prefixes container IDs ("<name>://<id>");
	// DefaultRuntimeName when empty.
	RuntimeName string
	// Resize is the pod's in-place resize state; nil reports none.
	Resize *Resize
}

// Resize is what the status reports of in-place resize.
type Resize struct {
	// Allocated is the resources allocated to each resizable container
	// (app containers and sidecars), by name: their requests are the
	// status's allocatedResources, and with the values the runtime
	// reports, its resources.
	Allocated map[string]v1.ResourceRequirements
	// Actuated is what heartlet last set each running container's
	// resources to, by name: its resources when the runtime reports none.
	Actuated map[string]v1.ResourceRequirements
	// PodAllocated is the pod-level resources (spec.resources) allocated
	// to the pod, nil without: its requests are the status's
	// allocatedResources. PodActual is those the pod cgroup runs with:
	// the status's resources.
	PodAllocated, PodActual *v1.ResourceRequirements
	// Conditions are the pod's PodResizePending and PodResizeInProgress
	// conditions, if any.
	Conditions []v1.PodCondition
}

// Compute returns the API status of pod from the runtime's view rs (nil
// means nothing exists) and the inputs. It does not modify its arguments.
func Compute(pod *v1.Pod, rs *runtime.PodStatus, in Inputs) v1.PodStatus {
	if rs == nil {
		rs = &runtime.PodStatus{UID: pod.UID}
	}
	old := in.Old
	if old == nil {
		old = &pod.Status
	}
	c := &computer{pod: pod, rs: rs, in: in, old: old, runtimeName: in.RuntimeName}
	if c.runtimeName == "" {
		c.runtimeName = DefaultRuntimeName
	}

	var s v1.PodStatus
	s.QOSClass = qos.Class(pod)

	hostIPs := selectIPs(in.NodeIPs, in.NodeIPs)
	if len(hostIPs) > 0 {
		s.HostIP = hostIPs[0]
		for _, ip := range hostIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
	}
	podIPs := hostIPs
	if !pod.Spec.HostNetwork {
		podIPs = selectIPs(activeSandboxIPs(rs), in.NodeIPs)
	}
	if len(podIPs) > 0 {
		s.PodIP = podIPs[0]
		for _, ip := range podIPs {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
	}

	s.InitContainerStatuses = c.containerStatuses(pod.Spec.InitContainers, old.InitContainerStatuses, true)
	s.ContainerStatuses = c.containerStatuses(pod.Spec.Containers, old.ContainerStatuses, false)
	// Init containers keep spec order; app containers are sorted by name,
	// as upstream reports them.
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool {
		return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name
	})
	c.setStartedAndReady(s.InitContainerStatuses, pod.Spec.InitContainers, true)
	c.setStartedAndReady(s.ContainerStatuses, pod.Spec.Containers, false)
	c.setResources(s.InitContainerStatuses)
	c.setResources(s.ContainerStatuses)
	c.setPodResources(&s)
	// Ephemeral containers are reported as upstream: sorted by name, never
	// ready, and not part of the phase or the conditions.
	s.EphemeralContainerStatuses = c.containerStatuses(ephemeralContainers(pod), old.EphemeralContainerStatuses, false)
	sort.SliceStable(s.EphemeralContainerStatuses, func(i, j int) bool {
		return s.EphemeralContainerStatuses[i].Name < s.EphemeralContainerStatuses[j].Name
	})

	if old.StartTime != nil && !old.StartTime.IsZero() {
		t := *old.StartTime
		s.StartTime = &t
	} else if !in.Now.IsZero() {
		t := metav1.NewTime(in.Now)
		s.StartTime = &t
	}

	all := make([]v1.ContainerStatus, 0, len(s.InitContainerStatuses)+len(s.ContainerStatuses))
	all = append(all, s.InitContainerStatuses...)
	all = append(all, s.ContainerStatuses...)
	podIsTerminal := in.Terminating && !podconfig.IsStatic(pod)
	s.Phase = podPhase(pod, all, podIsTerminal, hasActiveRegularContainer(pod, rs))
	if !podspec.IsTerminalPhase(s.Phase) {
		switch {
		case podspec.IsTerminalPhase(old.Phase):
			s.Phase = old.Phase
		case podspec.IsTerminalPhase(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if podspec.IsTerminalPhase(pod.Status.Phase) && s.Phase != pod.Status.Phase {
		// The API already shows a terminal phase; it is final.
		s.Phase = pod.Status.Phase
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}
	if !in.Now.IsZero() && !podspec.IsTerminalPhase(old.Phase) {
		if exceeded, _ := ActiveDeadline(pod, s.StartTime, in.Now); exceeded {
			// Past spec.activeDeadlineSeconds: the pod failed, whatever its
			// containers say (the sync loop stops them). A pod that had
			// already finished keeps its phase.
			s.Phase = v1.PodFailed
			s.Reason, s.Message = ReasonDeadlineExceeded, MessageDeadlineExceeded
		}
	}
	if podspec.IsTerminalPhase(pod.Status.Phase) {
		// Not even the deadline moves a phase the API shows as final.
		s.Phase = pod.Status.Phase
	}

	s.Conditions = c.conditions(&s, all)
	return s
}

// ephemeralContainers returns the pod's ephemeral containers as
// containers (the fields they share).
func ephemeralContainers(pod *v1.Pod) []v1.Container {
	if len(pod.Spec.EphemeralContainers) == 0 {
		return nil
	}
	out := make([]v1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		out[i] = v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	return out
}

// computer carries the arguments of one Compute call.
type computer struct {
	pod         *v1.Pod
	rs          *runtime.PodStatus
	in          Inputs
	old         *v1.PodStatus
	runtimeName string
}

// containerStatuses builds the statuses of one container list (init or
// app) in spec order.
func (c *computer) containerStatuses(containers []v1.Container, previous []v1.ContainerStatus, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	defaultReason := ReasonContainerCreating
	if len(c.pod.Spec.InitContainers) > 0 {
		defaultReason = ReasonPodInitializing
	}
	oldByName := make(map[string]*v1.ContainerStatus, len(previous))
	for i := range previous {
		oldByName[previous[i].Name] = &previous[i]
	}

	// Start from a default waiting state, carrying over what the runtime
	// may no longer know: a terminated state, the last state and the
	// restart count.
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for _, ctr := range containers {
		st := &v1.ContainerStatus{
			Name:  ctr.Name,
			Image: ctr.Image,
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}},
		}
		if old, ok := oldByName[ctr.Name]; ok {
			if old.State.Terminated != nil {
				st.State = *old.State.DeepCopy()
			} else {
				st.LastTerminationState = *old.LastTerminationState.DeepCopy()
			}
			st.RestartCount = old.RestartCount
		}
		statuses[ctr.Name] = st
	}

	// A container that was running and has vanished from the runtime
	// terminated somehow: record that, so the pod does not look as if it
	// never ran.
	for _, ctr := range containers {
		if c.hasCreatedRecord(ctr.Name) {
			continue
		}
		old, ok := oldByName[ctr.Name]
		if !ok || old.State.Terminated != nil || old.State.Running == nil {
			continue
		}
		st := statuses[ctr.Name]
		if st.State.Waiting == nil || st.State.Waiting.Reason != defaultReason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was deleted.  The container used to be Running",
			ExitCode: exitCodeUnknown,
		}
		if c.pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// The runtime's records, newest first: the newest is the state, the
	// one before it the last state.
	seen := make(map[string]int, len(containers))
	for _, rec := range c.rs.Containers {
		if _, ok := statuses[rec.Name]; !ok || seen[rec.Name] >= 2 {
			continue
		}
		st := c.convert(rec, statuses[rec.Name].Image, oldByName[rec.Name])
		if seen[rec.Name] == 0 {
			statuses[rec.Name] = st
		} else {
			statuses[rec.Name].LastTerminationState = st.State
		}
		seen[rec.Name]++
	}

	// Containers that should run but do not: the sync loop's reason.
	for _, ctr := range containers {
		rec := c.rs.FindContainer(ctr.Name)
		if isInit && !podspec.IsSidecar(&ctr) && rec != nil && rec.State == runtime.ContainerExited && rec.ExitCode == 0 {
			continue
		}
		if !shouldRestart(&ctr, c.pod, rec) || (rec != nil && rec.State == runtime.ContainerExited && c.isEphemeral(ctr.Name)) {
			// An ephemeral container that ran is never started again.
			continue
		}
		w, ok := c.in.Waiting[ctr.Name]
		if !ok {
			continue
		}
		st := statuses[ctr.Name]
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
	}

	out := make([]v1.ContainerStatus, 0, len(containers))
	for _, ctr := range containers {
		out = append(out, *statuses[ctr.Name])
	}
	return out
}

// isEphemeral reports whether name is one of the pod's ephemeral
// containers.
func (c *computer) isEphemeral(name string) bool {
	for i := range c.pod.Spec.EphemeralContainers {
		if c.pod.Spec.EphemeralContainers[i].Name == name {
			return true
		}
	}
	return false
}

// hasCreatedRecord reports whether a record of the named container is in
// the created state.
func (c *computer) hasCreatedRecord(name string) bool {
	for _, rec := range c.rs.Containers {
		if rec.Name == name && rec.State == runtime.ContainerCreated {
			return true
		}
	}
	return false
}

// convert turns one runtime record into an API container status.
func (c *computer) convert(rec *runtime.ContainerStatus, image string, old *v1.ContainerStatus) *v1.ContainerStatus {
	cid := c.runtimeName + "://" + rec.ID
	st := &v1.ContainerStatus{
		Name:         rec.Name,
		RestartCount: int32(rec.RestartCount),
		Image:        image,
		ImageID:      rec.ImageRef,
		ContainerID:  cid,
	}
	switch {
	case rec.State == runtime.ContainerRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(rec.StartedAt)}
	case rec.State == runtime.ContainerExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    rec.ExitCode,
			Reason:      terminatedReason(rec),
			Message:     rec.Message,
			StartedAt:   startedAt(rec),
			FinishedAt:  timeOrZero(rec.FinishedAt),
			ContainerID: cid,
		}
	case rec.State == runtime.ContainerUnknown && old != nil && old.State.Running != nil:
		// It ran and the runtime lost track of it: it did not "never run".
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  "The container could not be located when the pod was terminated",
			ExitCode: exitCodeUnknown,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		// Created but not started, or unknown: waiting to run.
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// setStartedAndReady fills Started and Ready: a running container has
// started unless a startup result says otherwise; a started container is
// ready unless a readiness result says otherwise; a regular init container
// is ready once it exited with 0.
func (c *computer) setStartedAndReady(statuses []v1.ContainerStatus, containers []v1.Container, isInit bool) {
	specs := make(map[string]*v1.Container, len(containers))
	for i := range containers {
		specs[containers[i].Name] = &containers[i]
	}
	for i := range statuses {
		st := &statuses[i]
		started := st.State.Running != nil && lookup(c.in.Started, st.Name, true)
		st.Started = &started
		if spec := specs[st.Name]; isInit && spec != nil && !podspec.IsSidecar(spec) {
			st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
			continue
		}
		st.Ready = started && lookup(c.in.Ready, st.Name, true)
	}
}

// terminatedReason is the runtime's reason, else Completed or Error by exit
// code.
func terminatedReason(rec *runtime.ContainerStatus) string {
	if rec.Reason != "" {
		return rec.Reason
	}
	if rec.ExitCode == 0 {
		return ReasonCompleted
	}
	return ReasonError
}

// shouldRestart reports whether the sync loop would (re)start the container
// given its newest runtime record (nil when none).
func shouldRestart(ctr *v1.Container, pod *v1.Pod, rec *runtime.ContainerStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if rec == nil {
		return true
	}
	switch rec.State {
	case runtime.ContainerRunning:
		return false
	case runtime.ContainerUnknown, runtime.ContainerCreated:
		return true
	}
	return podspec.RestartsOnExit(ctr, &pod.Spec, rec.ExitCode)
}

// podPhase is the pod phase from its container statuses (init and app).
// podIsTerminal means no container will be restarted whatever the policy;
// podHasInitialized means an app container of the current sandbox exists,
// so init must have completed.
func podPhase(pod *v1.Pod, all []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := &pod.Spec
	byName := make(map[string]*v1.ContainerStatus, len(all))
	for i := range all {
		byName[all[i].Name] = &all[i]
	}

	// A failed init container or a stopped app container counts as final
	// when its own rules and policy, or the pod's, do not restart it
	// (upstream's phase with ContainerRestartRules).
	pendingRegularInit, pendingRestartableInit, failedInitFinal := 0, 0, 0
	unknown, running, waiting, stopped, stoppedFinal, succeeded := 0, 0, 0, 0, 0, 0

	for i := range spec.InitContainers {
		ctr := &spec.InitContainers[i]
		st := byName[ctr.Name]
		if podspec.IsSidecar(ctr) {
			switch {
			case st == nil:
				unknown++
			case st.State.Running != nil:
				if st.Started == nil || !*st.Started {
					pendingRestartableInit++
				}
				running++
			case st.State.Terminated != nil:
				// A stopped sidecar does not decide the phase.
			case st.State.Waiting != nil:
				if st.LastTerminationState.Terminated == nil {
					pendingRestartableInit++
					waiting++
				}
			default:
				pendingRestartableInit++
				unknown++
			}
			continue
		}
		switch {
		case st == nil:
			pendingRegularInit++
		case st.State.Running != nil:
			pendingRegularInit++
		case st.State.Terminated != nil:
			if code := st.State.Terminated.ExitCode; code != 0 && !podspec.RestartsOnExit(ctr, spec, code) {
				failedInitFinal++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last != nil {
				if last.ExitCode != 0 && !podspec.RestartsOnExit(ctr, spec, last.ExitCode) {
					failedInitFinal++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}

	for i := range spec.Containers {
		ctr := &spec.Containers[i]
		st := byName[ctr.Name]
		switch {
		case st == nil:
			unknown++
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			if !podspec.RestartsOnExit(ctr, spec, st.State.Terminated.ExitCode) {
				stoppedFinal++
			}
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last != nil {
				stopped++
				if !podspec.RestartsOnExit(ctr, spec, last.ExitCode) {
					stoppedFinal++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInitFinal > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingRegularInit > 0, pendingRestartableInit > 0 && !podHasInitialized:
		return v1.PodPending
	case waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if stopped != stoppedFinal {
			// At least one container is on its way to a restart.
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}

// hasActiveRegularContainer reports whether the pod's current (newest,
// ready) sandbox holds an app container in any state.
func hasActiveRegularContainer(pod *v1.Pod, rs *runtime.PodStatus) bool {
	if len(rs.Sandboxes) == 0 || rs.Sandboxes[0].State != runtime.SandboxReady {
		return false
	}
	active := rs.Sandboxes[0].ID
	names := make(map[string]bool, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names[c.Name] = true
	}
	for _, c := range rs.Containers {
		if c.SandboxID == active && names[c.Name] && !c.Init {
			return true
		}
	}
	return false
}

// activeSandboxIPs are the IPs of the newest sandbox when it is ready.
func activeSandboxIPs(rs *runtime.PodStatus) []string {
	if len(rs.Sandboxes) == 0 || rs.Sandboxes[0].State != runtime.SandboxReady {
		return nil
	}
	return rs.Sandboxes[0].IPs
}

// selectIPs picks at most two addresses from ips: the first of the
// preferred family (the family of prefer[0], IPv4 when prefer is empty),
// then the first of the other family. Unparsable addresses are skipped.
func selectIPs(ips, prefer []string) []string {
	preferV4 := true
	if len(prefer) > 0 {
		if a, err := netip.ParseAddr(prefer[0]); err == nil {
			preferV4 = a.Unmap().Is4()
		}
	}
	var primary, secondary string
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if a.Unmap().Is4() == preferV4 {
			if primary == "" {
				primary = s
			}
		} else if secondary == "" {
			secondary = s
		}
	}
	var out []string
	for _, s := range []string{primary, secondary} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// lookup returns m[key], or def when absent.
func lookup(m map[string]bool, key string, def bool) bool {
	if v, ok := m[key]; ok {
		return v
	}
	return def
}

// startedAt is when an exited container started. One that never started
// (the runtime failed to start it: StartError) reports the Unix epoch, as
// upstream does: the runtime's zero start time becomes time.Unix(0, 0).
func startedAt(rec *runtime.ContainerStatus) metav1.Time {
	if rec.StartedAt.IsZero() {
		return metav1.NewTime(time.Unix(0, 0))
	}
	return metav1.NewTime(rec.StartedAt)
}

// timeOrZero converts t, keeping the zero time zero.
func timeOrZero(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t)
}
