//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Lifecycle hooks, termination messages and exit reasons, as upstream's
// test/e2e/common/node/lifecycle_hook.go and runtime.go expect them.

// loggedServerContainer runs the test server on port 8080 with args, recording
// its requests and signals in /log/requests (a hostPath volume "log").
func loggedServerContainer(name string, args ...string) v1.Container {
	return v1.Container{
		Name:            name,
		Image:           testserverImage,
		ImagePullPolicy: v1.PullIfNotPresent,
		Command:         append([]string{"/testserver", "serve", "-http-port", "8080", "-request-log", "/log/requests"}, args...),
		Ports:           []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
		VolumeMounts:    []v1.VolumeMount{{Name: "log", MountPath: "/log"}},
	}
}

// logVolume is a hostPath volume on dir, for the request log.
func logVolume(dir string) v1.Volume {
	t := v1.HostPathDirectory
	return v1.Volume{Name: "log", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &t}}}
}

// waitServing is a postStart exec that returns once the container's own
// server answers, so the containers after it start against a live server.
var waitServing = &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c",
	"for i in $(seq 100); do wget -q -O /dev/null http://127.0.0.1:8080/healthz && exit 0; sleep 0.1; done; exit 1"}}}

// requestEntry is one line of the test server's request log.
type requestEntry struct {
	at   time.Time
	what string
}

func readRequestLog(t *testing.T, path string) []requestEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []requestEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		ts, rest, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Errorf("request log line %q: %v", sc.Text(), err)
			continue
		}
		out = append(out, requestEntry{at: at, what: rest})
	}
	return out
}

// findEntry returns the first entry containing s.
func findEntry(entries []requestEntry, s string) (requestEntry, bool) {
	for _, e := range entries {
		if strings.Contains(e.what, s) {
			return e, true
		}
	}
	return requestEntry{}, false
}

func describeEntries(entries []requestEntry) string {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "\n  %s %s", e.at.Format(time.RFC3339Nano), e.what)
	}
	return b.String()
}

// A postStart exec hook runs in the container right after it starts: the
// container sees the file it wrote. A postStart httpGet hook without a
// host reaches the pod IP and a named port (here a server in the first
// container of the same pod).
func TestLifecyclePostStart(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	logDir := t.TempDir()
	h.addPod(t, "poststart.yaml", "poststart", manifest(t, "poststart", func(p *v1.Pod) {
		srv := loggedServerContainer("server")
		srv.Lifecycle = &v1.Lifecycle{PostStart: waitServing}
		app := shContainer("app", sleeper)
		app.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{
			Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo poststart-ran > /tmp/poststart"}},
		}}
		web := shContainer("web", sleeper)
		web.Ports = []v1.ContainerPort{{Name: "peer", ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
		web.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{
			Path: "/poststart?from=web", Port: intstr.FromString("peer"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "1"}},
		}}}
		p.Spec.Containers = []v1.Container{srv, app, web}
		p.Spec.Volumes = []v1.Volume{logVolume(logDir)}
	}))
	pod := h.waitRunning(t, "poststart")
	ctrs := c.podContainers(t, string(pod.UID), "app")
	if len(ctrs) != 1 {
		t.Fatalf("want 1 app container, CRI has %d", len(ctrs))
	}
	out, errOut, code := c.exec(t, ctrs[0].Id, "cat", "/tmp/poststart")
	if code != 0 || strings.TrimSpace(out) != "poststart-ran" {
		t.Errorf("cat /tmp/poststart in the container: exit %d, %q %q; want the file the hook wrote", code, out, errOut)
	}
	waitFor(t, 30*time.Second, "the httpGet hook's request in the server's log", func() (bool, string) {
		entries := readRequestLog(t, filepath.Join(logDir, "requests"))
		_, ok := findEntry(entries, "GET /poststart?from=web")
		return ok, describeEntries(entries)
	})
	for _, name := range []string{"server", "app", "web"} {
		if cs := statusOf(pod, name); cs == nil || cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("container %s: %+v, want running without restarts", name, cs)
		}
	}
}

