//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// sleeper runs until SIGTERM, then exits 0 at once.
const sleeper = `trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done`

// httpServer serves "$MSG" over HTTP on port 8080 and exits on SIGTERM.
const httpServer = `mkdir -p /www && echo "$MSG" > /www/index.html
httpd -f -p 8080 -h /www &
trap 'kill $!; exit 0' TERM
wait`

// manifest renders a static pod manifest. Every pod gets a short grace
// period unless mutate sets another.
func manifest(t *testing.T, name string, mutate func(*v1.Pod)) string {
	t.Helper()
	grace := int64(5)
	pod := &v1.Pod{}
	pod.APIVersion = "v1"
	pod.Kind = "Pod"
	pod.Name = name
	pod.Spec.TerminationGracePeriodSeconds = &grace
	mutate(pod)
	b, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatalf("render manifest %s: %v", name, err)
	}
	return string(b)
}

// shContainer is a busybox container running script with sh -c.
func shContainer(name, script string) v1.Container {
	return v1.Container{
		Name:            name,
		Image:           busyboxImage,
		ImagePullPolicy: v1.PullIfNotPresent,
		Command:         []string{"sh", "-c", script},
	}
}

func webPod(t *testing.T, name, msg string, hostPort int32) string {
	return manifest(t, name, func(p *v1.Pod) {
		c := shContainer("httpd", httpServer)
		c.Env = []v1.EnvVar{{Name: "MSG", Value: msg}}
		c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: hostPort, Protocol: v1.ProtocolTCP}}
		p.Spec.Containers = []v1.Container{c}
	})
}

func TestReadOnlyEndpoints(t *testing.T) {
	h := startHeartlet(t)
	t.Run("healthz", func(t *testing.T) {
		waitFor(t, 30*time.Second, "healthz to answer ok", func() (bool, string) {
			body, code, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.healthzPort))
			if err != nil {
				return false, err.Error()
			}
			return code == 200 && strings.TrimSpace(string(body)) == "ok", fmt.Sprintf("status %d body %q", code, body)
		})
	})
	t.Run("empty pod list", func(t *testing.T) {
		body, code, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/pods", h.roPort))
		if err != nil || code != 200 {
			t.Fatalf("GET /pods: status %d, err %v", code, err)
		}
		var list v1.PodList
		if err := yaml.Unmarshal(body, &list); err != nil {
			t.Fatalf("decode /pods: %v", err)
		}
		if list.Kind != "PodList" || list.APIVersion != "v1" {
			t.Errorf("kind/apiVersion = %q/%q, want PodList/v1", list.Kind, list.APIVersion)
		}
		if len(list.Items) != 0 {
			t.Errorf("got %d pods with an empty manifest dir", len(list.Items))
		}
	})
}

