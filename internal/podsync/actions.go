package podsync

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/probe"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Waiting reasons reported for containers the sync loop did not run, with
// the upstream kubelet's spelling (those of images are the images
// package's errors).
const (
	ReasonCrashLoopBackOff     = "CrashLoopBackOff"
	ReasonCreateContainerError = "CreateContainerError"
	// ReasonCreateContainerConfigError: the container's configuration
	// references something missing (a ConfigMap or Secret key).
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonRunContainerError          = "RunContainerError"
)

// startAction starts one container of the spec.
type startAction struct {
	container    *v1.Container
	init         bool
	restartCount int
	// backoffKey is set when this start restarts an exited container, so
	// the crash-loop backoff advances when it happens.
	backoffKey string
	finishedAt time.Time
	// ephemeral marks an ephemeral container: started once, never
	// restarted.
	ephemeral bool
	// targetID is the running container whose PID namespace an ephemeral
	// container with targetContainerName joins; targetErr says why there
	// is none, and the start then fails with CreateContainerConfigError.
	targetID, targetErr string
}

// killAction stops one running container.
type killAction struct {
	id, name string
	reason   string
	// message is the Killing event's message; "Stopping container <name>"
	// when empty.
	message string
	// grace overrides the pod's termination grace period (a failed
	// probe's terminationGracePeriodSeconds).
	grace *time.Duration
}

// podActions is the difference between a pod's spec and what the runtime
// runs: what one sync must do. It is computed without side effects.
type podActions struct {
	// killPod stops every container and sandbox before anything else,
	// because the sandbox is gone or must be replaced.
	killPod bool
	// createSandbox creates a new sandbox with sandboxAttempt.
	createSandbox  bool
	sandboxAttempt uint32
	// sandboxID is the current ready sandbox when no new one is needed.
	sandboxID string
	start     []startAction
	kill      []killAction
	// waiting holds the containers the loop chose not to start now, with
	// the reason reported in their status.
	waiting map[string]waiting
	// requeueAfter is when a backoff that holds a container expires.
	requeueAfter time.Duration
	// terminal reports that the pod has finished for good: its restart
	// policy allows no container to run again.
	terminal bool
	// removeContainers and removeSandboxes are dead records to collect.
	removeContainers []string
	removeSandboxes  []string

	probes Probes
}

type waiting struct {
	reason, message string
	// hold is what is left of a crash-loop backoff.
	hold time.Duration
}

// backoff tells whether a container that exited at finishedAt is still
// held by its crash-loop backoff, and for how long.
type backoff interface {
	// hold returns the remaining backoff for key, or 0 when it may start.
	hold(key string, finishedAt time.Time) time.Duration
}

// backoffKey identifies one container spec of one pod: a changed spec
// starts a fresh backoff.
func backoffKey(pod *v1.Pod, name string, hash uint64) string {
	return fmt.Sprintf("%s_%s_%s_%s_%x", pod.Namespace, pod.Name, pod.UID, name, hash)
}