// A failing postStart hook kills the container, which the restart policy
// restarts; the status says PostStartHookError (then CrashLoopBackOff)
// with the last state terminated.
func TestLifecyclePostStartFailure(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "poststart-fail.yaml", "poststart-fail", manifest(t, "poststart-fail", func(p *v1.Pod) {
		app := shContainer("app", sleeper)
		app.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo nope >&2; exit 7"}}}}
		p.Spec.Containers = []v1.Container{app}
	}))
	sawHookError := false
	pod := h.waitPod(t, "poststart-fail", podStartTimeout, "to restart its container after the failed postStart", func(p *v1.Pod) bool {
		cs := statusOf(p, "app")
		if cs == nil {
			return false
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "PostStartHookError" && strings.Contains(w.Message, "exited with 7") {
			sawHookError = true
		}
		return cs.RestartCount >= 2 && cs.LastTerminationState.Terminated != nil
	})
	cs := statusOf(pod, "app")
	if w := cs.State.Waiting; w != nil && w.Reason != "PostStartHookError" && w.Reason != "CrashLoopBackOff" {
		t.Errorf("waiting reason %q, want PostStartHookError or CrashLoopBackOff", w.Reason)
	}
	if !sawHookError && !h.logContains("Failed to execute PostStartHook") {
		t.Error("neither the status nor heartlet's log reported the failed postStart hook")
	}
}

// preStop hooks (exec, httpGet, sleep) run before the container gets
// SIGTERM when its pod is removed: the server's log has the hook's request
// (or, for sleep, the delay) before the signal.
func TestLifecyclePreStop(t *testing.T) {
	h := startHeartlet(t)
	tests := []struct {
		name string
		hook *v1.LifecycleHandler
		// mark is the request the hook makes, "" for sleep.
		mark string
		// minDelay is the least time between removal and SIGTERM.
		minDelay time.Duration
	}{
		{
			name: "exec",
			hook: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "wget -q -O /dev/null http://127.0.0.1:8080/prestop-exec"}}},
			mark: "GET /prestop-exec",
		},
		{
			name: "httpget",
			hook: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/prestop-http", Port: intstr.FromString("http")}},
			mark: "GET /prestop-http",
		},
		{
			name:     "sleep",
			hook:     &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 3}},
			minDelay: 3 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "prestop-" + tt.name
			file := name + ".yaml"
			logDir := t.TempDir()
			h.addPod(t, file, name, manifest(t, name, func(p *v1.Pod) {
				grace := int64(30)
				p.Spec.TerminationGracePeriodSeconds = &grace
				srv := loggedServerContainer("server")
				srv.Lifecycle = &v1.Lifecycle{PreStop: tt.hook}
				p.Spec.Containers = []v1.Container{srv}
				p.Spec.Volumes = []v1.Volume{logVolume(logDir)}
			}))
			h.waitRunning(t, name)
			logPath := filepath.Join(logDir, "requests")
			waitFor(t, 30*time.Second, "the server to start", func() (bool, string) {
				_, ok := findEntry(readRequestLog(t, logPath), "start pid=")
				return ok, "no start line"
			})
			removed := time.Now()
			h.removeManifest(t, file)
			var entries []requestEntry
			waitFor(t, 60*time.Second, "the server to exit", func() (bool, string) {
				entries = readRequestLog(t, logPath)
				_, ok := findEntry(entries, "exit ")
				return ok, describeEntries(entries)
			})
			sig, ok := findEntry(entries, "signal terminated")
			if !ok {
				t.Fatalf("the server never got SIGTERM; log:%s", describeEntries(entries))
			}
			if tt.mark != "" {
				req, ok := findEntry(entries, tt.mark)
				if !ok {
					t.Fatalf("the preStop hook's request %q is not in the log:%s", tt.mark, describeEntries(entries))
				}
				if !req.at.Before(sig.at) {
					t.Errorf("preStop request at %s, SIGTERM at %s: want the hook first", req.at.Format(time.RFC3339Nano), sig.at.Format(time.RFC3339Nano))
				}
			}
			delay := sig.at.Sub(removed)
			t.Logf("SIGTERM %v after the manifest was removed", delay)
			if delay < tt.minDelay {
				t.Errorf("SIGTERM %v after removal, want at least %v (the preStop sleep)", delay, tt.minDelay)
			}
			if delay > 20*time.Second {
				t.Errorf("SIGTERM %v after removal: the hook held the stop too long", delay)
			}
		})
	}
}