// (a) A static pod runs and serves HTTP on its pod IP and its host port.
func TestStaticPodServesHTTP(t *testing.T) {
	h := startHeartlet(t)
	const hostPort = 18081
	h.addPod(t, "web.yaml", "web", webPod(t, "web", "hello-e2e", hostPort))
	pod := h.waitRunning(t, "web")

	if pod.Namespace != "default" || pod.Name != "web-"+nodeName {
		t.Errorf("pod is %s/%s, want default/web-%s", pod.Namespace, pod.Name, nodeName)
	}
	if pod.Spec.NodeName != nodeName {
		t.Errorf("spec.nodeName = %q, want %q", pod.Spec.NodeName, nodeName)
	}
	if pod.UID == "" {
		t.Error("pod has no UID")
	}
	if src := pod.Annotations["kubernetes.io/config.source"]; src != "file" {
		t.Errorf("annotation kubernetes.io/config.source = %q, want file", src)
	}
	if net.ParseIP(pod.Status.PodIP) == nil {
		t.Fatalf("status.podIP %q is not an IP", pod.Status.PodIP)
	}
	waitHTTP(t, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/", "hello-e2e", 30*time.Second)

	t.Run("ready", func(t *testing.T) {
		h.waitPod(t, "web", 30*time.Second, "to be Ready", func(p *v1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			return podCondition(p, v1.PodReady) == v1.ConditionTrue && cs.Ready && cs.State.Running != nil &&
				cs.ContainerID != "" && cs.Name == "httpd"
		})
	})
	t.Run("hostIP", func(t *testing.T) {
		h.waitPod(t, "web", 30*time.Second, "to report status.hostIP", func(p *v1.Pod) bool {
			return net.ParseIP(p.Status.HostIP) != nil && len(p.Status.HostIPs) > 0
		})
	})
	t.Run("hostPort", func(t *testing.T) {
		waitHTTP(t, "http://"+net.JoinHostPort(nodeIP(t), strconv.Itoa(hostPort))+"/", "hello-e2e", 30*time.Second)
	})
}

// (b) Changing the manifest replaces the pod: a new UID, new containers, the
// new spec in effect, and the old pod's sandbox gone.
func TestStaticPodUpdate(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "web.yaml", "web", webPod(t, "web", "version-one", 0))
	old := h.waitRunning(t, "web")
	waitHTTP(t, "http://"+net.JoinHostPort(old.Status.PodIP, "8080")+"/", "version-one", 30*time.Second)
	oldContainers := c.podContainers(t, string(old.UID), "httpd")
	if len(oldContainers) == 0 {
		t.Fatalf("no CRI container for pod %s", old.UID)
	}

	h.writeManifest(t, "web.yaml", webPod(t, "web", "version-two", 0))
	updated := h.waitPod(t, "web", podStartTimeout, "to be replaced by a Running pod with a new UID", func(p *v1.Pod) bool {
		return p.UID != old.UID && p.Status.Phase == v1.PodRunning && p.Status.PodIP != ""
	})
	waitHTTP(t, "http://"+net.JoinHostPort(updated.Status.PodIP, "8080")+"/", "version-two", 30*time.Second)

	newContainers := c.podContainers(t, string(updated.UID), "httpd")
	if len(newContainers) == 0 {
		t.Fatalf("no CRI container for the new pod %s", updated.UID)
	}
	if newContainers[0].Id == oldContainers[0].Id {
		t.Errorf("container %s was kept across the change", newContainers[0].Id)
	}
	waitFor(t, podRemoveTimeout, "the old pod's sandboxes and containers to be removed", func() (bool, string) {
		sbs, cs := c.podSandboxes(t, string(old.UID)), c.podContainers(t, string(old.UID), "")
		return len(sbs)+len(cs) == 0, fmt.Sprintf("%d sandboxes, %d containers left", len(sbs), len(cs))
	})
	waitFor(t, 30*time.Second, "/pods to list the pod once", func() (bool, string) {
		pods, err := h.pods()
		if err != nil {
			return false, err.Error()
		}
		var uids []string
		for _, p := range pods {
			if p.Name == staticPodName("web") {
				uids = append(uids, string(p.UID))
			}
		}
		return len(uids) == 1 && uids[0] == string(updated.UID), fmt.Sprintf("UIDs listed: %v", uids)
	})
}

