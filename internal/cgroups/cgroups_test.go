package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// v1Hierarchies are the hierarchies of the fake v1 layout, as on a hybrid
// machine: one mount per controller, a named one and the unified one.
var v1Hierarchies = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "systemd", "unified"}

// fakeV1 returns a directory laid out like a cgroup v1 mount root.
func fakeV1(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, h := range v1Hierarchies {
		mustMkdir(t, filepath.Join(root, h))
	}
	mustWrite(t, filepath.Join(root, "cpuset", fileCpusetCPUs), "0-1\n")
	mustWrite(t, filepath.Join(root, "cpuset", fileCpusetMems), "0\n")
	return root
}

// fakeV2 returns a directory laid out like a cgroup v2 mount root.
func fakeV2(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, fileControllers), "cpuset cpu io memory hugetlb pids rdma misc\n")
	mustWrite(t, filepath.Join(root, fileSubtreeControl), "")
	return root
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return strings.TrimSpace(string(b))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func newManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// testPod returns a pod whose containers have the given requests/limits,
// one container per pair.
func testPod(uid string, res ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}}
	for i, r := range res {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('a'+i)), Resources: r})
	}
	return p
}

func req(reqs, limits v1.ResourceList) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: reqs, Limits: limits}
}

var (
	guaranteed   = req(nil, rl("cpu", "500m", "memory", "128Mi"))
	burstable    = req(rl("cpu", "250m", "memory", "64Mi"), rl("cpu", "1", "memory", "256Mi"))
	requestsOnly = req(rl("cpu", "100m"), nil)
	bestEffort   = req(nil, nil)
)

func TestNew(t *testing.T) {
	v1root, v2root := fakeV1(t), fakeV2(t)
	tests := []struct {
		name        string
		opts        Options
		wantErr     string
		wantVersion int
	}{
		{name: "v1 defaults", opts: Options{Root: v1root}, wantVersion: 1},
		{name: "v2 layout", opts: Options{Root: v2root, Driver: "cgroupfs"}, wantVersion: 2},
		{name: "systemd driver below another root", opts: Options{Root: v1root, Driver: "systemd", CgroupRoot: "/kube"}, wantErr: "set cgroupRoot to /"},
		{name: "unknown driver", opts: Options{Root: v1root, Driver: "foo"}, wantErr: "unknown"},
		{name: "relative cgroup root", opts: Options{Root: v1root, CgroupRoot: "kube"}, wantErr: "absolute"},
		{name: "period too short", opts: Options{Root: v1root, CPUPeriod: time.Microsecond}, wantErr: "between"},
		{name: "period too long", opts: Options{Root: v1root, CPUPeriod: 2 * time.Second}, wantErr: "between"},
		{name: "missing root", opts: Options{Root: filepath.Join(v1root, "nope")}, wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			if got := m.Version(); got != tt.wantVersion {
				t.Errorf("Version() = %d, want %d", got, tt.wantVersion)
			}
		})
	}
}

