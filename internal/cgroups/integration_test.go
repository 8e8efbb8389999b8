//go:build integration

package cgroups

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestIntegrationRealCgroups drives the manager against the machine's
// cgroup filesystem under a cgroup root of its own (/heartlet-test-<random>),
// so the real /kubepods is never touched, and removes everything it made.
func TestIntegrationRealCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: writing cgroups needs root")
	}
	ctx := context.Background()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	cgRoot := "/heartlet-test-" + hex.EncodeToString(suffix)
	m, err := New(Options{Root: DefaultRoot, CgroupRoot: cgRoot, PodPidsLimit: 512})
	if err != nil {
		t.Skipf("skipping: no usable cgroup filesystem at %s: %v", DefaultRoot, err)
	}
	probeWritable(t, m, cgRoot)
	hs, err := m.hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, h := range hs {
			dir := filepath.Join(h, cgRoot)
			if err := removeTree(dir); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			if exists(dir) {
				t.Errorf("cleanup: %s still exists", dir)
			}
		}
	})
	t.Logf("cgroup v%d, root %s, %d hierarchies", m.Version(), cgRoot, len(hs))

	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatalf("EnsureQOS: %v", err)
	}
	for _, h := range hs {
		for _, c := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			if !exists(filepath.Join(h, cgRoot, c)) {
				t.Errorf("QoS cgroup %s missing in %s", c, h)
			}
		}
	}

	limited := req(rl("cpu", "100m", "memory", "32Mi"), rl("cpu", "500m", "memory", "64Mi"))
	burst := testPod("11111111-2222-3333-4444-"+hex.EncodeToString(suffix)+"0000", limited, limited)
	guar := testPod("55555555-6666-7777-8888-"+hex.EncodeToString(suffix)+"0000", guaranteed)
	for _, p := range []*v1.Pod{burst, guar} {
		if err := m.EnsurePod(ctx, p); err != nil {
			t.Fatalf("EnsurePod %s: %v", p.Name, err)
		}
	}
	if err := m.UpdateQOS(ctx, []*v1.Pod{burst, guar}); err != nil {
		t.Fatalf("UpdateQOS: %v", err)
	}
	burstCg := m.PodCgroupParent(burst)
	guarCg := m.PodCgroupParent(guar)
	if want := cgRoot + "/kubepods/burstable/pod" + string(burst.UID); burstCg != want {
		t.Fatalf("PodCgroupParent = %s, want %s", burstCg, want)
	}

	// Values as the kernel reports them back.
	var checks map[string]string
	if m.Version() == 1 {
		checks = map[string]string{
			"memory" + burstCg + "/memory.limit_in_bytes":      "134217728",
			"cpu" + burstCg + "/cpu.cfs_quota_us":              "100000",
			"cpu" + burstCg + "/cpu.cfs_period_us":             "100000",
			"cpu" + burstCg + "/cpu.shares":                    "204",
			"pids" + burstCg + "/pids.max":                     "512",
			"memory" + guarCg + "/memory.limit_in_bytes":       "134217728",
			"cpu" + guarCg + "/cpu.cfs_quota_us":               "50000",
			"cpu" + cgRoot + "/kubepods/burstable/cpu.shares":  "204",
			"cpu" + cgRoot + "/kubepods/besteffort/cpu.shares": "2",
		}
		if exists(filepath.Join(DefaultRoot, "cpuset")) {
			parent := readTrim(t, filepath.Join(DefaultRoot, "cpuset", fileCpusetCPUs))
			checks["cpuset"+burstCg+"/cpuset.cpus"] = parent
		}
	} else {
		checks = map[string]string{
			burstCg[1:] + "/memory.max":                    "134217728",
			burstCg[1:] + "/cpu.max":                       "100000 100000",
			burstCg[1:] + "/pids.max":                      "512",
			guarCg[1:] + "/cpu.max":                        "50000 100000",
			cgRoot[1:] + "/kubepods/besteffort/cpu.weight": "1",
		}
	}
	for p, want := range checks {
		if got := readTrim(t, filepath.Join(DefaultRoot, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}

	uids, err := m.ListPods(ctx)
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if !slices.Contains(uids, burst.UID) || !slices.Contains(uids, guar.UID) || len(uids) != 2 {
		t.Errorf("ListPods() = %v, want %s and %s", uids, burst.UID, guar.UID)
	}

	// Container cgroups as the runtime leaves them, in every hierarchy.
	for _, h := range hs {
		for _, c := range []string{"sandbox", "ctr", "ctr/nested"} {
			if err := os.Mkdir(filepath.Join(h, burstCg, c), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A live process in a container cgroup: RemovePod refuses.
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	busyDir := filepath.Join(hs[0], burstCg, "ctr", "nested")
	if m.Version() == 1 {
		busyDir = filepath.Join(DefaultRoot, "cpu", burstCg, "ctr", "nested")
	}
	if err := writeFile(busyDir, fileProcs, strconv.Itoa(cmd.Process.Pid)); err != nil {
		t.Fatalf("move process into %s: %v", busyDir, err)
	}
	if err := m.RemovePod(ctx, burst.UID); !errors.Is(err, ErrBusy) {
		t.Fatalf("RemovePod with a live process = %v, want ErrBusy", err)
	}
	if !exists(filepath.Join(hs[0], burstCg, "sandbox")) {
		t.Fatalf("RemovePod removed cgroups of a busy pod")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	removeEventually(t, m, burst.UID)
	if err := m.RemovePod(ctx, guar.UID); err != nil {
		t.Fatalf("RemovePod guaranteed: %v", err)
	}
	for _, h := range hs {
		for _, c := range []string{burstCg, guarCg} {
			if exists(filepath.Join(h, c)) {
				t.Errorf("%s still exists", filepath.Join(h, c))
			}
		}
	}
	if err := m.RemovePod(ctx, burst.UID); err != nil {
		t.Errorf("second RemovePod: %v", err)
	}
	if uids, err := m.ListPods(ctx); err != nil || len(uids) != 0 {
		t.Errorf("ListPods() after removal = %v, %v; want none", uids, err)
	}
}

// removeEventually retries RemovePod while the kernel still counts the
// killed process, for at most five seconds.
func removeEventually(t *testing.T, m *Manager, uid types.UID) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := m.RemovePod(context.Background(), uid)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("RemovePod after the process exited: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// probeWritable skips the test when the cgroup filesystem is read-only or
// not writable by this process.
func probeWritable(t *testing.T, m *Manager, cgRoot string) {
	t.Helper()
	dir := filepath.Join(m.root, cgRoot)
	if m.Version() == 1 {
		dir = filepath.Join(m.root, "cpu", cgRoot)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
			t.Skipf("skipping: cgroup filesystem not writable: %v", err)
		}
		t.Fatalf("probe %s: %v", dir, err)
	}
	if err := unix.Rmdir(dir); err != nil {
		t.Fatalf("probe cleanup %s: %v", dir, err)
	}
}

// BenchmarkRealPodCgroup is a best-effort pod's cgroups on the machine's
// cgroup filesystem: created, released and cleaned up (RemovePod twice, as
// the pod's release and its clean-up call it), under a cgroup root of its
// own. It prints the CPU it takes; it asserts nothing about time.
func BenchmarkRealPodCgroup(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("skipping: writing cgroups needs root")
	}
	ctx := context.Background()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		b.Fatal(err)
	}
	cgRoot := "/heartlet-bench-" + hex.EncodeToString(suffix)
	m, err := New(Options{Root: DefaultRoot, CgroupRoot: cgRoot})
	if err != nil {
		b.Skipf("skipping: no usable cgroup filesystem at %s: %v", DefaultRoot, err)
	}
	hs, err := m.hierarchies()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, h := range hs {
			if err := removeTree(filepath.Join(h, cgRoot)); err != nil {
				b.Errorf("cleanup: %v", err)
			}
		}
	})
	if err := m.EnsureQOS(ctx); err != nil {
		b.Fatalf("EnsureQOS: %v", err)
	}
	b.ResetTimer()
	for i := range b.N {
		pod := testPod(fmt.Sprintf("%08x-0000-0000-0000-%s%04x", i, hex.EncodeToString(suffix), i%0x10000), bestEffort)
		if err := m.EnsurePod(ctx, pod); err != nil {
			b.Fatalf("EnsurePod: %v", err)
		}
		for range 2 {
			if err := m.RemovePod(ctx, pod.UID); err != nil {
				b.Fatalf("RemovePod: %v", err)
			}
		}
	}
}