// (c) Removing the manifest removes the containers, the sandbox and the pod
// cgroup, for each QoS class.
func TestStaticPodRemoval(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	tests := []struct {
		name      string
		resources v1.ResourceRequirements
		qos       v1.PodQOSClass
		memLimit  int64 // expected memory.limit_in_bytes of the pod cgroup, 0 = unchecked
	}{
		{name: "besteffort", qos: v1.PodQOSBestEffort},
		{
			name: "burstable",
			resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceMemory: resource.MustParse("32Mi"),
			}},
			qos: v1.PodQOSBurstable,
		},
		{
			name: "guaranteed",
			resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse("100m"),
				v1.ResourceMemory: resource.MustParse("64Mi"),
			}},
			qos:      v1.PodQOSGuaranteed,
			memLimit: 64 << 20,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "rm-" + tt.name
			file := name + ".yaml"
			h.addPod(t, file, name, manifest(t, name, func(p *v1.Pod) {
				ctr := shContainer("app", sleeper)
				ctr.Resources = tt.resources
				p.Spec.Containers = []v1.Container{ctr}
			}))
			pod := h.waitRunning(t, name)
			uid := string(pod.UID)
			if pod.Status.QOSClass != tt.qos {
				t.Errorf("status.qosClass = %q, want %q", pod.Status.QOSClass, tt.qos)
			}
			memDir := podCgroupDir("memory", tt.qos, uid)
			if _, err := os.Stat(memDir); err != nil {
				t.Fatalf("pod cgroup: %v", err)
			}
			if tt.memLimit != 0 {
				if got := readInt(t, filepath.Join(memDir, "memory.limit_in_bytes")); got != tt.memLimit {
					t.Errorf("pod memory.limit_in_bytes = %d, want %d", got, tt.memLimit)
				}
			}
			// Every hierarchy that holds the pod now must not hold it later.
			var dirs []string
			ctrls, _ := filepath.Glob("/sys/fs/cgroup/*")
			for _, ctrl := range append(ctrls, "/sys/fs/cgroup/unified") {
				if fi, err := os.Lstat(ctrl); err != nil || !fi.IsDir() {
					continue
				}
				d := podCgroupDir(filepath.Base(ctrl), tt.qos, uid)
				if _, err := os.Stat(d); err == nil && !slices.Contains(dirs, d) {
					dirs = append(dirs, d)
				}
			}
			if len(c.podSandboxes(t, uid)) == 0 || len(c.podContainers(t, uid, "")) == 0 {
				t.Fatalf("CRI shows no sandbox or container for running pod %s", uid)
			}

			h.removeManifest(t, file)
			waitFor(t, podRemoveTimeout, "the pod to leave /pods", func() (bool, string) {
				p, err := h.pod(name)
				if err != nil {
					return false, err.Error()
				}
				return p == nil, "still listed"
			})
			waitFor(t, podRemoveTimeout, "the pod's sandboxes and containers to be removed", func() (bool, string) {
				sbs, cs := c.podSandboxes(t, uid), c.podContainers(t, uid, "")
				return len(sbs)+len(cs) == 0, fmt.Sprintf("%d sandboxes, %d containers left", len(sbs), len(cs))
			})
			waitFor(t, podRemoveTimeout, "the pod cgroups to be removed", func() (bool, string) {
				var left []string
				for _, d := range dirs {
					if _, err := os.Stat(d); err == nil {
						left = append(left, d)
					}
				}
				return len(left) == 0, fmt.Sprintf("left: %v", left)
			})
		})
	}
}

