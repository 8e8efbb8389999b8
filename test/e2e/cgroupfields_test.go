//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// forkLoop forks 200 sleeps from a child shell: busybox sh exits at the
// first fork that fails, so the loop must not run in the container's main
// process (which would take the forked sleeps with it); the sleeps are
// orphaned to the main shell, which then reports and stays.
const forkLoop = `sh -c 'i=0
while [ $i -lt 200 ]; do
  sleep 1000 &
  i=$((i+1))
done'
echo "forks done"
exec sleep 1000`

// podPidsLimit bounds the processes of a pod: a pod forking 200 sleeps
// under podPidsLimit: 50 holds at most 50 tasks, and its shell sees the
// forks fail.
func TestPodPidsLimit(t *testing.T) {
	h := newHeartlet(t, "podPidsLimit: 50\n")
	t.Cleanup(h.cleanup)
	h.start()

	h.addPod(t, "forker.yaml", "forker", manifest(t, "forker", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("forker", forkLoop)}
		grace := int64(1)
		p.Spec.TerminationGracePeriodSeconds = &grace
	}))
	pod := h.waitRunning(t, "forker")
	dir := podCgroupDir("pids", v1.PodQOSBestEffort, string(pod.UID))
	if got := strings.TrimSpace(readString(t, filepath.Join(dir, "pids.max"))); got != "50" {
		t.Errorf("pod cgroup pids.max = %q, want 50", got)
	}
	logPath := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "forker", "0.log")
	waitFor(t, time.Minute, "the fork loop to finish", func() (bool, string) {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("forks done")), fmt.Sprintf("log: %q", lastBytes(b, 400))
	})
	current := readInt(t, filepath.Join(dir, "pids.current"))
	procs := countTasks(t, dir)
	t.Logf("pod cgroup: pids.current %d, %d tasks in cgroup.procs below it", current, procs)
	if current > 50 || procs > 50 {
		t.Errorf("pod cgroup holds %d tasks (pids.current %d), want at most podPidsLimit 50", procs, current)
	}
	if current < 40 {
		t.Errorf("pids.current = %d: the loop forked too little for the test to mean anything", current)
	}
	b, _ := os.ReadFile(logPath)
	if !bytes.Contains(b, []byte("can't fork")) && !bytes.Contains(b, []byte("Resource temporarily unavailable")) {
		t.Errorf("container log shows no fork failure; log: %q", lastBytes(b, 1000))
	}
}

// readString reads a whole file.
func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// countTasks counts the processes in cgroup dir and every cgroup below it.
func countTasks(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				n++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("count tasks under %s: %v", dir, err)
	}
	return n
}

// lastBytes is the last n bytes of b.
func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// cpuCFSQuota: false leaves a cpu limit without a CFS quota, on the
// container and the pod cgroup; cpuCFSQuotaPeriod is the period of both.
func TestCPUCFSQuotaSettings(t *testing.T) {
	tests := []struct {
		name       string
		config     string
		wantQuota  int64
		wantPeriod int64
	}{
		{name: "quota off", config: "cpuCFSQuota: false\n", wantQuota: -1, wantPeriod: 100000},
		{name: "custom period", config: "cpuCFSQuotaPeriod: 50ms\n", wantQuota: 25000, wantPeriod: 50000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeartlet(t, tt.config)
			t.Cleanup(h.cleanup)
			h.start()
			h.addPod(t, "limited.yaml", "limited", manifest(t, "limited", func(p *v1.Pod) {
				c := shContainer("app", sleeper)
				c.Resources.Limits = v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("500m"),
					v1.ResourceMemory: resource.MustParse("64Mi"),
				}
				p.Spec.Containers = []v1.Container{c}
			}))
			pod := h.waitRunning(t, "limited")
			podDir := podCgroupDir("cpu", v1.PodQOSGuaranteed, string(pod.UID))
			ctrDir := filepath.Join(podDir, containerID(statusOf(pod, "app").ContainerID))
			for _, d := range []struct{ what, dir string }{{"pod", podDir}, {"container", ctrDir}} {
				quota := readInt(t, filepath.Join(d.dir, "cpu.cfs_quota_us"))
				period := readInt(t, filepath.Join(d.dir, "cpu.cfs_period_us"))
				if quota != tt.wantQuota || period != tt.wantPeriod {
					t.Errorf("%s cgroup cfs quota/period = %d/%d, want %d/%d", d.what, quota, period, tt.wantQuota, tt.wantPeriod)
				}
			}
		})
	}
}

// qosCgroupFiles are the v1 files of the QoS cgroups the next test
// changes; they are restored after it, as other tests share the hierarchy.
var qosCgroupFiles = []string{
	"/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes",
	"/sys/fs/cgroup/cpu/kubepods/cpu.shares",
	"/sys/fs/cgroup/pids/kubepods/pids.max",
	"/sys/fs/cgroup/cpu/kubepods/burstable/cpu.shares",
}

// restoreFiles puts the current content of files back when the test ends.
func restoreFiles(t *testing.T, files ...string) {
	t.Helper()
	saved := map[string][]byte{}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			saved[f] = bytes.TrimSpace(b)
		}
	}
	t.Cleanup(func() {
		for f, b := range saved {
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Logf("restore %s: %v", f, err)
			}
		}
	})
}

