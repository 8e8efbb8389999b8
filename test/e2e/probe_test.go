//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeTimeout bounds how long a probe scenario may take to show its
// effect (restarts need a few probe periods and a container start).
const probeTimeout = 90 * time.Second

// serverContainer runs the test image's server with args.
func serverContainer(name string, args ...string) v1.Container {
	return v1.Container{
		Name:            name,
		Image:           testserverImage,
		ImagePullPolicy: v1.PullIfNotPresent,
		Command:         append([]string{"/testserver", "serve"}, args...),
	}
}

// serverScript runs script in the test image's shell, then the server.
func serverScript(name, script string, args ...string) v1.Container {
	c := serverContainer(name)
	c.Command = []string{"sh", "-c", script + "\nexec /testserver serve " + strings.Join(args, " ")}
	return c
}

func execAction(cmd ...string) v1.ProbeHandler {
	return v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}
}

func httpAction(path string, port intstr.IntOrString) v1.ProbeHandler {
	return v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: port}}
}

// fastProbe probes every second and acts on the first failure.
func fastProbe(h v1.ProbeHandler) *v1.Probe {
	return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1}
}

func restarts(p *v1.Pod, name string) int32 {
	if cs := statusOf(p, name); cs != nil {
		return cs.RestartCount
	}
	return -1
}

func isReady(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && podCondition(p, v1.PodReady) == v1.ConditionTrue &&
		podCondition(p, v1.ContainersReady) == v1.ConditionTrue
}

func isRunningNotReady(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && podCondition(p, v1.PodReady) == v1.ConditionFalse &&
		podCondition(p, v1.ContainersReady) == v1.ConditionFalse
}

// killedByProbe fails t unless heartlet's log shows that it killed the
// container of static pod name because of a failed probe of kind
// ("liveness", "startup"), so a restart is known not to be a crash.
func killedByProbe(t *testing.T, h *heartlet, name, container, kind string) {
	t.Helper()
	data, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"Killing container" pod="default/` + regexp.QuoteMeta(staticPodName(name)) + `" podUID="[^"]*" container="` +
		container + `" reason="Container ` + container + ` failed ` + kind + ` probe, will be restarted"`)
	if !re.Match(data) {
		t.Errorf("heartlet's log shows no kill of %s/%s for a failed %s probe", name, container, kind)
	}
}