// (d) Init containers run one at a time, in order, before the app.
func TestInitContainersRunInOrder(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "init.yaml", "init", manifest(t, "init", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{
			shContainer("init1", "echo init1; sleep 1"),
			shContainer("init2", "echo init2; sleep 1"),
		}
		p.Spec.Containers = []v1.Container{shContainer("app", sleeper)}
	}))
	pod := h.waitPod(t, "init", podStartTimeout, "to be Running", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning
	})
	uid := string(pod.UID)

	cs := byName(c.podContainers(t, uid, ""))
	var st [3]*runtimeapi.ContainerStatus
	for i, name := range []string{"init1", "init2", "app"} {
		ctr, ok := cs[name]
		if !ok {
			t.Fatalf("no CRI container %q for pod %s (init containers must be kept after they complete)", name, uid)
		}
		st[i] = c.mustStatus(t, ctr.Id)
	}
	for i, name := range []string{"init1", "init2"} {
		if st[i].State != runtimeapi.ContainerState_CONTAINER_EXITED || st[i].ExitCode != 0 {
			t.Errorf("%s: state %v exit code %d, want exited with 0", name, st[i].State, st[i].ExitCode)
		}
	}
	ts := func(ns int64) time.Time { return time.Unix(0, ns) }
	if !(st[0].FinishedAt <= st[1].StartedAt) {
		t.Errorf("init2 started at %v, before init1 finished at %v", ts(st[1].StartedAt), ts(st[0].FinishedAt))
	}
	if !(st[1].FinishedAt <= st[2].StartedAt) {
		t.Errorf("app started at %v, before init2 finished at %v", ts(st[2].StartedAt), ts(st[1].FinishedAt))
	}
	if !(st[1].CreatedAt >= st[0].FinishedAt) {
		t.Errorf("init2 was created at %v, before init1 finished at %v", ts(st[1].CreatedAt), ts(st[0].FinishedAt))
	}

	pod = h.waitPod(t, "init", 30*time.Second, "to report both init containers Completed", func(p *v1.Pod) bool {
		if len(p.Status.InitContainerStatuses) != 2 {
			return false
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 || s.State.Terminated.Reason != "Completed" {
				return false
			}
		}
		return podCondition(p, v1.PodInitialized) == v1.ConditionTrue
	})
	if got := []string{pod.Status.InitContainerStatuses[0].Name, pod.Status.InitContainerStatuses[1].Name}; !slices.Equal(got, []string{"init1", "init2"}) {
		t.Errorf("initContainerStatuses order = %v, want [init1 init2]", got)
	}
}

// (e) A crashing container is restarted with a growing back-off and the pod
// reports CrashLoopBackOff. As upstream, the first exit is restarted at once;
// the back-off (10 s, then 20 s, ...) applies from the second exit on.
func TestCrashLoopBackOff(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "crash.yaml", "crash", manifest(t, "crash", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyAlways
		p.Spec.Containers = []v1.Container{shContainer("crash", "echo start; sleep 2; exit 1")}
	}))
	pod := h.waitPod(t, "crash", podStartTimeout, "to exist with a UID", func(p *v1.Pod) bool { return p.UID != "" })
	uid := string(pod.UID)

	// Attempts may be garbage-collected once dead, so record each on sight.
	type attempt struct {
		id      string
		created time.Time
		attempt uint32
	}
	var attempts []attempt
	sawBackOff := false
	waitFor(t, 3*time.Minute, "four attempts of the crashing container", func() (bool, string) {
		for _, ctr := range c.podContainers(t, uid, "crash") {
			if !slices.ContainsFunc(attempts, func(a attempt) bool { return a.id == ctr.Id }) {
				attempts = append(attempts, attempt{id: ctr.Id, created: time.Unix(0, ctr.CreatedAt), attempt: ctr.GetMetadata().GetAttempt()})
			}
		}
		if p, err := h.pod("crash"); err == nil && p != nil {
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
					sawBackOff = true
				}
			}
		}
		return len(attempts) >= 4, fmt.Sprintf("%d attempts so far", len(attempts))
	})
	slices.SortFunc(attempts, func(a, b attempt) int { return a.created.Compare(b.created) })
	var gaps []time.Duration
	for i := 1; i < 4; i++ {
		gaps = append(gaps, attempts[i].created.Sub(attempts[i-1].created))
	}
	t.Logf("gaps between attempts (each includes 2 s of running): %v", gaps)
	// Each gap is ~2 s of running plus the back-off: none, 10 s, 20 s.
	if gaps[0] > 8*time.Second {
		t.Errorf("first restart came %v after the first start, want about 2 s (restart at once after the first exit)", gaps[0])
	}
	if gaps[1] < 10*time.Second || gaps[1] > 25*time.Second {
		t.Errorf("second restart came %v after the first, want about 12 s (2 s run + 10 s back-off)", gaps[1])
	}
	if gaps[2] < 18*time.Second || gaps[2] > 45*time.Second || gaps[2] < gaps[1]+5*time.Second {
		t.Errorf("third restart came %v after the second, want about 22 s (2 s run + 20 s back-off), clearly longer than %v", gaps[2], gaps[1])
	}
	for i, a := range attempts[:4] {
		if a.attempt != uint32(i) {
			t.Errorf("container %s has attempt %d, want %d", a.id, a.attempt, i)
		}
	}
	if !sawBackOff {
		t.Error("the container never showed waiting reason CrashLoopBackOff in /pods")
	}
	h.waitPod(t, "crash", 30*time.Second, "to report restartCount >= 3", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3
	})
}