func TestPodCgroupParent(t *testing.T) {
	root := fakeV1(t)
	tests := []struct {
		name       string
		cgroupRoot string
		pod        *v1.Pod
		want       string
	}{
		{"guaranteed", "", testPod("u1", guaranteed), "/kubepods/podu1"},
		{"burstable", "/", testPod("u2", burstable), "/kubepods/burstable/podu2"},
		{"besteffort", "/", testPod("u3", bestEffort), "/kubepods/besteffort/podu3"},
		{"custom root", "/heartlet/", testPod("u4", requestsOnly), "/heartlet/kubepods/burstable/podu4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, Options{Root: root, CgroupRoot: tt.cgroupRoot})
			if got := m.PodCgroupParent(tt.pod); got != tt.want {
				t.Errorf("PodCgroupParent() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnsureQOSV1(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root, NodeAllocatable: rl("cpu", "2", "memory", "4Gi")})
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatalf("EnsureQOS: %v", err)
	}
	for _, h := range v1Hierarchies {
		for _, p := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
			if !exists(filepath.Join(root, h, p)) {
				t.Errorf("cgroup %s missing in hierarchy %s", p, h)
			}
		}
	}
	checks := map[string]string{
		"cpu/kubepods/cpu.shares":                "2048",
		"memory/kubepods/memory.limit_in_bytes":  "4294967296",
		"cpu/kubepods/besteffort/cpu.shares":     "2",
		"cpu/kubepods/burstable/cpu.shares":      "2",
		"cpuset/kubepods/cpuset.cpus":            "0-1",
		"cpuset/kubepods/cpuset.mems":            "0",
		"cpuset/kubepods/burstable/cpuset.cpus":  "0-1",
		"cpuset/kubepods/besteffort/cpuset.mems": "0",
	}
	for p, want := range checks {
		if got := readTrim(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if exists(filepath.Join(root, "memory/kubepods/burstable/memory.limit_in_bytes")) {
		t.Errorf("burstable memory limit written, want it left unlimited")
	}

	pods := []*v1.Pod{
		testPod("b1", burstable),                  // 250m
		testPod("b2", requestsOnly, requestsOnly), // 200m
		testPod("g1", guaranteed),                 // not burstable
		testPod("e1", bestEffort),                 // not burstable
	}
	if err := m.UpdateQOS(ctx, pods); err != nil {
		t.Fatalf("UpdateQOS: %v", err)
	}
	if got, want := readTrim(t, filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")), "460"; got != want {
		t.Errorf("burstable cpu.shares after UpdateQOS = %q, want %q", got, want)
	}
	// EnsureQOS again keeps the last burstable weight.
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatalf("EnsureQOS again: %v", err)
	}
	if got, want := readTrim(t, filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")), "460"; got != want {
		t.Errorf("burstable cpu.shares after second EnsureQOS = %q, want %q", got, want)
	}
	if err := m.UpdateQOS(ctx, nil); err != nil {
		t.Fatalf("UpdateQOS(nil): %v", err)
	}
	if got, want := readTrim(t, filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")), "2"; got != want {
		t.Errorf("burstable cpu.shares without pods = %q, want %q", got, want)
	}
}

func TestEnsureQOSCoMountedHierarchies(t *testing.T) {
	root := t.TempDir()
	for _, h := range []string{"cpu,cpuacct", "memory"} {
		mustMkdir(t, filepath.Join(root, h))
	}
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(t, Options{Root: root})
	hs, err := m.hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 {
		t.Errorf("hierarchies() = %v, want the co-mount once plus memory", hs)
	}
	if err := m.EnsureQOS(context.Background()); err != nil {
		t.Fatalf("EnsureQOS: %v", err)
	}
	if got := readTrim(t, filepath.Join(root, "cpu,cpuacct/kubepods/besteffort/cpu.shares")); got != "2" {
		t.Errorf("besteffort cpu.shares = %q, want 2", got)
	}
}

func TestEnsureQOSMissingController(t *testing.T) {
	tests := []struct {
		name    string
		dirs    []string
		opts    Options
		wantErr string
	}{
		{"no memory", []string{"cpu", "pids"}, Options{}, "controller memory"},
		{"no cpu", []string{"memory", "pids"}, Options{}, "controller cpu"},
		{"no pids with a pids limit", []string{"cpu", "memory"}, Options{PodPidsLimit: 100}, "controller pids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.dirs {
				mustMkdir(t, filepath.Join(root, d))
			}
			tt.opts.Root = root
			err := newManager(t, tt.opts).EnsureQOS(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("EnsureQOS() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestEnsureQOSV2(t *testing.T) {
	ctx := context.Background()
	root := fakeV2(t)
	m := newManager(t, Options{Root: root, CgroupRoot: "/a"})
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatalf("EnsureQOS: %v", err)
	}
	checks := map[string]string{
		"a/kubepods/besteffort/cpu.weight": "1",
		"a/kubepods/burstable/cpu.weight":  "1",
	}
	for p, want := range checks {
		if got := readTrim(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{".", "a", "a/kubepods"} {
		got := readTrim(t, filepath.Join(root, p, fileSubtreeControl))
		for _, c := range []string{"+cpu", "+memory", "+pids", "+cpuset"} {
			if !strings.Contains(got, c) {
				t.Errorf("%s/cgroup.subtree_control = %q, want it to contain %s", p, got, c)
			}
		}
	}
	if err := m.UpdateQOS(ctx, []*v1.Pod{testPod("b", req(rl("cpu", "1"), nil))}); err != nil {
		t.Fatalf("UpdateQOS: %v", err)
	}
	if got := readTrim(t, filepath.Join(root, "a/kubepods/burstable/cpu.weight")); got != "100" {
		t.Errorf("burstable cpu.weight = %q, want 100 (1024 shares)", got)
	}
}

func TestEnsurePodV1(t *testing.T) {
	pidsPod := testPod("p", bestEffort)
	podLevel := testPod("pl", requestsOnly)
	podLevel.Spec.Resources = &v1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi")}
	tests := []struct {
		name string
		opts Options
		pod  *v1.Pod
		dir  string
		want map[string]string // file in the pod cgroup of a hierarchy -> value
	}{
		{
			name: "guaranteed",
			pod:  testPod("g", guaranteed),
			dir:  "kubepods/podg",
			want: map[string]string{
				"cpu/cpu.shares": "512", "cpu/cpu.cfs_period_us": "100000", "cpu/cpu.cfs_quota_us": "50000",
				"memory/memory.limit_in_bytes": "134217728", "pids/pids.max": "max",
			},
		},
		{
			name: "burstable with every limit",
			pod:  testPod("b", burstable, burstable),
			dir:  "kubepods/burstable/podb",
			want: map[string]string{
				"cpu/cpu.shares": "512", "cpu/cpu.cfs_period_us": "100000", "cpu/cpu.cfs_quota_us": "200000",
				"memory/memory.limit_in_bytes": "536870912",
			},
		},
		{
			name: "burstable with a container without limits",
			pod:  testPod("b2", burstable, requestsOnly),
			dir:  "kubepods/burstable/podb2",
			want: map[string]string{
				"cpu/cpu.shares": "358", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "-1",
			},
		},
		{
			name: "burstable with pod-level limits",
			pod:  podLevel,
			dir:  "kubepods/burstable/podpl",
			want: map[string]string{
				"cpu/cpu.shares": "102", "cpu/cpu.cfs_quota_us": "200000", "memory/memory.limit_in_bytes": "1073741824",
			},
		},
		{
			name: "besteffort",
			pod:  testPod("e", bestEffort),
			dir:  "kubepods/besteffort/pode",
			want: map[string]string{
				"cpu/cpu.shares": "2", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "-1",
			},
		},
		{
			name: "pod pids limit",
			opts: Options{PodPidsLimit: 1024},
			pod:  pidsPod,
			dir:  "kubepods/besteffort/podp",
			want: map[string]string{"pids/pids.max": "1024"},
		},
		{
			name: "cpu quota disabled",
			opts: Options{DisableCPUQuota: true},
			pod:  testPod("nq", guaranteed),
			dir:  "kubepods/podnq",
			want: map[string]string{"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.limit_in_bytes": "134217728"},
		},
		{
			name: "custom cpu period",
			opts: Options{CPUPeriod: 50 * time.Millisecond},
			pod:  testPod("cp", guaranteed),
			dir:  "kubepods/podcp",
			want: map[string]string{"cpu/cpu.cfs_period_us": "50000", "cpu/cpu.cfs_quota_us": "25000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeV1(t)
			tt.opts.Root = root
			m := newManager(t, tt.opts)
			if err := m.EnsurePod(context.Background(), tt.pod); err != nil {
				t.Fatalf("EnsurePod: %v", err)
			}
			for _, h := range v1Hierarchies {
				if !exists(filepath.Join(root, h, tt.dir)) {
					t.Errorf("pod cgroup missing in hierarchy %s", h)
				}
			}
			for f, want := range tt.want {
				h, name, _ := strings.Cut(f, "/")
				if got := readTrim(t, filepath.Join(root, h, tt.dir, name)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			// Every level of the path in the cpuset hierarchy can hold
			// tasks, the QoS classes EnsurePod created on the way included.
			for dir := tt.dir; dir != "."; dir = filepath.Dir(dir) {
				if got := readTrim(t, filepath.Join(root, "cpuset", dir, fileCpusetCPUs)); got != "0-1" {
					t.Errorf("%s cpuset.cpus = %q, want the root's 0-1", dir, got)
				}
			}
		})
	}
}

// A cpuset cgroup left without cpus (created by an earlier, interrupted
// attempt) gets its parent's when the pod is ensured again.
func TestEnsurePodFillsAnEmptyCpuset(t *testing.T) {
	root := fakeV1(t)
	m := newManager(t, Options{Root: root})
	mustWrite(t, filepath.Join(root, "cpuset", "kubepods", fileCpusetCPUs), "")
	mustWrite(t, filepath.Join(root, "cpuset", "kubepods", "besteffort", fileCpusetCPUs), "")
	if err := m.EnsurePod(context.Background(), testPod("e", bestEffort)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"kubepods", "kubepods/besteffort", "kubepods/besteffort/pode"} {
		if got := readTrim(t, filepath.Join(root, "cpuset", dir, fileCpusetCPUs)); got != "0-1" {
			t.Errorf("%s cpuset.cpus = %q, want 0-1", dir, got)
		}
	}
}

// The clean-up that follows a pod's release does not search the
// hierarchies again; a later call for the same pod does.
func TestRemovePodAfterRemoval(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root})
	if err := m.EnsurePod(ctx, testPod("rm", burstable)); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod(ctx, "rm"); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	stray := filepath.Join(root, "memory", "kubepods/besteffort/podrm")
	mustMkdir(t, stray)
	if err := m.RemovePod(ctx, "rm"); err != nil {
		t.Fatalf("second RemovePod: %v", err)
	}
	if !exists(stray) {
		t.Fatalf("second RemovePod searched the hierarchies: %s removed", stray)
	}
	if err := m.RemovePod(ctx, "rm"); err != nil {
		t.Fatalf("third RemovePod: %v", err)
	}
	if exists(stray) {
		t.Errorf("third RemovePod left %s", stray)
	}

	// Ensured again after a removal (the third call removed the stray):
	// the next removal searches.
	if err := m.EnsurePod(ctx, testPod("rm", burstable)); err != nil {
		t.Fatal(err)
	}
	if err := m.RemovePod(ctx, "rm"); err != nil {
		t.Fatal(err)
	}
	if dir := filepath.Join(root, "memory", "kubepods/burstable/podrm"); exists(dir) {
		t.Errorf("RemovePod after the pod was ensured again left %s", dir)
	}
}

func TestEnsurePodV2(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		pod  *v1.Pod
		dir  string
		want map[string]string
	}{
		{
			name: "guaranteed",
			pod:  testPod("g", guaranteed),
			dir:  "kubepods/podg",
			want: map[string]string{"cpu.weight": "59", "cpu.max": "50000 100000", "memory.max": "134217728", "pids.max": "max"},
		},
		{
			name: "burstable without every limit",
			opts: Options{PodPidsLimit: 300},
			pod:  testPod("b", burstable, requestsOnly),
			dir:  "kubepods/burstable/podb",
			want: map[string]string{"cpu.weight": "45", "cpu.max": "max", "memory.max": "max", "pids.max": "300"},
		},
		{
			name: "besteffort",
			pod:  testPod("e", bestEffort),
			dir:  "kubepods/besteffort/pode",
			want: map[string]string{"cpu.weight": "1", "cpu.max": "max", "memory.max": "max"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeV2(t)
			tt.opts.Root = root
			m := newManager(t, tt.opts)
			if err := m.EnsurePod(context.Background(), tt.pod); err != nil {
				t.Fatalf("EnsurePod: %v", err)
			}
			for f, want := range tt.want {
				if got := readTrim(t, filepath.Join(root, tt.dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			parent := filepath.Dir(filepath.Join(root, tt.dir))
			if got := readTrim(t, filepath.Join(parent, fileSubtreeControl)); !strings.Contains(got, "+memory") {
				t.Errorf("parent cgroup.subtree_control = %q, want +memory", got)
			}
		})
	}
}

func TestEnsurePodReappliesLimits(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root})
	p := testPod("r", burstable)
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	limit := filepath.Join(root, "memory/kubepods/burstable/podr/memory.limit_in_bytes")
	if got := readTrim(t, limit); got != "268435456" {
		t.Fatalf("memory limit = %q, want 268435456", got)
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "unlimited", Resources: requestsOnly})
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, limit); got != "-1" {
		t.Errorf("memory limit after an unlimited container joined = %q, want -1", got)
	}
}

func TestEnsurePodRejectsBadUID(t *testing.T) {
	m := newManager(t, Options{Root: fakeV1(t)})
	for _, uid := range []string{"", "..", "a/b"} {
		if err := m.EnsurePod(context.Background(), testPod(uid, bestEffort)); err == nil {
			t.Errorf("EnsurePod(uid %q) succeeded, want an error", uid)
		}
		if err := m.RemovePod(context.Background(), types.UID(uid)); err == nil {
			t.Errorf("RemovePod(uid %q) succeeded, want an error", uid)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := newManager(t, Options{Root: fakeV1(t)})
	errs := map[string]error{
		"EnsureQOS": m.EnsureQOS(ctx),
		"UpdateQOS": m.UpdateQOS(ctx, nil),
		"EnsurePod": m.EnsurePod(ctx, testPod("x", bestEffort)),
		"RemovePod": m.RemovePod(ctx, "x"),
	}
	_, err := m.ListPods(ctx)
	errs["ListPods"] = err
	for name, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s() error = %v, want context.Canceled", name, err)
		}
	}
}

func TestRemovePod(t *testing.T) {
	for _, layout := range []struct {
		name  string
		fake  func(*testing.T) string
		hiers []string
	}{
		{"v1", fakeV1, v1Hierarchies},
		{"v2", fakeV2, []string{"."}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			ctx := context.Background()
			root := layout.fake(t)
			m := newManager(t, Options{Root: root})
			p := testPod("rm", burstable)
			other := testPod("keep", burstable)
			for _, pod := range []*v1.Pod{p, other} {
				if err := m.EnsurePod(ctx, pod); err != nil {
					t.Fatal(err)
				}
			}
			// The runtime's sandbox and container cgroups, one nested.
			for _, h := range layout.hiers {
				podDir := filepath.Join(root, h, "kubepods/burstable/podrm")
				mustWrite(t, filepath.Join(podDir, "sandbox1", fileProcs), "")
				mustWrite(t, filepath.Join(podDir, "ctr1", "nested", fileProcs), "\n")
			}

			// A process left in a container cgroup: nothing is removed.
			busy := filepath.Join(root, layout.hiers[len(layout.hiers)-1], "kubepods/burstable/podrm/ctr1/nested", fileProcs)
			mustWrite(t, busy, "4242\n")
			err := m.RemovePod(ctx, "rm")
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("RemovePod with a process = %v, want ErrBusy", err)
			}
			if !strings.Contains(err.Error(), "podrm") {
				t.Errorf("error %q does not name the cgroup", err)
			}
			for _, h := range layout.hiers {
				if !exists(filepath.Join(root, h, "kubepods/burstable/podrm/sandbox1")) {
					t.Errorf("hierarchy %s: cgroups removed although the pod is busy", h)
				}
			}

			mustWrite(t, busy, "")
			if err := m.RemovePod(ctx, "rm"); err != nil {
				t.Fatalf("RemovePod: %v", err)
			}
			for _, h := range layout.hiers {
				if exists(filepath.Join(root, h, "kubepods/burstable/podrm")) {
					t.Errorf("hierarchy %s: pod cgroup still present", h)
				}
				if !exists(filepath.Join(root, h, "kubepods/burstable/podkeep")) {
					t.Errorf("hierarchy %s: another pod's cgroup was removed", h)
				}
			}
			// Idempotent, and safe for a pod never ensured.
			if err := m.RemovePod(ctx, "rm"); err != nil {
				t.Errorf("second RemovePod: %v", err)
			}
			if err := m.RemovePod(ctx, "never"); err != nil {
				t.Errorf("RemovePod of an unknown pod: %v", err)
			}
			got, err := m.ListPods(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := []types.UID{"keep"}; !reflect.DeepEqual(got, want) {
				t.Errorf("ListPods() after RemovePod = %v, want %v", got, want)
			}
		})
	}
}

func TestRemovePodWithoutQOS(t *testing.T) {
	m := newManager(t, Options{Root: fakeV1(t)})
	if err := m.RemovePod(context.Background(), "nothing"); err != nil {
		t.Errorf("RemovePod without any cgroup: %v", err)
	}
}

func TestListPods(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root, CgroupRoot: "/r"})
	got, err := m.ListPods(ctx)
	if err != nil {
		t.Fatalf("ListPods without cgroups: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("ListPods() without cgroups = %v, want none", got)
	}
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{testPod("c", guaranteed), testPod("a", burstable), testPod("b", bestEffort)} {
		if err := m.EnsurePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Left over by an earlier run, only in one hierarchy.
	mustMkdir(t, filepath.Join(root, "devices/r/kubepods/besteffort/podorphan"))
	// Not pod cgroups.
	mustMkdir(t, filepath.Join(root, "cpu/r/kubepods/burstable/other"))
	mustMkdir(t, filepath.Join(root, "cpu/r/kubepods/pod"))
	mustWrite(t, filepath.Join(root, "cpu/r/kubepods/podfile"), "")
	// Outside the cgroup root.
	mustMkdir(t, filepath.Join(root, "cpu/kubepods/podelsewhere"))

	got, err = m.ListPods(ctx)
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if want := []types.UID{"a", "b", "c", "orphan"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ListPods() = %v, want %v", got, want)
	}
}

func TestUIDFromDirName(t *testing.T) {
	tests := []struct {
		driver string
		name   string
		want   types.UID
		wantOK bool
	}{
		{DriverCgroupfs, "pod0f6c9b4e-1d2a-4c55-9a3e-2b8f1d7c6e11", "0f6c9b4e-1d2a-4c55-9a3e-2b8f1d7c6e11", true},
		{DriverCgroupfs, "podx", "x", true},
		{DriverCgroupfs, "pod", "", false},
		{DriverCgroupfs, "pod..", "", false},
		{DriverCgroupfs, "burstable", "", false},
		{DriverCgroupfs, "Pod1", "", false},
		{DriverCgroupfs, "kubepods-burstable-pod0f6c9b4e_1d2a.slice", "", false},
		{DriverSystemd, "kubepods-burstable-pod0f6c9b4e_1d2a_4c55_9a3e_2b8f1d7c6e11.slice", "0f6c9b4e-1d2a-4c55-9a3e-2b8f1d7c6e11", true},
		{DriverSystemd, "kubepods-pod0f6c9b4e_1d2a.slice", "0f6c9b4e-1d2a", true},
		{DriverSystemd, "kubepods-besteffort-podx.slice", "x", true},
		{DriverSystemd, "kubepods-besteffort-pod.slice", "", false},
		{DriverSystemd, "kubepods-burstable.slice", "", false},
		{DriverSystemd, "kubepods-burstable-pod1a.scope", "", false},
		{DriverSystemd, "pod1a", "", false},
		{DriverSystemd, "cri-containerd-0123.scope", "", false},
	}
	for _, tt := range tests {
		m := &Manager{}
		if tt.driver == DriverSystemd {
			m.systemd = &systemdDriver{}
		}
		got, ok := m.uidFromDirName(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: uidFromDirName(%q) = %q, %v; want %q, %v", tt.driver, tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"\n", 0, false},
		{"1\n", 1, false},
		{"1\n22\n333\n", 3, false},
		{" 7 \n\n8", 2, false},
		{"abc\n", 0, true},
		{"-1\n", 0, true},
	}
	for _, tt := range tests {
		got, err := parsePIDs([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parsePIDs(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	// Removing a pod parses an (empty) file per cgroup and hierarchy.
	for _, in := range [][]byte{nil, []byte("1\n22\n333\n")} {
		if a := testing.AllocsPerRun(100, func() { _, _ = parsePIDs(in) }); a != 0 {
			t.Errorf("parsePIDs(%q) allocates %.0f objects, want 0", in, a)
		}
	}
}

func FuzzParsePIDs(f *testing.F) {
	for _, s := range []string{"", "1\n2\n", "x", " 3 \n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parsePIDs([]byte(s))
		if err != nil {
			return
		}
		if lines := strings.Count(s, "\n") + 1; n > lines {
			t.Errorf("parsePIDs(%q) = %d, more than %d lines", s, n, lines)
		}
	})
}

func FuzzUIDFromDirName(f *testing.F) {
	for _, s := range []string{"pod1", "pod", "podx/y", "burstable", "pod..", "kubepods-burstable-pod1_2.slice", "kubepods-pod.slice", "-pod_.slice"} {
		f.Add(s)
	}
	fs, sd := &Manager{}, &Manager{systemd: &systemdDriver{}}
	f.Fuzz(func(t *testing.T, name string) {
		if uid, ok := sd.uidFromDirName(name); ok {
			if !strings.HasSuffix(name, "-"+escapeSystemd(PodPrefix+string(uid))+sliceSuffix) && name != escapeSystemd(PodPrefix+string(uid))+sliceSuffix {
				t.Errorf("systemd uidFromDirName(%q) = %q, does not round-trip", name, uid)
			}
			if validUID(uid) != nil {
				t.Errorf("systemd uidFromDirName(%q) = %q, not a valid UID", name, uid)
			}
		}
		uid, ok := fs.uidFromDirName(name)
		if !ok {
			return
		}
		if PodPrefix+string(uid) != name {
			t.Errorf("uidFromDirName(%q) = %q, does not round-trip", name, uid)
		}
		if filepath.Base(filepath.Join("/x", name)) != name || strings.Contains(string(uid), "/") {
			t.Errorf("uidFromDirName(%q) accepted a name that is not one path element", name)
		}
	})
}

// After a restart, AdoptPod counts a pod whose cgroup exists in the
// burstable weight again, without touching the pod's cgroup; a pod without
// a cgroup is neither created nor counted.
func TestAdoptPod(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	opts := Options{Root: root, NodeAllocatable: rl("cpu", "2", "memory", "4Gi")}
	m := newManager(t, opts)
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatal(err)
	}
	running := testPod("b1", req(rl("cpu", "250m"), nil))
	if err := m.EnsurePod(ctx, running); err != nil {
		t.Fatal(err)
	}
	shares := filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")
	want := readTrim(t, shares)

	restarted := newManager(t, opts)
	if err := restarted.EnsureQOS(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, shares); got == want {
		t.Fatalf("the restarted manager's weight %s already counts the pod: the test shows nothing", got)
	}
	podDir := filepath.Join(root, "cpu/kubepods/burstable/podb1")
	if err := os.WriteFile(filepath.Join(podDir, "cpu.shares"), []byte("7"), 0o644); err != nil {
		t.Fatal(err)
	}
	absent := testPod("b2", req(rl("cpu", "500m"), nil))
	for range 2 {
		if err := restarted.AdoptPod(ctx, running); err != nil {
			t.Fatal(err)
		}
		if err := restarted.AdoptPod(ctx, absent); err != nil {
			t.Fatal(err)
		}
	}
	if got := readTrim(t, shares); got != want {
		t.Errorf("burstable cpu.shares after AdoptPod = %s, want %s (the adopted pod only)", got, want)
	}
	if got := readTrim(t, filepath.Join(podDir, "cpu.shares")); got != "7" {
		t.Errorf("AdoptPod rewrote the pod's cpu.shares: %s", got)
	}
	if exists(filepath.Join(root, "cpu/kubepods/burstable/podb2")) {
		t.Error("AdoptPod created a cgroup for a pod without one")
	}
}

// A pod synced again with the limits already written costs a check that
// its cgroup is there, no writes; a cgroup gone from a hierarchy, or a
// resize written in between, makes the next sync create and write again.
func TestEnsurePodWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root})
	p := testPod("r", burstable)
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	limit := filepath.Join(root, "memory/kubepods/burstable/podr/memory.limit_in_bytes")
	mustWrite(t, limit, "marker")
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, limit); got != "marker" {
		t.Errorf("memory limit after a second sync with the same limits = %q, want it not rewritten", got)
	}

	if err := os.RemoveAll(filepath.Join(root, "pids/kubepods/burstable/podr")); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pids/kubepods/burstable/podr")); err != nil {
		t.Errorf("pod cgroup removed from a hierarchy not created again: %v", err)
	}
	if got := readTrim(t, limit); got != "268435456" {
		t.Errorf("memory limit after the cgroup was recreated = %q, want 268435456", got)
	}

	mustWrite(t, limit, "marker")
	if err := m.ResizePod(ctx, p, v1.ResourceCPU); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, limit); got != "268435456" {
		t.Errorf("memory limit after a resize and a sync = %q, want 268435456 written again", got)
	}

	if err := m.RemovePod(ctx, p.UID); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, limit); got != "268435456" {
		t.Errorf("memory limit after the pod cgroup was removed and ensured = %q, want 268435456", got)
	}
}
