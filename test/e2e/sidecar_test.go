//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sidecarContainer is a testserver init container with restartPolicy
// Always serving HTTP on port 8080 of the pod.
func sidecarContainer(name string, args ...string) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c := serverContainer(name, args...)
	c.RestartPolicy = &always
	return c
}

// Sidecars (upstream test/e2e/common/node/container_lifecycle.go,
// "Restartable Init Container Lifecycle"): a sidecar starts before the
// init containers after it and serves them, keeps running next to the app
// containers, is restarted when it exits while the app containers keep
// running, and reports started/ready in initContainerStatuses.
func TestSidecarServesInitAndApp(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "sidecar.yaml", "sidecar", manifest(t, "sidecar", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{
			sidecarContainer("proxy", "-http-port", "8080", "-exit-after", "8s", "-exit-code", "1"),
			// Succeeds only if the sidecar already serves.
			shContainer("check", "wget -q -O- http://127.0.0.1:8080/hostname"),
		}
		p.Spec.Containers = []v1.Container{shContainer("app", sleeper)}
	}))
	pod := h.waitPod(t, "sidecar", podStartTimeout, "to run with the sidecar started and ready", func(p *v1.Pod) bool {
		st := statusOf(p, "proxy")
		return p.Status.Phase == v1.PodRunning && st != nil && st.State.Running != nil &&
			st.Started != nil && *st.Started && st.Ready && podCondition(p, v1.PodInitialized) == v1.ConditionTrue
	})
	if st := statusOf(pod, "check"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Fatalf("init container after the sidecar did not complete: %s", describeStatus(pod))
	}

	// The sidecar exits with 1 after 8 s: it is restarted (restartPolicy
	// Always on the sidecar) while the app container keeps running.
	pod = h.waitPod(t, "sidecar", 60*time.Second, "to restart the sidecar", func(p *v1.Pod) bool {
		st := statusOf(p, "proxy")
		return st != nil && st.RestartCount >= 1 && st.LastTerminationState.Terminated != nil &&
			st.LastTerminationState.Terminated.ExitCode == 1
	})
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "app" && (cs.RestartCount != 0 || cs.State.Running == nil) {
			t.Errorf("app container disturbed by the sidecar restart: %+v", cs)
		}
	}
	if st := statusOf(pod, "check"); st == nil || st.RestartCount != 0 {
		t.Errorf("regular init container ran again after the sidecar restarted: %+v", st)
	}
}

// A Job-like pod (restartPolicy Never) completes when its app container
// finishes although its sidecar would run forever; the sidecar is stopped
// after the app container, and the phase follows the app container only.
func TestSidecarJobCompletes(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "job.yaml", "job", manifest(t, "job", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.InitContainers = []v1.Container{
			sidecarContainer("logger", "-http-port", "8080"),
			sidecarContainer("second", "-http-port", "8081"),
		}
		p.Spec.Containers = []v1.Container{shContainer("work", "wget -q -O- http://127.0.0.1:8080/ && sleep 2")}
	}))
	pod := h.waitPod(t, "job", podStartTimeout+30*time.Second, "to succeed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})
	uid := string(pod.UID)
	finished := map[string]int64{}
	waitFor(t, 30*time.Second, "every container of the job to have exited", func() (bool, string) {
		for _, name := range []string{"work", "logger", "second"} {
			cs := c.podContainers(t, uid, name)
			if len(cs) == 0 {
				return false, "no container " + name
			}
			st := c.mustStatus(t, cs[len(cs)-1].Id)
			if st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
				return false, fmt.Sprintf("%s is %v", name, st.State)
			}
			finished[name] = st.FinishedAt
		}
		return true, ""
	})
	ts := func(ns int64) time.Time { return time.Unix(0, ns) }
	if !(finished["work"] <= finished["second"] && finished["second"] <= finished["logger"]) {
		t.Errorf("stop order: work at %v, second at %v, logger at %v; want work, then the sidecars in reverse order",
			ts(finished["work"]), ts(finished["second"]), ts(finished["logger"]))
	}
	for _, name := range []string{"logger", "second"} {
		if n := len(c.podContainers(t, uid, name)); n != 1 {
			t.Errorf("sidecar %s has %d containers, want 1 (never restarted once the job finished)", name, n)
		}
	}
}

// In cluster mode the API shows the sidecar in initContainerStatuses
// (started, ready, running) while the job runs, and the pod Succeeded once
// the app container finished, as kubectl users see it.
func TestClusterSidecarJob(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const name = "api-sidecar-job"
	createPod(t, apiPod(name, func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.InitContainers = []v1.Container{sidecarContainer("proxy", "-http-port", "8080")}
		p.Spec.Containers = []v1.Container{shContainer("main", "for i in 1 2 3 4 5 6; do wget -q -O /dev/null http://127.0.0.1:8080/ || exit 1; sleep 1; done")}
	}))
	waitAPIPod(t, h, name, podStartTimeout, "to run with the sidecar started and ready", func(p *v1.Pod) bool {
		st := statusOf(p, "proxy")
		return p.Status.Phase == v1.PodRunning && st != nil && st.State.Running != nil &&
			st.Started != nil && *st.Started && st.Ready
	})
	p := waitAPIPod(t, h, name, 60*time.Second, "to succeed", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodSucceeded
	})
	if st := statusOf(p, "main"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
		t.Errorf("main container: %+v, want terminated with 0", st)
	}
	if st := statusOf(p, "proxy"); st == nil || st.State.Terminated == nil || st.RestartCount != 0 {
		t.Errorf("sidecar after the job: %+v, want terminated, never restarted", st)
	}
}