// (f) Removing a pod honours terminationGracePeriodSeconds: a container that
// handles TERM gets time to finish, one that ignores it is killed when the
// grace period ends.
func TestGracefulTermination(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	tests := []struct {
		name     string
		grace    int64
		trap     string
		exitCode int32
		// The container must end between min and max after it got TERM.
		min, max time.Duration
	}{
		{
			name:     "handler-finishes",
			grace:    30,
			trap:     `trap 'echo got TERM; sleep 3; exit 0' TERM`,
			exitCode: 0,
			min:      2500 * time.Millisecond, max: 8 * time.Second,
		},
		{
			name:     "term-ignored",
			grace:    2,
			trap:     `trap 'echo got TERM' TERM`,
			exitCode: 137,
			min:      1500 * time.Millisecond, max: 6 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "grace-" + tt.name
			file := name + ".yaml"
			// The handler's output is the container's stdout; "wait" lets the
			// trap run at once. "$$$$" is "$$" after the kubelet's $(VAR)
			// expansion, which turns "$$" into "$".
			script := tt.trap + "; echo ready pid=$$$$; while true; do sleep 1 & wait $!; done"
			h.addPod(t, file, name, manifest(t, name, func(p *v1.Pod) {
				grace := tt.grace
				p.Spec.TerminationGracePeriodSeconds = &grace
				p.Spec.Containers = []v1.Container{shContainer("app", script)}
			}))
			pod := h.waitRunning(t, name)
			ctrs := c.podContainers(t, string(pod.UID), "app")
			if len(ctrs) != 1 {
				t.Fatalf("want 1 app container, CRI has %d", len(ctrs))
			}
			id := ctrs[0].Id
			logPath := c.mustStatus(t, id).LogPath
			var logData []byte
			waitFor(t, 30*time.Second, "the container to log ready", func() (bool, string) {
				logData, _ = os.ReadFile(logPath)
				return bytes.Contains(logData, []byte("ready")), fmt.Sprintf("log %s: %q", logPath, logData)
			})
			if !bytes.Contains(logData, []byte("ready pid=1\n")) {
				t.Errorf("the container's process is not PID 1 of its own PID namespace (upstream gives each container one unless shareProcessNamespace); log: %q", logData)
			}

			removed := time.Now()
			h.removeManifest(t, file)
			var (
				finished time.Time
				exitCode int32
				exited   bool
			)
			deadline := removed.Add(time.Duration(tt.grace)*time.Second + 60*time.Second)
			for time.Now().Before(deadline) {
				if b, err := os.ReadFile(logPath); err == nil {
					logData = b
				}
				st, err := c.status(id)
				if status.Code(err) == codes.NotFound {
					finished = time.Now()
					break
				}
				if err == nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
					finished, exitCode, exited = time.Unix(0, st.FinishedAt), st.ExitCode, true
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if finished.IsZero() {
				t.Fatalf("container %s still running %v after its manifest was removed", id, time.Since(removed))
			}
			termAt, ok := logTime(logData, "got TERM")
			if !ok {
				t.Fatalf("the container never logged TERM; log:\n%s", logData)
			}
			if d := termAt.Sub(removed); d > 30*time.Second {
				t.Errorf("TERM arrived %v after the manifest was removed", d)
			}
			ran := finished.Sub(termAt)
			t.Logf("TERM at +%v, exit %v after TERM (exit observed: %v, code %d)", termAt.Sub(removed), ran, exited, exitCode)
			if ran < tt.min || ran > tt.max {
				t.Errorf("container ended %v after TERM, want between %v and %v", ran, tt.min, tt.max)
			}
			if exited && exitCode != tt.exitCode {
				t.Errorf("exit code %d, want %d", exitCode, tt.exitCode)
			}
			if !exited {
				t.Logf("container was removed before its exit could be observed; exit code unchecked")
			}
		})
	}
}

