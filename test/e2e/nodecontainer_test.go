//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// nodeCRIEndpoint is containerd's endpoint inside a node container.
const nodeCRIEndpoint = "unix:///run/containerd/containerd.sock"

// nodeScript drives node containers: a Debian root whose init is a real
// systemd, booted with systemd-nspawn, with its own containerd.
var nodeScript = filepath.Join("..", "..", "hack", "nodecontainer.sh")

// nodeContainer is one running node container.
type nodeContainer struct {
	name string
	pid  string // its systemd, on the host
	// cgroups are the host directories of the container's cgroup (the
	// root its systemd sees) by controller.
	cgroups map[string]string
}

// startNodeContainer boots a node container whose containerd uses the
// systemd cgroup driver, with the host paths binds visible at the same
// paths inside, and stops it when the test ends.
func startNodeContainer(t *testing.T, name string, binds ...string) *nodeContainer {
	t.Helper()
	cmd := exec.Command("bash", nodeScript, "start", name, "systemd")
	cmd.Env = append(os.Environ(), "HEARTLET_NODE_BINDS="+strings.Join(binds, " "))
	t.Cleanup(func() {
		if out, err := exec.Command("bash", nodeScript, "stop", name).CombinedOutput(); err != nil {
			t.Errorf("stop node container: %v\n%s", err, out)
		}
	})
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start node container (hack/nodecontainer.sh; hack/setup.sh test installs what it needs): %v\n%s", err, out)
	}
	t.Logf("node container %s booted in %v", name, time.Since(start).Round(100*time.Millisecond))
	out, err := exec.Command("bash", nodeScript, "info", name).Output()
	if err != nil {
		t.Fatalf("node container info: %v", err)
	}
	n := &nodeContainer{name: name, cgroups: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch {
		case k == "pid":
			n.pid = v
		case strings.HasPrefix(k, "cgroup."):
			n.cgroups[strings.TrimPrefix(k, "cgroup.")] = v
		}
	}
	if n.pid == "" || n.cgroups["memory"] == "" || n.cgroups["pids"] == "" || n.cgroups["cpu"] == "" {
		t.Fatalf("node container info lacks the pid or a cgroup:\n%s", out)
	}
	return n
}

// command runs name with args in the container's namespaces.
func (n *nodeContainer) command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"-t", n.pid, "-m", "-u", "-i", "-n", "-p", "-C", "--", name}, args...)...)
}

// run runs a command in the container and returns its output.
func (n *nodeContainer) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := n.command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("in node container: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// readInt reads a file holding one integer in the container.
func (n *nodeContainer) readInt(t *testing.T, path string) int64 {
	t.Helper()
	out := strings.TrimSpace(n.run(t, "cat", path))
	v, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("in node container: %s: %v", path, err)
	}
	return v
}