// memTotal is MemTotal of /proc/meminfo in bytes.
func memTotal(t *testing.T) int64 {
	t.Helper()
	for _, line := range strings.Split(readString(t, "/proc/meminfo"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("MemTotal %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// onlineCPUs counts /sys/devices/system/cpu/online.
func onlineCPUs(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, part := range strings.Split(strings.TrimSpace(readString(t, "/sys/devices/system/cpu/online")), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.ParseInt(lo, 10, 64)
		b := a
		if isRange {
			b, _ = strconv.ParseInt(hi, 10, 64)
		}
		n += b - a + 1
	}
	return n
}

// enforceNodeAllocatable [pods] limits kubepods to capacity minus the
// reservations (memory, cpu as shares, pids), a reserved cgroup to its
// reservation, and the burstable cgroup's weight follows the burstable
// pods' cpu requests.
func TestNodeAllocatableCgroups(t *testing.T) {
	const sysCgroup = "heartlet-e2e-system-reserved"
	restoreFiles(t, qosCgroupFiles...)
	for _, c := range []string{"cpu", "memory", "pids"} {
		d := filepath.Join("/sys/fs/cgroup", c, sysCgroup)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatalf("create reserved cgroup: %v", err)
		}
		t.Cleanup(func() { _ = os.Remove(d) })
	}
	h := newHeartlet(t, `enforceNodeAllocatable: [pods, system-reserved]
systemReservedCgroup: /`+sysCgroup+`
systemReserved:
  cpu: 500m
  memory: 512Mi
  pid: "1000"
kubeReserved:
  memory: 256Mi
`)
	t.Cleanup(h.cleanup)
	h.start()

	const page = 4096 // the kernel keeps memory limits in whole pages
	wantMem := (memTotal(t) - 768<<20) / page * page
	if got := readInt(t, "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes"); got != wantMem {
		t.Errorf("kubepods memory.limit_in_bytes = %d, want MemTotal - 768Mi = %d", got, wantMem)
	}
	wantShares := (onlineCPUs(t)*1000 - 500) * 1024 / 1000
	if got := readInt(t, "/sys/fs/cgroup/cpu/kubepods/cpu.shares"); got != wantShares {
		t.Errorf("kubepods cpu.shares = %d, want %d (allocatable cpu)", got, wantShares)
	}
	pidMax := min(readInt(t, "/proc/sys/kernel/pid_max"), readInt(t, "/proc/sys/kernel/threads-max"))
	if got := readInt(t, "/sys/fs/cgroup/pids/kubepods/pids.max"); got != pidMax-1000 {
		t.Errorf("kubepods pids.max = %d, want %d (task limit minus the pid reservation)", got, pidMax-1000)
	}
	for f, want := range map[string]int64{
		"memory/" + sysCgroup + "/memory.limit_in_bytes": 512 << 20,
		"cpu/" + sysCgroup + "/cpu.shares":               512,
		"pids/" + sysCgroup + "/pids.max":                1000,
	} {
		if got := readInt(t, filepath.Join("/sys/fs/cgroup", f)); got != want {
			t.Errorf("reserved cgroup %s = %d, want %d", f, got, want)
		}
	}

	burstable := "/sys/fs/cgroup/cpu/kubepods/burstable/cpu.shares"
	if got := readInt(t, burstable); got != 2 {
		t.Errorf("burstable cpu.shares without pods = %d, want 2", got)
	}
	h.addPod(t, "burst.yaml", "burst", manifest(t, "burst", func(p *v1.Pod) {
		c := shContainer("app", sleeper)
		c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m")}
		p.Spec.Containers = []v1.Container{c}
	}))
	h.waitRunning(t, "burst")
	if got := readInt(t, burstable); got != 307 {
		t.Errorf("burstable cpu.shares with a 300m burstable pod = %d, want 307", got)
	}
	if got := readInt(t, "/sys/fs/cgroup/cpu/kubepods/besteffort/cpu.shares"); got != 2 {
		t.Errorf("besteffort cpu.shares = %d, want 2", got)
	}
	h.removeManifest(t, "burst.yaml")
	h.waitPodGone(t, "burst")
	waitFor(t, podRemoveTimeout, "the burstable weight to drop back", func() (bool, string) {
		got := readInt(t, burstable)
		return got == 2, fmt.Sprintf("cpu.shares %d", got)
	})
}

// A reserved cgroup that does not exist stops heartlet at start, naming it.
func TestNodeAllocatableMissingReservedCgroup(t *testing.T) {
	restoreFiles(t, qosCgroupFiles...)
	h := newHeartlet(t, `enforceNodeAllocatable: [pods, kube-reserved]
kubeReservedCgroup: /heartlet-e2e-no-such-cgroup
kubeReserved:
  memory: 256Mi
`)
	cmd := exec.Command(heartletBin, "--config", h.configPath, "--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir, "--container-runtime-endpoint", criEndpoint,
		"--hostname-override", nodeName,
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("heartlet kept running with a missing kube-reserved cgroup; output:\n%s", out)
	}
	if err == nil {
		t.Fatalf("heartlet exited 0 with a missing kube-reserved cgroup; output:\n%s", out)
	}
	if !bytes.Contains(out, []byte("heartlet-e2e-no-such-cgroup")) || !bytes.Contains(out, []byte("does not exist")) {
		t.Errorf("exit output does not name the missing cgroup:\n%s", lastBytes(out, 2000))
	}
}