// (g) After kill -9 and a restart with the same root dir and manifests,
// heartlet adopts the running pod: same sandbox, same containers, same
// restart counts.
func TestRestartAdoptsRunningPods(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "adopt.yaml", "adopt", manifest(t, "adopt", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("one", sleeper), shContainer("two", sleeper)}
	}))
	pod := h.waitPod(t, "adopt", podStartTimeout, "to be Ready", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && podCondition(p, v1.PodReady) == v1.ConditionTrue
	})
	uid := string(pod.UID)
	before := snapshot(t, c, uid)
	restarts := restartCounts(pod)

	h.kill()
	if got := snapshot(t, c, uid); got != before {
		t.Fatalf("the pod changed when heartlet was killed:\nbefore %s\nafter  %s", before, got)
	}
	h.start()
	after := h.waitPod(t, "adopt", podStartTimeout, "to be reported Running again", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 2
	})
	if after.UID != pod.UID {
		t.Fatalf("pod UID changed across the restart: %s -> %s", pod.UID, after.UID)
	}
	// Give heartlet time to (wrongly) restart anything.
	end := time.Now().Add(15 * time.Second)
	for time.Now().Before(end) {
		if got := snapshot(t, c, uid); got != before {
			t.Fatalf("heartlet changed the pod after restarting:\nbefore %s\nafter  %s", before, got)
		}
		time.Sleep(500 * time.Millisecond)
	}
	after = h.waitPod(t, "adopt", 30*time.Second, "to report both containers", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 2
	})
	for name, n := range restartCounts(after) {
		if n != restarts[name] {
			t.Errorf("container %s: restartCount %d after the restart, %d before", name, n, restarts[name])
		}
	}
	for _, cs := range after.Status.ContainerStatuses {
		if !strings.Contains(before, containerID(cs.ContainerID)) || cs.ContainerID == "" {
			t.Errorf("container %s reports ID %q, not one of the original containers", cs.Name, cs.ContainerID)
		}
	}
}

// snapshot describes the sandboxes and containers of a pod as CRI sees them.
func snapshot(t *testing.T, c *cri, uid string) string {
	t.Helper()
	var parts []string
	for _, sb := range c.podSandboxes(t, uid) {
		parts = append(parts, fmt.Sprintf("sandbox %s %v", sb.Id, sb.State))
	}
	for _, ctr := range c.podContainers(t, uid, "") {
		parts = append(parts, fmt.Sprintf("container %s %s attempt=%d %v", ctr.GetLabels()[labelContainerName], ctr.Id, ctr.GetMetadata().GetAttempt(), ctr.State))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

func restartCounts(p *v1.Pod) map[string]int32 {
	m := make(map[string]int32)
	for _, cs := range p.Status.ContainerStatuses {
		m[cs.Name] = cs.RestartCount
	}
	return m
}

// (h) Malformed manifests next to a good one: the good pod runs and
// heartlet's log names each bad file.
func TestMalformedManifest(t *testing.T) {
	h := startHeartlet(t)
	bad := []struct{ file, content string }{
		{"broken-yaml.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers: [ {name: x\n"},
		{"not-a-pod.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-pod\ndata:\n  a: b\n"},
	}
	for _, b := range bad {
		h.writeManifest(t, b.file, b.content)
		t.Cleanup(func() { h.removeManifest(t, b.file) })
	}
	h.addPod(t, "good.yaml", "good", manifest(t, "good", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("app", sleeper)}
	}))
	h.waitRunning(t, "good")
	for _, b := range bad {
		waitFor(t, 30*time.Second, "heartlet's log to name "+b.file, func() (bool, string) {
			return h.logContains(b.file), "not mentioned yet"
		})
	}
	pods, err := h.pods()
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	if len(pods) != 1 {
		var names []string
		for _, p := range pods {
			names = append(names, p.Name)
		}
		t.Errorf("/pods lists %v, want only %s", names, staticPodName("good"))
	}
	if !h.running() {
		t.Errorf("heartlet exited: %v", h.err)
	}
}