// The preStop hook's time counts against the grace period: a sleep longer
// than the grace is cut, and a container that ignores SIGTERM is killed
// about when the grace ends (plus upstream's 2 s minimum stop window).
func TestLifecyclePreStopGraceBudget(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	logDir := t.TempDir()
	const grace = 5
	h.addPod(t, "prestop-budget.yaml", "prestop-budget", manifest(t, "prestop-budget", func(p *v1.Pod) {
		g := int64(grace)
		p.Spec.TerminationGracePeriodSeconds = &g
		srv := loggedServerContainer("server", "-ignore-sigterm")
		srv.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 60}}}
		p.Spec.Containers = []v1.Container{srv}
		p.Spec.Volumes = []v1.Volume{logVolume(logDir)}
	}))
	pod := h.waitRunning(t, "prestop-budget")
	ctrs := c.podContainers(t, string(pod.UID), "server")
	if len(ctrs) != 1 {
		t.Fatalf("want 1 server container, CRI has %d", len(ctrs))
	}
	id := ctrs[0].Id
	removed := time.Now()
	h.removeManifest(t, "prestop-budget.yaml")
	var finished time.Time
	waitFor(t, 90*time.Second, "the container to end", func() (bool, string) {
		st, err := c.status(id)
		if err != nil {
			finished = time.Now()
			return true, ""
		}
		if st.FinishedAt != 0 {
			finished = time.Unix(0, st.FinishedAt)
			return true, ""
		}
		return false, "still running"
	})
	took := finished.Sub(removed)
	t.Logf("container ended %v after removal (grace %ds, preStop sleep 60s)", took, grace)
	if took < grace*time.Second-500*time.Millisecond || took > (grace+2)*time.Second+5*time.Second {
		t.Errorf("container ended %v after removal, want about the grace %ds plus the 2 s minimum stop window", took, grace)
	}
	entries := readRequestLog(t, filepath.Join(logDir, "requests"))
	if sig, ok := findEntry(entries, "signal terminated"); !ok {
		t.Errorf("the server never got SIGTERM; log:%s", describeEntries(entries))
	} else if d := sig.at.Sub(removed); d < grace*time.Second-500*time.Millisecond {
		t.Errorf("SIGTERM %v after removal, before the preStop sleep used the grace", d)
	}
}

