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
	ctx := context.Background()
	m, cgRoot, hs, suffix := realManager(t, Options{PodPidsLimit: 512})
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
	burst := testPod("11111111-2222-3333-4444-"+suffix+"0000", limited, limited)
	guar := testPod("55555555-6666-7777-8888-"+suffix+"0000", guaranteed)
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
// realManager is a manager of the machine's cgroup filesystem under a
// cgroup root of its own (/heartlet-test-<random>), so the real /kubepods
// is never touched; everything below that root is removed at the end. It
// skips without root or a writable cgroup filesystem, and returns the
// cgroup root, the hierarchies and the random part (8 hex digits).
func realManager(tb testing.TB, opts Options) (m *Manager, cgRoot string, hs []string, suffix string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("skipping: writing cgroups needs root")
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	suffix = hex.EncodeToString(b)
	cgRoot = "/heartlet-test-" + suffix
	opts.Root, opts.CgroupRoot = DefaultRoot, cgRoot
	m, err := New(opts)
	if err != nil {
		tb.Skipf("skipping: no usable cgroup filesystem at %s: %v", DefaultRoot, err)
	}
	probeWritable(tb, m, cgRoot)
	if hs, err = m.hierarchies(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, h := range hs {
			dir := filepath.Join(h, cgRoot)
			if err := removeTree(dir); err != nil {
				tb.Errorf("cleanup: %v", err)
			}
			if exists(dir) {
				tb.Errorf("cleanup: %s still exists", dir)
			}
		}
	})
	return m, cgRoot, hs, suffix
}

func probeWritable(t testing.TB, m *Manager, cgRoot string) {
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
	ctx := context.Background()
	m, _, _, suffix := realManager(b, Options{})
	if err := m.EnsureQOS(ctx); err != nil {
		b.Fatalf("EnsureQOS: %v", err)
	}
	b.ResetTimer()
	for i := range b.N {
		pod := testPod(fmt.Sprintf("%08x-0000-0000-0000-%s%04x", i, suffix, i%0x10000), bestEffort)
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