// computeActions compares pod with the runtime's view rs and decides what
// to do. hashOf is the container hash function; bo the crash-loop backoff;
// probes (may be nil) tells whether a sidecar with a startup probe has
// started.
func computeActions(pod *v1.Pod, rs *runtime.PodStatus, hashOf func(*v1.Container) uint64, bo backoff, probes Probes) podActions {
	a := podActions{waiting: map[string]waiting{}, probes: probes}
	var sandbox *runtime.SandboxStatus
	if len(rs.Sandboxes) > 0 {
		sandbox = rs.Sandboxes[0]
	}

	needSandbox := sandbox == nil || sandbox.State != runtime.SandboxReady ||
		sandbox.HostNetwork != pod.Spec.HostNetwork ||
		(!pod.Spec.HostNetwork && len(sandbox.IPs) == 0)

	if needSandbox {
		a.killPod = sandbox != nil || hasRunning(rs.Containers)
		// A pod that may not restart failed containers and already ran
		// containers in a sandbox that is now gone is finished: it is
		// never given a new sandbox.
		if sandbox != nil && pod.Spec.RestartPolicy == v1.RestartPolicyNever && len(rs.Containers) > 0 {
			a.terminal = true
			return a
		}
		// App containers that run once (OnFailure, theirs or the pod's)
		// and already succeeded are not run again, as upstream; when that
		// leaves none of an initialized pod, it is finished.
		var apps []*v1.Container
		initialized := false
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			last := rs.FindContainer(c.Name)
			initialized = initialized || last != nil
			if runsOnce(c, &pod.Spec) && last != nil && last.State == runtime.ContainerExited && last.ExitCode == 0 {
				continue
			}
			apps = append(apps, c)
		}
		if len(apps) == 0 && initialized {
			a.terminal = true
			return a
		}
		a.createSandbox = true
		if sandbox != nil {
			a.sandboxAttempt = sandbox.Attempt + 1
		}
		// Everything starts again in the new sandbox: the first init
		// container, or the app containers when there is none.
		if len(pod.Spec.InitContainers) > 0 {
			c := &pod.Spec.InitContainers[0]
			a.start = append(a.start, startAction{container: c, init: true, restartCount: nextRestartCount(rs, c.Name)})
			markPodInitializing(pod, a.waiting)
		} else {
			for _, c := range apps {
				a.start = append(a.start, startAction{container: c, restartCount: nextRestartCount(rs, c.Name)})
			}
		}
		return a
	}

	a.sandboxID = sandbox.ID
	current := map[string]*runtime.ContainerStatus{} // newest per name in this sandbox
	for _, c := range rs.Containers {
		if c.SandboxID != sandbox.ID {
			continue
		}
		if _, seen := current[c.Name]; !seen {
			current[c.Name] = c
		}
	}

	specNames := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		specNames[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		specNames[c.Name] = true
	}
	for _, c := range pod.Spec.EphemeralContainers {
		specNames[c.Name] = true
	}
	// Containers the spec no longer names are stopped.
	for _, c := range rs.Containers {
		if !specNames[c.Name] && c.State == runtime.ContainerRunning {
			a.kill = append(a.kill, killAction{id: c.ID, name: c.Name, reason: "not in the pod spec"})
		}
	}

	// Ephemeral containers start whether or not initialization is done, as
	// upstream, and before the init containers.
	a.computeEphemeral(pod, rs, current)
	initDone := a.computeInit(pod, rs, current, hashOf, bo)
	if !initDone {
		markPodInitializing(pod, a.waiting)
	} else {
		a.computeApp(pod, rs, current, hashOf, bo)
	}
	a.removeContainers, a.removeSandboxes = collectGarbage(rs, sandbox.ID)
	return a
}

// computeEphemeral starts each ephemeral container that has no record in
// the runtime yet. One that ran (in this sandbox or an earlier one) is
// never started again, whatever its exit, and nothing here stops one: it
// ends by itself or with the pod. With targetContainerName it joins the
// PID namespace of that container's running instance in the sandbox.
func (a *podActions) computeEphemeral(pod *v1.Pod, rs *runtime.PodStatus, current map[string]*runtime.ContainerStatus) {
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if rs.FindContainer(ec.Name) != nil {
			continue
		}
		c := v1.Container(ec.EphemeralContainerCommon)
		st := startAction{container: &c, ephemeral: true}
		if target := ec.TargetContainerName; target != "" {
			if t := current[target]; t != nil && t.State == runtime.ContainerRunning {
				st.targetID = t.ID
			} else {
				st.targetErr = fmt.Sprintf("unable to find target container %s", target)
			}
		}
		a.start = append(a.start, st)
	}
}