// TestProbes runs the probe scenarios of upstream's
// test/e2e/common/node/container_probe.go against one standalone heartlet,
// each scenario its own static pod, in parallel.
func TestProbes(t *testing.T) {
	h := startHeartlet(t)

	// Upstream: "should be restarted with an exec "cat /tmp/health" liveness probe".
	t.Run("liveness exec restarts", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-exec.yaml", "pr-exec", manifest(t, "pr-exec", func(p *v1.Pod) {
			c := serverScript("app", "touch /tmp/healthy; (sleep 3; rm -f /tmp/healthy) &")
			c.LivenessProbe = fastProbe(execAction("cat", "/tmp/healthy"))
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-exec", probeTimeout, "to be restarted twice by its liveness probe", func(p *v1.Pod) bool {
			return restarts(p, "app") >= 2 && p.Status.Phase == v1.PodRunning
		})
		cs := statusOf(p, "app")
		if cs.LastTerminationState.Terminated == nil {
			t.Errorf("no last terminated state after a liveness restart: %+v", cs)
		}
		killedByProbe(t, h, "pr-exec", "app", "liveness")
	})

	// Upstream: "should be restarted with a /healthz http liveness probe"
	// and "should *not* be restarted with a /healthz http liveness probe".
	t.Run("liveness http", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-http.yaml", "pr-http", manifest(t, "pr-http", func(p *v1.Pod) {
			sick := serverContainer("sick", "-http-port", "8080", "-healthy-for", "4s")
			sick.LivenessProbe = fastProbe(httpAction("/healthz", intstr.FromInt32(8080)))
			fine := serverContainer("fine", "-http-port", "8081")
			fine.LivenessProbe = fastProbe(httpAction("/healthz", intstr.FromInt32(8081)))
			p.Spec.Containers = []v1.Container{sick, fine}
		}))
		p := h.waitPod(t, "pr-http", probeTimeout, "sick to be restarted", func(p *v1.Pod) bool {
			return restarts(p, "sick") >= 1
		})
		if n := restarts(p, "fine"); n != 0 {
			t.Errorf("the healthy container restarted %d times", n)
		}
		killedByProbe(t, h, "pr-http", "sick", "liveness")
	})

	// Upstream: "with readiness probe should not be ready before initial
	// delay and never restart"; then readiness follows the answer.
	t.Run("readiness http", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-ready.yaml", "pr-ready", manifest(t, "pr-ready", func(p *v1.Pod) {
			c := serverContainer("app", "-ready-after", "6s")
			c.ReadinessProbe = fastProbe(httpAction("/readyz", intstr.FromInt32(8080)))
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-ready", podStartTimeout, "to run and not be ready", func(p *v1.Pod) bool {
			cs := statusOf(p, "app")
			return isRunningNotReady(p) && cs != nil && cs.State.Running != nil && !cs.Ready
		})
		started := statusOf(p, "app").State.Running.StartedAt.Time
		p = h.waitPod(t, "pr-ready", probeTimeout, "to become ready", isReady)
		cs := statusOf(p, "app")
		if !cs.Ready || cs.Started == nil || !*cs.Started {
			t.Errorf("container status %+v: want ready and started", cs)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.LastTransitionTime.Time.Sub(started) < 5*time.Second {
				t.Errorf("Ready at %v, %v after the container started; the server answers ready only after 6s", c.LastTransitionTime, c.LastTransitionTime.Time.Sub(started))
			}
		}
		c := newCRI(t)
		c.exec(t, containerID(cs.ContainerID), "touch", "/tmp/unready")
		p = h.waitPod(t, "pr-ready", probeTimeout, "to become not ready", isRunningNotReady)
		if n := restarts(p, "app"); n != 0 {
			t.Errorf("a readiness failure restarted the container %d times", n)
		}
		c.exec(t, containerID(cs.ContainerID), "rm", "/tmp/unready")
		h.waitPod(t, "pr-ready", probeTimeout, "to become ready again", isReady)

		body, code, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/metrics/probes", h.roPort))
		if err != nil || code != 200 {
			t.Fatalf("GET /metrics/probes: %d %v", code, err)
		}
		for _, result := range []string{"successful", "failed"} {
			re := regexp.MustCompile(`prober_probe_total\{[^}]*probe_type="Readiness"[^}]*pod="` + staticPodName("pr-ready") + `"[^}]*result="` + result + `"[^}]*\} [1-9]`)
			re2 := regexp.MustCompile(`prober_probe_total\{[^}]*pod="` + staticPodName("pr-ready") + `"[^}]*probe_type="Readiness",result="` + result + `"\} [1-9]`)
			if !re.Match(body) && !re2.Match(body) {
				t.Errorf("/metrics/probes has no %s readiness count for the pod:\n%s", result, body)
			}
		}
		if !strings.Contains(string(body), "prober_probe_duration_seconds_bucket{") {
			t.Errorf("/metrics/probes has no prober_probe_duration_seconds")
		}
	})

	// Upstream: "should *not* be restarted by liveness probe because
	// startup probe delays it" and "should be restarted by liveness probe
	// after startup probe enables it".
	t.Run("startup gates liveness", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-startup.yaml", "pr-startup", manifest(t, "pr-startup", func(p *v1.Pod) {
			c := serverScript("app", "sleep 8; touch /tmp/startup")
			c.StartupProbe = fastProbe(execAction("cat", "/tmp/startup"))
			c.StartupProbe.FailureThreshold = 60
			c.LivenessProbe = fastProbe(execAction("false"))
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-startup", podStartTimeout, "to run", func(p *v1.Pod) bool {
			cs := statusOf(p, "app")
			return cs != nil && cs.State.Running != nil
		})
		start := statusOf(p, "app").State.Running.StartedAt.Time
		// While the startup probe fails, the container is not started, not
		// ready, and the failing liveness probe does not run.
		for time.Since(start) < 6*time.Second {
			p, err := h.pod("pr-startup")
			if err != nil || p == nil {
				t.Fatalf("pod: %v", err)
			}
			cs := statusOf(p, "app")
			if cs.RestartCount != 0 || cs.Ready || (cs.Started != nil && *cs.Started) {
				t.Fatalf("%v after start: restartCount %d ready %v started %v; want 0, false, false", time.Since(start), cs.RestartCount, cs.Ready, cs.Started)
			}
			time.Sleep(pollInterval)
		}
		h.waitPod(t, "pr-startup", probeTimeout, "to be restarted by liveness once started", func(p *v1.Pod) bool {
			return restarts(p, "app") >= 1
		})
		killedByProbe(t, h, "pr-startup", "app", "liveness")
	})

	// Upstream: "should be restarted startup probe fails".
	t.Run("startup failure restarts", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-startfail.yaml", "pr-startfail", manifest(t, "pr-startfail", func(p *v1.Pod) {
			c := serverContainer("app")
			c.StartupProbe = fastProbe(execAction("false"))
			c.StartupProbe.FailureThreshold = 3
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-startfail", probeTimeout, "to be restarted by its startup probe", func(p *v1.Pod) bool {
			return restarts(p, "app") >= 1
		})
		if cs := statusOf(p, "app"); cs.Ready {
			t.Errorf("a container whose startup probe never passed is ready: %+v", cs)
		}
		killedByProbe(t, h, "pr-startfail", "app", "startup")
	})

	// tcpSocket and grpc (upstream: "should *not* be restarted with a
	// GRPC liveness probe", "should be restarted with a GRPC liveness
	// probe", "should be ready ... tcp").
	t.Run("tcp and grpc succeed", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-tcpok.yaml", "pr-tcpok", manifest(t, "pr-tcpok", func(p *v1.Pod) {
			c := serverContainer("app", "-tcp-port", "9000", "-grpc-port", "9001", "-grpc-services", "svc")
			c.ReadinessProbe = fastProbe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9000)}})
			svc := "svc"
			c.LivenessProbe = fastProbe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9001, Service: &svc}})
			p.Spec.Containers = []v1.Container{c}
		}))
		h.waitPod(t, "pr-tcpok", probeTimeout, "to be ready", isReady)
		time.Sleep(5 * time.Second)
		p := h.waitPod(t, "pr-tcpok", 10*time.Second, "to stay ready", isReady)
		if n := restarts(p, "app"); n != 0 {
			t.Errorf("restarted %d times with a passing grpc liveness probe", n)
		}
	})
	t.Run("tcp and grpc fail", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-tcpbad.yaml", "pr-tcpbad", manifest(t, "pr-tcpbad", func(p *v1.Pod) {
			c := serverContainer("app", "-tcp-port", "9000", "-grpc-port", "9001", "-healthy-for", "4s")
			c.ReadinessProbe = fastProbe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9999)}})
			c.LivenessProbe = fastProbe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9001}})
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-tcpbad", probeTimeout, "to be restarted by its grpc liveness probe", func(p *v1.Pod) bool {
			return restarts(p, "app") >= 1
		})
		if !isRunningNotReady(p) && p.Status.Phase == v1.PodRunning {
			t.Errorf("ready with a tcp readiness probe on a closed port: %s", describeStatus(p))
		}
		killedByProbe(t, h, "pr-tcpbad", "app", "liveness")
	})

	// httpGet to a named port with headers: a shell server logs the raw
	// request so the test sees what the probe sent.
	t.Run("http named port and headers", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-headers.yaml", "pr-headers", manifest(t, "pr-headers", func(p *v1.Pod) {
			c := shContainer("app", `trap 'exit 0' TERM
while true; do printf 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok' | nc -l -p 8090 >> /tmp/requests; done &
wait`)
			c.Ports = []v1.ContainerPort{{Name: "probe-port", ContainerPort: 8090}}
			c.ReadinessProbe = fastProbe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Path: "/probe?x=1", Port: intstr.FromString("probe-port"),
				HTTPHeaders: []v1.HTTPHeader{{Name: "X-Custom", Value: "hello"}},
			}})
			c.ReadinessProbe.TimeoutSeconds = 2
			p.Spec.Containers = []v1.Container{c}
		}))
		p := h.waitPod(t, "pr-headers", probeTimeout, "to be ready through the named port", isReady)
		// nc answers as soon as a client connects, so the prober may see
		// the answer before nc has written the request down: poll.
		cri := newCRI(t)
		id := containerID(statusOf(p, "app").ContainerID)
		// Upstream pkg/probe/http/request.go: User-Agent kube-probe/<major>.<minor>.
		wants := []string{"GET /probe?x=1 HTTP/1.1", "X-Custom: hello", "User-Agent: kube-probe/1.", "Accept: */*"}
		waitFor(t, 20*time.Second, "a recorded probe request with the expected line and headers", func() (bool, string) {
			out, _, _ := cri.exec(t, id, "cat", "/tmp/requests")
			for _, want := range wants {
				if !strings.Contains(out, want) {
					return false, fmt.Sprintf("lacks %q in:\n%s", want, out)
				}
			}
			return true, ""
		})
	})

	// An exec probe that times out fails (upstream: "should not be ready
	// with an exec readiness probe timeout") and leaves no zombie behind.
	t.Run("exec timeout", func(t *testing.T) {
		t.Parallel()
		h.addPod(t, "pr-timeout.yaml", "pr-timeout", manifest(t, "pr-timeout", func(p *v1.Pod) {
			c := serverContainer("app")
			c.ReadinessProbe = fastProbe(execAction("sleep", "600"))
			p.Spec.Containers = []v1.Container{c}
		}))
		h.waitPod(t, "pr-timeout", podStartTimeout, "to run, not ready", func(p *v1.Pod) bool {
			cs := statusOf(p, "app")
			return isRunningNotReady(p) && cs != nil && cs.State.Running != nil
		})
		time.Sleep(8 * time.Second)
		p := h.waitPod(t, "pr-timeout", 10*time.Second, "to stay not ready", isRunningNotReady)
		if n := restarts(p, "app"); n != 0 {
			t.Errorf("restarted %d times by a readiness probe", n)
		}
		out, _, code := newCRI(t).exec(t, containerID(statusOf(p, "app").ContainerID), "ps", "-o", "pid,stat,args")
		if code != 0 {
			t.Fatalf("ps exited %d: %s", code, out)
		}
		zombies, sleeps := 0, 0
		for _, line := range strings.Split(out, "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			if strings.HasPrefix(f[1], "Z") {
				zombies++
			}
			if strings.Contains(line, "sleep 600") {
				sleeps++
			}
		}
		t.Logf("processes in the container:\n%s", out)
		if !regexp.MustCompile(`pr-timeout[^\n]*probeType="Readiness" output="command \\"sleep 600\\" timed out after 1s"`).Match(mustRead(t, h.logPath)) {
			t.Errorf("heartlet's log shows no timed-out readiness probe")
		}
		// Each timed-out probe is killed: at most the one in flight runs.
		if zombies != 0 || sleeps > 2 {
			t.Errorf("%d zombies and %d probe commands left in the container:\n%s", zombies, sleeps, out)
		}
	})
}

