//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const (
	pollInterval = 250 * time.Millisecond
	// podStartTimeout covers a first image pull from the local registry.
	podStartTimeout = 2 * time.Minute
	// podRemoveTimeout is how long heartlet may take to tear a pod down.
	podRemoveTimeout = time.Minute
	// startTimeout is how long heartlet may take to serve its read-only port.
	startTimeout = time.Minute
	// stopTimeout is how long heartlet may take to exit after SIGTERM.
	stopTimeout = 30 * time.Second
)

// heartlet is one heartlet process under test, with its own root dir,
// manifest dir, pod log dir, config file and ports.
type heartlet struct {
	t           *testing.T
	dir         string
	rootDir     string
	manifestDir string
	podLogsDir  string
	configPath  string
	logPath     string
	roPort      int
	healthzPort int
	apiPort     int // the kubelet API (HTTPS) port
	// node, when set, is the node container heartlet runs in (its
	// namespaces, its containerd); see nodecontainer_test.go.
	node *nodeContainer
	// bin is the agent binary run by run; heartletBin when empty (the
	// switch test runs the upstream kubelet with the same directories).
	bin string

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd.Wait's result, set before done is closed
}

// startHeartlet starts heartlet with fresh directories and free ports and
// waits until its read-only port answers. It is stopped with SIGTERM when the
// test ends; its log is printed if the test failed.
func startHeartlet(t *testing.T) *heartlet {
	t.Helper()
	h := newHeartlet(t, "")
	t.Cleanup(h.cleanup)
	h.start()
	return h
}