// (i) A container's output lands in
// <podLogsDir>/<namespace>_<pod>_<uid>/<container>/0.log in the CRI format.
func TestContainerLogs(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)
	h.addPod(t, "logs.yaml", "logs", manifest(t, "logs", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("talker", "echo hello-stdout; echo hello-stderr >&2; "+sleeper)}
	}))
	pod := h.waitRunning(t, "logs")
	want := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", staticPodName("logs"), pod.UID), "talker", "0.log")
	var data []byte
	waitFor(t, 30*time.Second, "the container log "+want, func() (bool, string) {
		var err error
		data, err = os.ReadFile(want)
		if err != nil {
			return false, err.Error()
		}
		return bytes.Contains(data, []byte("hello-stderr")) && bytes.Contains(data, []byte("hello-stdout")), fmt.Sprintf("content %q", data)
	})
	lines := parseCRILog(t, data)
	for _, w := range []criLogLine{{stream: "stdout", tag: "F", msg: "hello-stdout"}, {stream: "stderr", tag: "F", msg: "hello-stderr"}} {
		if !slices.ContainsFunc(lines, func(l criLogLine) bool { return l.stream == w.stream && l.tag == w.tag && l.msg == w.msg }) {
			t.Errorf("no line %q %q %q in %s:\n%s", w.stream, w.tag, w.msg, want, data)
		}
	}
	ctrs := c.podContainers(t, string(pod.UID), "talker")
	if len(ctrs) != 1 {
		t.Fatalf("want 1 talker container, CRI has %d", len(ctrs))
	}
	if got := c.mustStatus(t, ctrs[0].Id).LogPath; got != want {
		t.Errorf("CRI log path = %q, want %q", got, want)
	}
}

// criLogLine is one line of a CRI container log:
// "<RFC3339Nano> <stream> <F|P> <message>".
type criLogLine struct {
	time   time.Time
	stream string
	tag    string
	msg    string
}

var criLogRE = regexp.MustCompile(`^(\S+) (stdout|stderr) ([FP]) (.*)$`)

func parseCRILog(t *testing.T, data []byte) []criLogLine {
	t.Helper()
	var out []criLogLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		m := criLogRE.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("log line %q is not in CRI format", sc.Text())
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			t.Errorf("log line %q: timestamp: %v", sc.Text(), err)
			continue
		}
		out = append(out, criLogLine{time: ts, stream: m[2], tag: m[3], msg: m[4]})
	}
	return out
}

// logTime returns the timestamp of the first CRI log line containing s.
func logTime(data []byte, s string) (time.Time, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		m := criLogRE.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[4], s) {
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			return ts, true
		}
	}
	return time.Time{}, false
}

// nodeIP is the address the machine uses for its default route: where a
// host port is reachable (portmap does not forward 127.0.0.1).
func nodeIP(t *testing.T) string {
	t.Helper()
	conn, err := net.Dial("udp", "192.0.2.1:9") // no packet is sent
	if err != nil {
		t.Fatalf("find the node IP: %v", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

func podCondition(p *v1.Pod, ct v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return n
}