// unitProperties reads properties of a systemd unit in the container.
func (n *nodeContainer) unitProperties(t *testing.T, unit string, props ...string) map[string]string {
	t.Helper()
	args := []string{"show", unit}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	got := map[string]string{}
	for _, line := range strings.Split(n.run(t, "systemctl", args...), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got
}

// childPID returns the first child of a process (nsenter's, which runs the
// program in the entered PID namespace).
func childPID(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	c, err := strconv.Atoi(f[0])
	return c, err == nil
}

// podSlice is the pod's slice path under the container's cgroup root, as
// upstream's systemd driver names it.
func podSlice(qos v1.PodQOSClass, uid string) string {
	esc := strings.ReplaceAll(uid, "-", "_")
	switch qos {
	case v1.PodQOSGuaranteed:
		return "kubepods.slice/kubepods-pod" + esc + ".slice"
	case v1.PodQOSBurstable:
		return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"
	default:
		return "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc + ".slice"
	}
}

// cgroupDriver: systemd on a node whose init is systemd: the kubepods
// hierarchy is made of slices started through systemd's D-Bus API, the
// containers run in scopes below their pod's slice, every slice carries
// the limits (pod limits, podPidsLimit, allocatable on kubepods.slice),
// seen by systemd and in the cgroup files; a removed pod's slice goes;
// and a runtime set to the cgroupfs driver stops heartlet at start.
func TestSystemdCgroupDriver(t *testing.T) {
	h := newHeartlet(t, `podPidsLimit: 50
enforceNodeAllocatable: [pods]
systemReserved:
  cpu: 500m
  memory: 512Mi
  pid: "1000"
`)
	cfg, err := os.ReadFile(h.configPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("cgroupDriver: cgroupfs"), []byte("cgroupDriver: systemd"), 1)
	if err := os.WriteFile(h.configPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	node := startNodeContainer(t, "e2e", h.dir, filepath.Dir(heartletBin))
	h.node = node
	t.Cleanup(h.cleanup)
	h.start()

	pod := func(name, res string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: [sleep, "3600"]
%s`, name, busyboxImage, res)
	}
	h.writeManifest(t, "burst.yaml", pod("burst", `    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 300m, memory: 64Mi}
`))
	h.writeManifest(t, "guar.yaml", pod("guar", `    resources:
      limits: {cpu: 200m, memory: 48Mi}
`))
	// The best-effort pod forks until podPidsLimit stops it.
	h.writeManifest(t, "best.yaml", manifest(t, "best", func(p *v1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers = []v1.Container{shContainer("forker", forkLoop)}
	}))
	burst := h.waitRunning(t, "burst")
	guar := h.waitRunning(t, "guar")
	best := h.waitRunning(t, "best")

	// From outside: the cgroup files below the container's cgroup.
	const page = 4096
	for _, c := range []struct {
		what string
		file string
		want int64
	}{
		{"burstable pod memory", filepath.Join(node.cgroups["memory"], podSlice(v1.PodQOSBurstable, string(burst.UID)), "memory.limit_in_bytes"), 64 << 20},
		{"burstable pod cpu quota", filepath.Join(node.cgroups["cpu"], podSlice(v1.PodQOSBurstable, string(burst.UID)), "cpu.cfs_quota_us"), 30000},
		{"burstable pod cpu shares", filepath.Join(node.cgroups["cpu"], podSlice(v1.PodQOSBurstable, string(burst.UID)), "cpu.shares"), 102},
		{"burstable pod pids", filepath.Join(node.cgroups["pids"], podSlice(v1.PodQOSBurstable, string(burst.UID)), "pids.max"), 50},
		{"guaranteed pod memory", filepath.Join(node.cgroups["memory"], podSlice(v1.PodQOSGuaranteed, string(guar.UID)), "memory.limit_in_bytes"), 48 << 20},
		{"guaranteed pod cpu quota", filepath.Join(node.cgroups["cpu"], podSlice(v1.PodQOSGuaranteed, string(guar.UID)), "cpu.cfs_quota_us"), 20000},
		{"best-effort pod pids", filepath.Join(node.cgroups["pids"], podSlice(v1.PodQOSBestEffort, string(best.UID)), "pids.max"), 50},
		{"best-effort pod cpu shares", filepath.Join(node.cgroups["cpu"], podSlice(v1.PodQOSBestEffort, string(best.UID)), "cpu.shares"), 2},
		{"burstable class cpu shares", filepath.Join(node.cgroups["cpu"], "kubepods.slice/kubepods-burstable.slice/cpu.shares"), 102},
		{"kubepods memory (allocatable)", filepath.Join(node.cgroups["memory"], "kubepods.slice/memory.limit_in_bytes"), (memTotal(t) - 512<<20) / page * page},
		{"kubepods cpu shares (allocatable)", filepath.Join(node.cgroups["cpu"], "kubepods.slice/cpu.shares"), (onlineCPUs(t)*1000 - 500) * 1024 / 1000},
		// The task limit as heartlet sees it: kernels from 6.14 keep
		// pid_max per PID namespace.
		{"kubepods pids (allocatable)", filepath.Join(node.cgroups["pids"], "kubepods.slice/pids.max"),
			min(node.readInt(t, "/proc/sys/kernel/pid_max"), node.readInt(t, "/proc/sys/kernel/threads-max")) - 1000},
	} {
		if got := readInt(t, c.file); got != c.want {
			t.Errorf("%s: %s = %d, want %d", c.what, c.file, got, c.want)
		}
	}
	// The containers run in the runtime's scopes below their pod's slice.
	for _, p := range []*v1.Pod{burst, guar, best} {
		dir := filepath.Join(node.cgroups["memory"], podSlice(qosClass(p), string(p.UID)))
		scopes, _ := filepath.Glob(filepath.Join(dir, "cri-containerd-*.scope"))
		if len(scopes) < 2 { // the sandbox and the container
			t.Errorf("pod %s: %d runtime scopes in %s, want the sandbox's and the container's", p.Name, len(scopes), dir)
		}
	}

	// podPidsLimit holds the fork loop of the best-effort pod.
	bestPids := filepath.Join(node.cgroups["pids"], podSlice(v1.PodQOSBestEffort, string(best.UID)))
	logPath := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", best.Name, best.UID), "forker", "0.log")
	waitFor(t, time.Minute, "the fork loop to finish", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("forks done")), fmt.Sprintf("log: %q", lastBytes(b, 400))
	})
	current, procs := readInt(t, filepath.Join(bestPids, "pids.current")), countTasks(t, bestPids)
	t.Logf("best-effort pod slice: pids.current %d, %d tasks below it", current, procs)
	if current > 50 || procs > 50 || current < 40 {
		t.Errorf("best-effort pod slice holds %d tasks (pids.current %d), want at most podPidsLimit 50 and at least 40", procs, current)
	}

	// From inside: systemd knows the slices as units with the limits.
	burstUnit := filepath.Base(podSlice(v1.PodQOSBurstable, string(burst.UID)))
	got := node.unitProperties(t, burstUnit, "ActiveState", "MemoryLimit", "TasksMax", "CPUQuotaPerSecUSec", "ControlGroup")
	for k, want := range map[string]string{
		"ActiveState":        "active",
		"MemoryLimit":        strconv.Itoa(64 << 20),
		"TasksMax":           "50",
		"CPUQuotaPerSecUSec": "300ms",
		"ControlGroup":       "/" + podSlice(v1.PodQOSBurstable, string(burst.UID)),
	} {
		if got[k] != want {
			t.Errorf("systemd unit %s: %s=%q, want %q", burstUnit, k, got[k], want)
		}
	}
	kp := node.unitProperties(t, "kubepods.slice", "ActiveState", "MemoryLimit", "TasksMax")
	if kp["ActiveState"] != "active" || kp["MemoryLimit"] != strconv.FormatInt((memTotal(t)-512<<20)/page*page, 10) {
		t.Errorf("systemd unit kubepods.slice: %v, want active with MemoryLimit the allocatable memory", kp)
	}

	// A removed pod's slice goes, from systemd and from the hierarchies.
	// (The node container's end removes the other pods with it.)
	h.removeManifest(t, "burst.yaml")
	burstDir := filepath.Join(node.cgroups["pids"], podSlice(v1.PodQOSBurstable, string(burst.UID)))
	waitFor(t, podRemoveTimeout, "the removed pod and its slice to go", func() (bool, string) {
		if p, err := h.pod("burst"); err != nil || p != nil {
			return false, fmt.Sprintf("pod still reported (%v)", err)
		}
		if _, err := os.Stat(burstDir); err == nil {
			return false, burstDir + " exists"
		}
		st := node.unitProperties(t, burstUnit, "LoadState", "ActiveState")
		return st["ActiveState"] == "inactive", fmt.Sprintf("unit %v", st)
	})
	if got := readInt(t, filepath.Join(node.cgroups["cpu"], "kubepods.slice/kubepods-burstable.slice/cpu.shares")); got != 2 {
		t.Errorf("burstable class cpu.shares after its only pod went = %d, want 2", got)
	}

	// The runtime switched to the cgroupfs driver: heartlet refuses to
	// start, and doctor says why.
	h.stop()
	if out, err := exec.Command("bash", nodeScript, "containerd", node.name, "cgroupfs").CombinedOutput(); err != nil {
		t.Fatalf("switch containerd to cgroupfs: %v\n%s", err, out)
	}
	out, err := h.command(heartletBin, "--config", h.configPath, "--root-dir", h.rootDir, "--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", nodeCRIEndpoint, "--hostname-override", nodeName,
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow").CombinedOutput()
	const want = `cgroupDriver is systemd but the container runtime uses the cgroupfs cgroup driver (containerd runtime "runc" SystemdCgroup = false)`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("heartlet with a cgroupfs runtime: %v, output without %q:\n%s", err, want, out)
	}
	out, _ = h.command(heartletBin, "doctor", "--config", h.configPath, "--container-runtime-endpoint", nodeCRIEndpoint).CombinedOutput()
	if !regexp.MustCompile(`(?m)^error\s+cgroup-driver\s+the runtime uses the cgroupfs cgroup driver`).Match(out) {
		t.Errorf("heartlet doctor with a cgroupfs runtime does not report the mismatch:\n%s", out)
	}
}

// qosClass is the pod's QoS class as heartlet reports it.
func qosClass(p *v1.Pod) v1.PodQOSClass { return p.Status.QOSClass }