// computeInit walks the init containers in order and reports whether the
// pod has initialized: every regular init container succeeded and every
// sidecar (restartPolicy: Always) runs. At most one regular init container
// runs at a time, and one starts only after the sidecars before it run.
// Once an app container exists in the sandbox, initialization is over:
// regular init containers are not looked at again, and a sidecar that
// exits is restarted (after its backoff) while the app containers go on.
func (a *podActions) computeInit(pod *v1.Pod, rs *runtime.PodStatus, current map[string]*runtime.ContainerStatus, hashOf func(*v1.Container) uint64, bo backoff) bool {
	initialized := false
	for _, c := range pod.Spec.Containers {
		if current[c.Name] != nil {
			initialized = true
			break
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		st := current[c.Name]
		if podspec.IsSidecar(c) {
			if !a.keepSidecar(pod, rs, c, st, hashOf, bo) && !initialized {
				return false
			}
			continue
		}
		if initialized {
			continue
		}
		switch {
		case st == nil:
			a.start = append(a.start, startAction{container: c, init: true, restartCount: nextRestartCount(rs, c.Name)})
			return false
		case st.State == runtime.ContainerExited && st.ExitCode == 0:
			continue
		case st.State == runtime.ContainerExited:
			if !podspec.RestartsOnExit(c, &pod.Spec, st.ExitCode) {
				a.terminal = true
				return false
			}
			a.restart(pod, c, true, st, bo)
			return false
		default: // running, created or unknown: wait for it
			return false
		}
	}
	return true
}

// keepSidecar keeps one sidecar running whatever the pod's restart policy:
// it starts it when missing, restarts it after it exited (with crash-loop
// backoff) and replaces it when its image changed. It reports whether the
// sidecar has started (runs, and passed its startup probe if it has one),
// which is what lets the next init container start, as upstream.
func (a *podActions) keepSidecar(pod *v1.Pod, rs *runtime.PodStatus, c *v1.Container, st *runtime.ContainerStatus, hashOf func(*v1.Container) uint64, bo backoff) bool {
	switch {
	case st == nil:
		a.start = append(a.start, startAction{container: c, init: true, restartCount: nextRestartCount(rs, c.Name)})
		return false
	case st.State == runtime.ContainerExited:
		if st.Hash != hashOf(c) {
			a.start = append(a.start, startAction{container: c, init: true, restartCount: st.RestartCount + 1})
			return false
		}
		a.restart(pod, c, true, st, bo)
		return false
	case st.State != runtime.ContainerRunning || st.Hash != hashOf(c):
		reason := "container spec changed"
		if st.State != runtime.ContainerRunning {
			reason = "container is " + string(st.State)
		}
		a.kill = append(a.kill, killAction{id: st.ID, name: c.Name, reason: reason})
		a.start = append(a.start, startAction{container: c, init: true, restartCount: st.RestartCount + 1})
		return false
	}
	if c.StartupProbe != nil && a.probes != nil {
		r, _ := a.probes.Result(st.ID, probe.Startup)
		return r == probe.Success
	}
	return true
}

// computeApp decides for every app container: keep, start, restart or hold.
func (a *podActions) computeApp(pod *v1.Pod, rs *runtime.PodStatus, current map[string]*runtime.ContainerStatus, hashOf func(*v1.Container) uint64, bo backoff) {
	finished := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st := current[c.Name]
		if st == nil {
			// One that exited for good in an earlier sandbox stays done,
			// as upstream judges a container by its newest record.
			if last := rs.FindContainer(c.Name); last != nil && last.State == runtime.ContainerExited &&
				!podspec.RestartsOnExit(c, &pod.Spec, last.ExitCode) {
				finished++
				continue
			}
			a.start = append(a.start, startAction{container: c, restartCount: nextRestartCount(rs, c.Name)})
			continue
		}
		changed := st.Hash != hashOf(c)
		switch st.State {
		case runtime.ContainerRunning, runtime.ContainerCreated, runtime.ContainerUnknown:
			if changed || st.State != runtime.ContainerRunning {
				a.kill = append(a.kill, killAction{id: st.ID, name: c.Name, reason: "container spec changed"})
				if st.State != runtime.ContainerRunning {
					a.kill[len(a.kill)-1].reason = "container is " + string(st.State)
				}
				a.start = append(a.start, startAction{container: c, restartCount: st.RestartCount + 1})
			}
		case runtime.ContainerExited:
			if !podspec.RestartsOnExit(c, &pod.Spec, st.ExitCode) {
				finished++
				continue
			}
			if changed {
				a.start = append(a.start, startAction{container: c, restartCount: st.RestartCount + 1})
				continue
			}
			a.restart(pod, c, false, st, bo)
		}
	}
	// Every app container exited for good (each by its own rules, its own
	// policy or the pod's): nothing runs again.
	if finished == len(pod.Spec.Containers) {
		a.terminal = true
	}
}

