package cgroups

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

func TestPlanNodeAllocatable(t *testing.T) {
	capacity := rl("cpu", "4", "memory", "8Gi", "pid", "32768", "hugepages-2Mi", "1Gi")
	base := NodeAllocatableConfig{
		Capacity:             capacity,
		SystemReserved:       rl("cpu", "500m", "memory", "1Gi", "pid", "1000"),
		KubeReserved:         rl("memory", "512Mi"),
		SystemReservedCgroup: "/system.slice",
		KubeReservedCgroup:   "/kube.slice",
	}
	allocatable := rl("cpu", "3500m", "memory", "5632Mi", "pid", "31768", "hugepages-2Mi", "1Gi")
	tests := []struct {
		name         string
		enforce      []string
		wantKubepods v1.ResourceList
		wantReserved []ReservedCgroup
	}{
		{name: "pods", enforce: []string{"pods"}, wantKubepods: allocatable},
		{name: "none", enforce: []string{"none"}, wantKubepods: capacity},
		{name: "empty", enforce: nil, wantKubepods: capacity},
		{
			name:         "pods and reserved cgroups",
			enforce:      []string{"pods", "system-reserved", "kube-reserved-compressible"},
			wantKubepods: allocatable,
			wantReserved: []ReservedCgroup{
				{Name: "system-reserved", Path: "/system.slice", Limits: base.SystemReserved},
				{Name: "kube-reserved-compressible", Path: "/kube.slice", Limits: base.KubeReserved, CompressibleOnly: true},
			},
		},
		{
			name:         "reserved cgroup without pods",
			enforce:      []string{"kube-reserved"},
			wantKubepods: capacity,
			wantReserved: []ReservedCgroup{{Name: "kube-reserved", Path: "/kube.slice", Limits: base.KubeReserved}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			c.Enforce = tt.enforce
			kubepods, reserved := PlanNodeAllocatable(c)
			if !equality.Semantic.DeepEqual(kubepods, tt.wantKubepods) {
				t.Errorf("kubepods limits = %v, want %v", kubepods, tt.wantKubepods)
			}
			if !equality.Semantic.DeepEqual(reserved, tt.wantReserved) {
				t.Errorf("reserved cgroups = %+v, want %+v", reserved, tt.wantReserved)
			}
		})
	}
	t.Run("reservation above capacity", func(t *testing.T) {
		c := base
		c.Enforce = []string{"pods"}
		c.SystemReserved = rl("memory", "16Gi")
		kubepods, _ := PlanNodeAllocatable(c)
		if q := kubepods[v1.ResourceMemory]; q.Sign() != 0 {
			t.Errorf("memory = %v, want 0 (never negative)", q.String())
		}
	})
}

func TestEnsureQOSLimitsKubepods(t *testing.T) {
	tests := []struct {
		name   string
		v2     bool
		alloc  v1.ResourceList
		checks map[string]string
	}{
		{
			name:  "v1",
			alloc: rl("cpu", "1500m", "memory", "3Gi", "pid", "30000"),
			checks: map[string]string{
				"cpu/kubepods/cpu.shares":               "1536",
				"memory/kubepods/memory.limit_in_bytes": "3221225472",
				"pids/kubepods/pids.max":                "30000",
			},
		},
		{
			name:  "v2",
			v2:    true,
			alloc: rl("cpu", "2", "memory", "1Gi", "pid", "500"),
			checks: map[string]string{
				"kubepods/cpu.weight": "174",
				"kubepods/memory.max": "1073741824",
				"kubepods/pids.max":   "500",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeV1(t)
			if tt.v2 {
				root = fakeV2(t)
			}
			m := newManager(t, Options{Root: root, NodeAllocatable: tt.alloc})
			if err := m.EnsureQOS(context.Background()); err != nil {
				t.Fatalf("EnsureQOS: %v", err)
			}
			for p, want := range tt.checks {
				if got := readTrim(t, filepath.Join(root, p)); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
		})
	}
}

// A kubepods limit the kernel refuses (memory in use above it) does not
// stop heartlet: it is retried with the next pod cgroup.
func TestKubepodsLimitRetried(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	limit := filepath.Join(root, "memory/kubepods/memory.limit_in_bytes")
	// A directory where the file should be makes every write fail.
	mustMkdir(t, limit)
	m := newManager(t, Options{Root: root, NodeAllocatable: rl("memory", "1Gi")})
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatalf("EnsureQOS with an unwritable kubepods limit: %v, want nil", err)
	}
	if err := os.Remove(limit); err != nil {
		t.Fatal(err)
	}
	if err := m.EnsurePod(ctx, testPod("p", bestEffort)); err != nil {
		t.Fatalf("EnsurePod: %v", err)
	}
	if got := readTrim(t, limit); got != "1073741824" {
		t.Errorf("kubepods memory limit after retry = %q, want 1073741824", got)
	}
}