// Termination messages, as upstream's runtime.go blackbox tests: the file
// at terminationMessagePath (also at a custom path, as a non-root user),
// FallbackToLogsOnError with the log of a failed container, none for a
// successful one, the file over the log; and the test server's own message
// with its exit code.
func TestLifecycleTerminationMessages(t *testing.T) {
	h := startHeartlet(t)
	nonRoot := int64(10000)
	tests := []struct {
		name      string
		container v1.Container
		phase     v1.PodPhase
		want      string
		exitCode  int32
		reason    string
	}{
		{name: "file", container: shContainer("c", "/bin/echo -n DONE > /dev/termination-log"), phase: v1.PodSucceeded, want: "DONE", reason: "Completed"},
		{name: "custom-path-non-root", container: func() v1.Container {
			c := shContainer("c", "/bin/echo -n DONE > /dev/termination-custom-log")
			c.TerminationMessagePath = "/dev/termination-custom-log"
			c.SecurityContext = &v1.SecurityContext{RunAsUser: &nonRoot}
			return c
		}(), phase: v1.PodSucceeded, want: "DONE", reason: "Completed"},
		{name: "fallback-logs", container: func() v1.Container {
			c := shContainer("c", "/bin/echo -n DONE; /bin/false")
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
			return c
		}(), phase: v1.PodFailed, want: "DONE", exitCode: 1, reason: "Error"},
		{name: "fallback-success", container: func() v1.Container {
			c := shContainer("c", "/bin/echo -n DONE; /bin/true")
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
			return c
		}(), phase: v1.PodSucceeded, want: "", reason: "Completed"},
		{name: "fallback-file-wins", container: func() v1.Container {
			c := shContainer("c", "/bin/echo -n OK > /dev/termination-log; /bin/echo DONE; /bin/true")
			c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
			return c
		}(), phase: v1.PodSucceeded, want: "OK", reason: "Completed"},
		{name: "testserver", container: v1.Container{
			Name: "c", Image: testserverImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"/testserver", "serve", "-http-port", "0", "-exit-after", "1s", "-exit-code", "3", "-termination-message", "bye from testserver"},
		}, phase: v1.PodFailed, want: "bye from testserver", exitCode: 3, reason: "Error"},
	}
	for _, tt := range tests {
		name := "term-" + tt.name
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Spec.Containers = []v1.Container{tt.container}
		}))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "term-" + tt.name
			pod := h.waitPod(t, name, podStartTimeout, "to reach "+string(tt.phase), func(p *v1.Pod) bool { return p.Status.Phase == tt.phase })
			cs := statusOf(pod, "c")
			if cs == nil || cs.State.Terminated == nil {
				t.Fatalf("container status %+v, want terminated", cs)
			}
			term := cs.State.Terminated
			if term.Message != tt.want || term.ExitCode != tt.exitCode || term.Reason != tt.reason {
				t.Errorf("terminated: message %q exit %d reason %q; want message %q exit %d reason %q",
					term.Message, term.ExitCode, term.Reason, tt.want, tt.exitCode, tt.reason)
			}
		})
	}
}

// Exit reasons as upstream reports them over containerd: exit 0
// Completed, non-zero Error, an OOM kill OOMKilled with 137, and a command
// that does not exist StartError with 128 and the runtime's message.
func TestLifecycleExitReasons(t *testing.T) {
	h := startHeartlet(t)
	tests := []struct {
		name     string
		c        v1.Container
		exitCode int32
		reason   string
		message  string
	}{
		{name: "completed", c: shContainer("c", "exit 0"), exitCode: 0, reason: "Completed"},
		{name: "error", c: shContainer("c", "exit 1"), exitCode: 1, reason: "Error"},
		{name: "oom", c: func() v1.Container {
			c := v1.Container{Name: "c", Image: testserverImage, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"/testserver", "serve", "-http-port", "0", "-alloc-mib", "200"}}
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("48Mi")}
			return c
		}(), exitCode: 137, reason: "OOMKilled"},
		{name: "start-error", c: v1.Container{Name: "c", Image: busyboxImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"/no/such/command"}}, exitCode: 128, reason: "StartError", message: "no such file or directory"},
	}
	for _, tt := range tests {
		name := "exit-" + tt.name
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			p.Spec.Containers = []v1.Container{tt.c}
		}))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "exit-" + tt.name
			pod := h.waitPod(t, name, podStartTimeout, "to finish", func(p *v1.Pod) bool {
				cs := statusOf(p, "c")
				return cs != nil && cs.State.Terminated != nil && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed)
			})
			term := statusOf(pod, "c").State.Terminated
			if term.ExitCode != tt.exitCode || term.Reason != tt.reason {
				t.Errorf("terminated: exit %d reason %q message %q; want exit %d reason %q", term.ExitCode, term.Reason, term.Message, tt.exitCode, tt.reason)
			}
			if !strings.Contains(term.Message, tt.message) {
				t.Errorf("terminated message %q, want it to contain %q", term.Message, tt.message)
			}
			wantPhase := v1.PodFailed
			if tt.exitCode == 0 {
				wantPhase = v1.PodSucceeded
			}
			if pod.Status.Phase != wantPhase {
				t.Errorf("phase %s, want %s", pod.Status.Phase, wantPhase)
			}
			if tt.reason == "StartError" && term.StartedAt.Unix() != 0 {
				t.Errorf("startedAt %v for a container that never started, want the Unix epoch as upstream", term.StartedAt)
			}
		})
	}
}