// restart starts an exited container again unless its crash-loop backoff
// holds it, in which case it is reported as waiting in CrashLoopBackOff.
func (a *podActions) restart(pod *v1.Pod, c *v1.Container, init bool, st *runtime.ContainerStatus, bo backoff) {
	key := backoffKey(pod, c.Name, st.Hash)
	if d := bo.hold(key, st.FinishedAt); d > 0 {
		a.waiting[c.Name] = waiting{
			reason:  ReasonCrashLoopBackOff,
			message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d.Round(time.Second), c.Name, pod.Name, pod.Namespace, pod.UID),
			hold:    d,
		}
		if a.requeueAfter == 0 || d < a.requeueAfter {
			a.requeueAfter = d
		}
		return
	}
	a.start = append(a.start, startAction{container: c, init: init, restartCount: st.RestartCount + 1, backoffKey: key, finishedAt: st.FinishedAt})
}

// markPodInitializing reports app containers as waiting while init
// containers run.
func markPodInitializing(pod *v1.Pod, w map[string]waiting) {
	for _, c := range pod.Spec.Containers {
		if _, ok := w[c.Name]; !ok {
			w[c.Name] = waiting{reason: "PodInitializing"}
		}
	}
}

// nextRestartCount is the restart count of the next attempt of name: one
// more than the newest attempt anywhere in the pod, or 0 for the first.
// runsOnce reports whether a container is done once it succeeded: its own
// restartPolicy is OnFailure, or it has none and the pod's is.
func runsOnce(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}

func nextRestartCount(rs *runtime.PodStatus, name string) int {
	if st := rs.FindContainer(name); st != nil {
		return st.RestartCount + 1
	}
	return 0
}

func hasRunning(cs []*runtime.ContainerStatus) bool {
	for _, c := range cs {
		if c.State == runtime.ContainerRunning {
			return true
		}
	}
	return false
}

// collectGarbage keeps, for every container name, the newest exited
// attempt (its status is lastState and its log serves --previous) and
// lists older exited attempts, plus sandboxes other than the current one
// that no longer hold any container.
func collectGarbage(rs *runtime.PodStatus, currentSandbox string) (containers, sandboxes []string) {
	exitedSeen := map[string]bool{}
	remaining := map[string]int{}
	byAge := append([]*runtime.ContainerStatus(nil), rs.Containers...)
	sort.SliceStable(byAge, func(i, j int) bool { return byAge[i].CreatedAt.After(byAge[j].CreatedAt) })
	for _, c := range byAge {
		if c.State != runtime.ContainerExited {
			remaining[c.SandboxID]++
			continue
		}
		if !exitedSeen[c.Name] {
			exitedSeen[c.Name] = true
			remaining[c.SandboxID]++
			continue
		}
		containers = append(containers, c.ID)
	}
	for _, s := range rs.Sandboxes {
		if s.ID != currentSandbox && s.State != runtime.SandboxReady && remaining[s.ID] == 0 {
			sandboxes = append(sandboxes, s.ID)
		}
	}
	return containers, sandboxes
}