// TestClusterProbes checks, through the API server, that readiness drives
// the pod's Ready condition and that a failing liveness probe records
// Unhealthy events and restarts the container.
func TestClusterProbes(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("api-probes", func(p *v1.Pod) {
		web := serverContainer("web", "-ready-after", "5s")
		web.ReadinessProbe = fastProbe(httpAction("/readyz", intstr.FromInt32(8080)))
		// The first instance turns unhealthy after 4s; the ones after it
		// (which find the mark in the emptyDir) stay healthy.
		live := serverScript("live", "touch /tmp/healthy; if [ ! -e /state/failed ]; then touch /state/failed; (sleep 4; rm -f /tmp/healthy) & fi", "-http-port", "8081")
		live.LivenessProbe = fastProbe(execAction("cat", "/tmp/healthy"))
		live.LivenessProbe.FailureThreshold = 2
		live.VolumeMounts = []v1.VolumeMount{{Name: "state", MountPath: "/state"}}
		p.Spec.Volumes = []v1.Volume{{Name: "state", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers = []v1.Container{web, live}
	}))
	p := waitAPIPod(t, h, "api-probes", podStartTimeout, "to run, not ready", func(p *v1.Pod) bool {
		cs := statusOf(p, "web")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.State.Running != nil && !cs.Ready &&
			podCondition(p, v1.PodReady) == v1.ConditionFalse
	})
	if cs := statusOf(p, "web"); cs.Started == nil || !*cs.Started {
		t.Errorf("web not started while running without a startup probe: %+v", cs)
	}
	waitAPIPod(t, h, "api-probes", probeTimeout, "to have web ready", func(p *v1.Pod) bool {
		cs := statusOf(p, "web")
		return cs != nil && cs.Ready
	})

	// The liveness container restarts; its events are in the API.
	waitAPIPod(t, h, "api-probes", probeTimeout, "to have live restarted", func(p *v1.Pod) bool {
		return restarts(p, "live") >= 1
	})
	waitFor(t, 30*time.Second, "Unhealthy and Killing events", func() (bool, string) {
		un, err := podEvents("api-probes", "Unhealthy")
		if err != nil {
			return false, err.Error()
		}
		kill, err := podEvents("api-probes", "Killing")
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		okUn, okKill := false, false
		for _, e := range un {
			msgs = append(msgs, e.Message)
			okUn = okUn || (e.Type == v1.EventTypeWarning && strings.HasPrefix(e.Message, "Liveness probe failed: "))
		}
		for _, e := range kill {
			msgs = append(msgs, e.Message)
			okKill = okKill || e.Message == "Container live failed liveness probe, will be restarted"
		}
		return okUn && okKill, fmt.Sprintf("events: %q", msgs)
	})

	// Both containers ready: the pod is Ready. Then web answers not ready.
	p = waitAPIPod(t, h, "api-probes", probeTimeout, "to be Ready", func(p *v1.Pod) bool {
		return podRunningReady(p) && podCondition(p, v1.ContainersReady) == v1.ConditionTrue
	})
	if n := restarts(p, "live"); n != 1 {
		t.Errorf("live restarted %d times, want 1 (its second instance stays healthy)", n)
	}
	if _, code, err := httpGet(fmt.Sprintf("http://%s:8080/set?readyz=fail", p.Status.PodIP)); err != nil || code != 200 {
		t.Fatalf("GET /set?readyz=fail: %d %v", code, err)
	}
	p = waitAPIPod(t, h, "api-probes", probeTimeout, "to become NotReady", func(p *v1.Pod) bool {
		cs := statusOf(p, "web")
		return podCondition(p, v1.PodReady) == v1.ConditionFalse && cs != nil && !cs.Ready && cs.State.Running != nil
	})
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Reason != "ContainersNotReady" {
			t.Errorf("Ready condition reason %q, want ContainersNotReady", c.Reason)
		}
	}
	if n := restarts(p, "web"); n != 0 {
		t.Errorf("web restarted %d times by its readiness probe", n)
	}
	un, err := podEvents("api-probes", "Unhealthy")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range un {
		found = found || strings.HasPrefix(e.Message, "Readiness probe failed: HTTP probe failed with statuscode: 500")
	}
	if !found {
		t.Errorf("no readiness Unhealthy event")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