func TestEnsureQOSReservedCgroups(t *testing.T) {
	ctx := context.Background()
	limits := rl("cpu", "500m", "memory", "256Mi", "pid", "100")
	t.Run("full", func(t *testing.T) {
		root := fakeV1(t)
		for _, c := range []string{"cpu", "memory", "pids"} {
			mustMkdir(t, filepath.Join(root, c, "system.slice"))
		}
		m := newManager(t, Options{Root: root, ReservedCgroups: []ReservedCgroup{{Name: "system-reserved", Path: "/system.slice", Limits: limits}}})
		if err := m.EnsureQOS(ctx); err != nil {
			t.Fatalf("EnsureQOS: %v", err)
		}
		for p, want := range map[string]string{
			"cpu/system.slice/cpu.shares":               "512",
			"memory/system.slice/memory.limit_in_bytes": "268435456",
			"pids/system.slice/pids.max":                "100",
		} {
			if got := readTrim(t, filepath.Join(root, p)); got != want {
				t.Errorf("%s = %q, want %q", p, got, want)
			}
		}
	})
	t.Run("compressible", func(t *testing.T) {
		root := fakeV2(t)
		mustMkdir(t, filepath.Join(root, "kube.slice"))
		m := newManager(t, Options{Root: root, ReservedCgroups: []ReservedCgroup{{Name: "kube-reserved-compressible", Path: "/kube.slice", Limits: limits, CompressibleOnly: true}}})
		if err := m.EnsureQOS(ctx); err != nil {
			t.Fatalf("EnsureQOS: %v", err)
		}
		if got := readTrim(t, filepath.Join(root, "kube.slice/cpu.weight")); got != "59" {
			t.Errorf("cpu.weight = %q, want 59 (512 shares)", got)
		}
		for _, f := range []string{"memory.max", "pids.max"} {
			if exists(filepath.Join(root, "kube.slice", f)) {
				t.Errorf("%s written, want only cpu for a compressible enforcement", f)
			}
		}
	})
	t.Run("missing", func(t *testing.T) {
		root := fakeV1(t)
		mustMkdir(t, filepath.Join(root, "cpu", "system.slice"))
		m := newManager(t, Options{Root: root, ReservedCgroups: []ReservedCgroup{{Name: "system-reserved", Path: "/system.slice", Limits: limits}}})
		err := m.EnsureQOS(ctx)
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("EnsureQOS() error = %v, want one saying the cgroup does not exist", err)
		}
		if exists(filepath.Join(root, "memory", "system.slice")) {
			t.Errorf("the missing reserved cgroup was created, want it left to the administrator")
		}
	})
}

// The burstable weight follows the burstable pods as their cgroups come
// and go.
func TestBurstableWeightFollowsPods(t *testing.T) {
	ctx := context.Background()
	for _, layout := range []struct {
		name string
		fake func(*testing.T) string
		file string
		// conv turns cpu.shares into the file's value.
		conv map[string]string
	}{
		{"v1", fakeV1, "cpu/kubepods/burstable/cpu.shares", nil},
		{"v2", fakeV2, "kubepods/burstable/cpu.weight", map[string]string{"2": "1", "256": "35", "358": "45", "102": "17"}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			root := layout.fake(t)
			m := newManager(t, Options{Root: root})
			if err := m.EnsureQOS(ctx); err != nil {
				t.Fatal(err)
			}
			want := func(shares string) {
				t.Helper()
				w := shares
				if layout.conv != nil {
					w = layout.conv[shares]
				}
				if got := readTrim(t, filepath.Join(root, layout.file)); got != w {
					t.Errorf("burstable weight = %q, want %q (%s shares)", got, w, shares)
				}
			}
			want("2")
			steps := []struct {
				add    *v1.Pod
				remove string
				shares string
			}{
				{add: testPod("b1", burstable), shares: "256"},                   // 250m
				{add: testPod("b2", requestsOnly), shares: "358"},                // +100m
				{add: testPod("g", guaranteed), shares: "358"},                   // not burstable
				{add: testPod("b1", burstable), shares: "358"},                   // again: counted once
				{remove: "b1", shares: "102"},                                    // 100m left
				{remove: "g", shares: "102"},                                     // not burstable
				{remove: "b2", shares: "2"},                                      // none left
				{add: testPod("e", bestEffort), shares: "2"},                     // besteffort
				{add: testPod("b3", req(rl("memory", "1Mi"), nil)), shares: "2"}, // burstable without cpu
			}
			for _, s := range steps {
				if s.add != nil {
					if err := m.EnsurePod(ctx, s.add); err != nil {
						t.Fatal(err)
					}
				} else if err := m.RemovePod(ctx, types.UID(s.remove)); err != nil {
					t.Fatal(err)
				}
				want(s.shares)
			}
			if got := readTrim(t, filepath.Join(root, strings.Replace(layout.file, "burstable", "besteffort", 1))); got != map[bool]string{true: "1", false: "2"}[layout.conv != nil] {
				t.Errorf("besteffort weight = %q, want the minimum", got)
			}
		})
	}
}

func TestMaxTasks(t *testing.T) {
	files := func(pidMax, threadsMax string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			switch name {
			case pidMaxFile:
				return []byte(pidMax), nil
			case threadsMaxFile:
				return []byte(threadsMax), nil
			}
			return nil, errors.New("unexpected file " + name)
		}
	}
	tests := []struct {
		name               string
		pidMax, threadsMax string
		want               int64
		wantErr            bool
	}{
		{name: "pid_max smaller", pidMax: "32768\n", threadsMax: "192739\n", want: 32768},
		{name: "threads-max smaller", pidMax: "4194304\n", threadsMax: "63000\n", want: 63000},
		{name: "garbage", pidMax: "x\n", threadsMax: "1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := maxTasks(files(tt.pidMax, tt.threadsMax))
			if (err != nil) != tt.wantErr {
				t.Fatalf("maxTasks() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("maxTasks() = %d, want %d", got, tt.want)
			}
		})
	}
}
