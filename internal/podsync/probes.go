package podsync

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/probe"
	"github.com/heartlet/heartlet/internal/runtime"
)

// Probes reports the probe results of containers by runtime ID.
type Probes interface {
	Result(containerID string, kind probe.Kind) (probe.Result, bool)
}

// addProbeKills makes a running app container or sidecar whose liveness
// or startup probe failed stop, and start again unless the restart policy
// is Never (sidecars always start again), as upstream's computePodActions
// does. Containers the actions already replace are left alone.
func addProbeKills(pod *v1.Pod, rs *runtime.PodStatus, a *podActions, probes Probes) {
	if probes == nil || a.sandboxID == "" || a.killPod || a.terminal {
		return
	}
	handled := map[string]bool{}
	for _, k := range a.kill {
		handled[k.id] = true
	}
	for _, s := range a.start {
		handled[s.container.Name] = true
	}
	var candidates []*v1.Container
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			candidates = append(candidates, &pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		candidates = append(candidates, &pod.Spec.Containers[i])
	}
	for _, c := range candidates {
		st := newestInSandbox(rs, a.sandboxID, c.Name)
		if st == nil || st.State != runtime.ContainerRunning || handled[st.ID] || handled[c.Name] {
			continue
		}
		var msg string
		var p *v1.Probe
		if r, ok := probes.Result(st.ID, probe.Liveness); ok && r == probe.Failure {
			msg, p = fmt.Sprintf("Container %s failed liveness probe", c.Name), c.LivenessProbe
		} else if r, ok := probes.Result(st.ID, probe.Startup); ok && r == probe.Failure {
			msg, p = fmt.Sprintf("Container %s failed startup probe", c.Name), c.StartupProbe
		} else {
			continue
		}
		sidecar := podspec.IsSidecar(c)
		restart := sidecar || podspec.RestartsWithoutExitCode(c, &pod.Spec)
		if restart {
			msg += ", will be restarted"
		}
		k := killAction{id: st.ID, name: c.Name, reason: msg, message: msg}
		if p != nil && p.TerminationGracePeriodSeconds != nil {
			g := time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
			k.grace = &g
		}
		a.kill = append(a.kill, k)
		if restart {
			a.start = append(a.start, startAction{container: c, init: sidecar, restartCount: st.RestartCount + 1})
		}
	}
}

// newestInSandbox is the newest record of the named container in the
// sandbox.
func newestInSandbox(rs *runtime.PodStatus, sandboxID, name string) *runtime.ContainerStatus {
	for _, c := range rs.Containers {
		if c.SandboxID == sandboxID && c.Name == name {
			return c
		}
	}
	return nil
}

// probeInputs returns, by container name, the readiness and startup of
// running containers that have those probes; containers without them are
// left out, so the status counts them ready and started once running.
func probeInputs(pod *v1.Pod, rs *runtime.PodStatus, probes Probes) (ready, started map[string]bool) {
	if probes == nil {
		return nil, nil
	}
	ready, started = map[string]bool{}, map[string]bool{}
	visit := func(c *v1.Container) {
		st := rs.FindContainer(c.Name)
		if st == nil || st.State != runtime.ContainerRunning {
			return
		}
		if c.ReadinessProbe != nil {
			r, _ := probes.Result(st.ID, probe.Readiness)
			ready[c.Name] = r == probe.Success
		}
		if c.StartupProbe != nil {
			r, _ := probes.Result(st.ID, probe.Startup)
			started[c.Name] = r == probe.Success
		}
	}
	for _, c := range podspec.RunningContainers(pod) {
		visit(c)
	}
	return ready, started
}