// Cluster mode: a failing postStart hook shows as FailedPostStartHook and
// Killing events, and a termination message is in the pod object.
func TestClusterLifecycle(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("api-poststart-fail", func(p *v1.Pod) {
		c := shContainer("main", sleeper)
		c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 7"}}}}
		p.Spec.Containers = []v1.Container{c}
	}))
	createPod(t, apiPod("api-term-msg", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers = []v1.Container{shContainer("main", "/bin/echo -n 'cluster bye' > /dev/termination-log; exit 4")}
	}))

	waitFor(t, podStartTimeout, "FailedPostStartHook and Killing events", func() (bool, string) {
		failed, err := podEvents("api-poststart-fail", "FailedPostStartHook")
		if err != nil {
			return false, err.Error()
		}
		killing, err := podEvents("api-poststart-fail", "Killing")
		if err != nil {
			return false, err.Error()
		}
		// As upstream, both are about the container (its field path).
		okFailed := len(failed) > 0 && failed[0].Message == "PostStartHook failed" && failed[0].Type == v1.EventTypeWarning &&
			failed[0].InvolvedObject.FieldPath == "spec.containers{main}"
		okKilling := false
		for _, e := range killing {
			if e.Message == "FailedPostStartHook" && e.InvolvedObject.FieldPath == "spec.containers{main}" {
				okKilling = true
			}
		}
		return okFailed && okKilling, fmt.Sprintf("FailedPostStartHook events %v, Killing events %v", eventMessages(failed), eventMessages(killing))
	})
	waitAPIPod(t, h, "api-poststart-fail", podStartTimeout, "to restart its container", func(p *v1.Pod) bool {
		cs := statusOf(p, "main")
		return cs != nil && cs.RestartCount >= 1
	})
	// The restart found the image on the node: as upstream, a Pulled
	// event about the container says so.
	waitFor(t, podStartTimeout, "a Pulled event for the image already present", func() (bool, string) {
		pulled, err := podEvents("api-poststart-fail", "Pulled")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range pulled {
			if strings.HasSuffix(e.Message, "already present on machine") && e.InvolvedObject.FieldPath == "spec.containers{main}" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("Pulled events %v", eventMessages(pulled))
	})

	p := waitAPIPod(t, h, "api-term-msg", podStartTimeout, "to fail with its termination message", func(p *v1.Pod) bool {
		cs := statusOf(p, "main")
		return p.Status.Phase == v1.PodFailed && cs != nil && cs.State.Terminated != nil && cs.State.Terminated.Message != ""
	})
	term := statusOf(p, "main").State.Terminated
	if term.Message != "cluster bye" || term.ExitCode != 4 || term.Reason != "Error" {
		t.Errorf("terminated: message %q exit %d reason %q; want %q, 4, Error", term.Message, term.ExitCode, term.Reason, "cluster bye")
	}
	out := mustKubectl(t, "get", "pod", "-n", "default", "api-term-msg", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.message}")
	if out != "cluster bye" {
		t.Errorf("kubectl get pod -o jsonpath: message %q, want %q", out, "cluster bye")
	}
}

func eventMessages(evs []v1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Message)
	}
	return out
}