// newHeartlet lays out a heartlet's directories under a fresh temporary
// directory, picks free ports and writes its configuration file, with
// extra appended to the KubeletConfiguration. It starts nothing.
func newHeartlet(t *testing.T, extra string) *heartlet {
	t.Helper()
	dir := t.TempDir()
	h := &heartlet{
		t:           t,
		dir:         dir,
		rootDir:     filepath.Join(dir, "root"),
		manifestDir: filepath.Join(dir, "manifests"),
		podLogsDir:  filepath.Join(dir, "pod-logs"),
		configPath:  filepath.Join(dir, "config.yaml"),
		logPath:     filepath.Join(dir, "heartlet.log"),
		roPort:      freePort(t),
		healthzPort: freePort(t),
		apiPort:     freePort(t),
	}
	for _, d := range []string{h.rootDir, h.manifestDir, h.podLogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("create %s: %v", d, err)
		}
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
readOnlyPort: %d
healthzPort: %d
healthzBindAddress: 127.0.0.1
port: %d
podLogsDir: %s
cgroupDriver: cgroupfs
failSwapOn: false
%s`, h.roPort, h.healthzPort, h.apiPort, h.podLogsDir, extra)
	if err := os.WriteFile(h.configPath, []byte(config), 0o644); err != nil {
		t.Fatalf("write heartlet config: %v", err)
	}
	return h
}

// start runs the binary (again, after a kill) and waits until it serves.
func (h *heartlet) start() {
	h.t.Helper()
	h.run("standalone",
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", h.criEndpoint(),
		"--hostname-override", nodeName,
		"--v", "2",
		// Standalone mode has no API server for webhook authentication
		// and authorization of the kubelet API.
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
	)
}

// run starts the binary with args, its output appended to the log file,
// and waits until its read-only port serves /pods.
func (h *heartlet) run(mode string, args ...string) {
	h.t.Helper()
	logFile, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		h.t.Fatalf("open heartlet log: %v", err)
	}
	bin := h.bin
	if bin == "" {
		bin = heartletBin
	}
	fmt.Fprintf(logFile, "===== e2e: starting %s (%s) at %s\n", filepath.Base(bin), mode, time.Now().Format(time.RFC3339Nano))
	cmd := h.command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		h.t.Fatalf("start %s: %v", bin, err)
	}
	h.cmd = cmd
	h.done = make(chan struct{})
	done := h.done
	go func() {
		h.err = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		if _, err := h.pods(); err == nil {
			return
		} else if time.Now().After(deadline) {
			h.t.Fatalf("heartlet did not serve http://127.0.0.1:%d/pods within %v: %v", h.roPort, startTimeout, err)
		}
		select {
		case <-done:
			h.t.Fatalf("heartlet exited during startup: %v", h.err)
		case <-time.After(pollInterval):
		}
	}
}

// command returns the command that runs the binary with args, in the
// node container when heartlet has one.
func (h *heartlet) command(bin string, args ...string) *exec.Cmd {
	if h.node != nil {
		return h.node.command(bin, args...)
	}
	return exec.Command(bin, args...)
}

// criEndpoint is the runtime heartlet talks to.
func (h *heartlet) criEndpoint() string {
	if h.node != nil {
		return nodeCRIEndpoint
	}
	return criEndpoint
}

// signal sends sig to heartlet: in a node container to the process that
// nsenter started, which nsenter does not pass signals to.
func (h *heartlet) signal(sig syscall.Signal) {
	pid := h.cmd.Process.Pid
	if h.node != nil {
		if child, ok := childPID(pid); ok {
			pid = child
		}
	}
	_ = syscall.Kill(pid, sig)
}

// running reports whether the process is still alive.
func (h *heartlet) running() bool {
	if h.done == nil {
		return false
	}
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the exit, killing after stopTimeout.
func (h *heartlet) stop() {
	h.t.Helper()
	if !h.running() {
		return
	}
	h.signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(stopTimeout):
		h.t.Errorf("heartlet did not exit within %v of SIGTERM; killing it", stopTimeout)
		h.kill()
	}
}

// kill sends SIGKILL and waits for the exit.
func (h *heartlet) kill() {
	h.t.Helper()
	if !h.running() {
		return
	}
	h.signal(syscall.SIGKILL)
	<-h.done
}

func (h *heartlet) cleanup() {
	h.stop()
	if !h.t.Failed() {
		return
	}
	data, err := os.ReadFile(h.logPath)
	if err != nil {
		h.t.Logf("read heartlet log: %v", err)
		return
	}
	if artifactsDir != "" {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(h.t.Name()) + ".heartlet.log"
		if err := os.MkdirAll(artifactsDir, 0o755); err == nil {
			_ = os.WriteFile(filepath.Join(artifactsDir, name), data, 0o644)
		}
	}
	const max = 256 << 10
	if len(data) > max {
		data = append([]byte("...(truncated)...\n"), data[len(data)-max:]...)
	}
	h.t.Logf("heartlet log (%s):\n%s", h.logPath, data)
}

// logContains reports whether heartlet's log mentions s.
func (h *heartlet) logContains(s string) bool {
	data, err := os.ReadFile(h.logPath)
	return err == nil && bytes.Contains(data, []byte(s))
}

// The methods below take the *testing.T of the (sub)test that calls them:
// failures and cleanups belong to it, not to the test that started heartlet.

// writeManifest writes a manifest atomically (a dot-file renamed into place,
// so heartlet never reads half a file).
func (h *heartlet) writeManifest(t *testing.T, file, content string) {
	t.Helper()
	tmp := filepath.Join(h.manifestDir, ".tmp-"+file)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatalf("write manifest %s: %v", file, err)
	}
	if err := os.Rename(tmp, filepath.Join(h.manifestDir, file)); err != nil {
		t.Fatalf("install manifest %s: %v", file, err)
	}
}

func (h *heartlet) removeManifest(t *testing.T, file string) {
	t.Helper()
	if err := os.Remove(filepath.Join(h.manifestDir, file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("remove manifest %s: %v", file, err)
	}
}

// addPod writes the manifest of static pod name and registers a cleanup that
// removes it and waits until heartlet has removed the pod's sandboxes.
func (h *heartlet) addPod(t *testing.T, file, name, content string) {
	t.Helper()
	h.writeManifest(t, file, content)
	t.Cleanup(func() {
		h.removeManifest(t, file)
		h.waitPodGone(t, name)
	})
}

// waitPodGone waits until no sandbox or container of static pod name is
// left. If heartlet is not running (or does not manage it in time), the
// leftovers are removed through CRI so that later tests start clean.
func (h *heartlet) waitPodGone(t *testing.T, name string) {
	t.Helper()
	c := newCRI(t)
	full := staticPodName(name)
	deadline := time.Now().Add(podRemoveTimeout)
	for h.running() && time.Now().Before(deadline) {
		if n, err := c.countPodObjects(full); err == nil && n == 0 {
			return
		}
		time.Sleep(pollInterval)
	}
	n, err := c.countPodObjects(full)
	if err == nil && n == 0 {
		return
	}
	if h.running() {
		t.Errorf("heartlet did not remove pod %s within %v (%d sandboxes/containers left, err %v)", full, podRemoveTimeout, n, err)
	}
	c.forceRemovePod(t, full)
}

// staticPodName is the name heartlet gives the static pod of a manifest.
func staticPodName(manifestName string) string { return manifestName + "-" + nodeName }

// pods fetches GET /pods from the read-only port.
func (h *heartlet) pods() ([]v1.Pod, error) {
	body, status, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/pods", h.roPort))
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: status %d: %s", status, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return list.Items, nil
}

// pod returns static pod name from /pods, or nil.
func (h *heartlet) pod(name string) (*v1.Pod, error) {
	pods, err := h.pods()
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == staticPodName(name) && pods[i].Namespace == "default" {
			return &pods[i], nil
		}
	}
	return nil, nil
}

// waitPod polls /pods until static pod name satisfies cond and returns it.
func (h *heartlet) waitPod(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var found *v1.Pod
	waitFor(t, timeout, fmt.Sprintf("pod %s %s", staticPodName(name), what), func() (bool, string) {
		if !h.running() {
			t.Fatalf("heartlet exited: %v", h.err)
		}
		p, err := h.pod(name)
		if err != nil {
			return false, err.Error()
		}
		if p == nil {
			return false, "not in /pods"
		}
		found = p
		return cond(p), "last status: " + describeStatus(p)
	})
	return found
}

// waitRunning waits until the pod is Running with a pod IP.
func (h *heartlet) waitRunning(t *testing.T, name string) *v1.Pod {
	t.Helper()
	return h.waitPod(t, name, podStartTimeout, "to be Running with a pod IP", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && p.Status.PodIP != ""
	})
}

func describeStatus(p *v1.Pod) string {
	b, err := json.Marshal(p.Status)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("uid=%s %s", p.UID, b)
}

// waitFor polls cond until it holds or timeout passes; on timeout the test
// fails with what and cond's last detail.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; %s", timeout, what, detail)
		}
		time.Sleep(pollInterval)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func httpGet(url string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// waitHTTP polls url until it answers 200 with a body containing want.
func waitHTTP(t *testing.T, url, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("GET %s to return %q", url, want), func() (bool, string) {
		body, status, err := httpGet(url)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusOK && strings.Contains(string(body), want),
			fmt.Sprintf("status %d body %q", status, body)
	})
}

// Ports handed out by freePort: below the kernel's ephemeral range
// (32768–60999 by default), so that no outgoing connection takes one
// between freePort's check and heartlet's bind (a port the kernel chose
// for a listen on :0 is one it may also give an outgoing connection), and
// each at most once per run of the tests.
const (
	freePortMin = 20000
	freePortMax = 30000
)

var (
	freePortsMu   sync.Mutex
	freePortsUsed = map[int]bool{}
)

// freePort returns a TCP port nothing listens on, on any address.
func freePort(t *testing.T) int {
	t.Helper()
	freePortsMu.Lock()
	defer freePortsMu.Unlock()
	for range 1000 {
		p := freePortMin + rand.IntN(freePortMax-freePortMin)
		if freePortsUsed[p] {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		freePortsUsed[p] = true
		return p
	}
	t.Fatalf("no free port in [%d, %d)", freePortMin, freePortMax)
	return 0
}

// containerID strips the runtime prefix of a status containerID
// ("containerd://<id>").
func containerID(s string) string {
	if _, id, ok := strings.Cut(s, "://"); ok {
		return id
	}
	return s
}

// podCgroupDir is the v1 cgroup directory of a pod under controller, by QoS
// class, in the upstream kubelet's cgroupfs layout.
func podCgroupDir(controller string, qos v1.PodQOSClass, uid string) string {
	base := filepath.Join("/sys/fs/cgroup", controller, "kubepods")
	switch qos {
	case v1.PodQOSGuaranteed:
		return filepath.Join(base, "pod"+uid)
	case v1.PodQOSBurstable:
		return filepath.Join(base, "burstable", "pod"+uid)
	default:
		return filepath.Join(base, "besteffort", "pod"+uid)
	}
}

// statusOf returns the status of the pod's container or init container
// name, or nil.
func statusOf(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
