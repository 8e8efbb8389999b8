package cgroups

import (
	"context"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestResizePodWritesOneResource(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	m := newManager(t, Options{Root: root})
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatal(err)
	}
	p := testPod("r", burstable)
	if err := m.EnsurePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	dir := "kubepods/burstable/podr"
	file := func(h, name string) string { return readTrim(t, filepath.Join(root, h, dir, name)) }
	qosShares := func() string { return readTrim(t, filepath.Join(root, "cpu/kubepods/burstable/cpu.shares")) }
	if got := qosShares(); got != "256" {
		t.Fatalf("burstable shares before = %s, want 256", got)
	}

	p.Spec.Containers[0].Resources = req(rl("cpu", "500m", "memory", "64Mi"), rl("cpu", "2", "memory", "512Mi"))
	if err := m.ResizePod(ctx, p, v1.ResourceMemory); err != nil {
		t.Fatal(err)
	}
	if got := file("memory", "memory.limit_in_bytes"); got != "536870912" {
		t.Errorf("memory limit = %s, want 536870912", got)
	}
	if got := file("cpu", "cpu.cfs_quota_us"); got != "100000" {
		t.Errorf("a memory resize wrote the cpu quota: %s, want the old 100000", got)
	}
	if got := qosShares(); got != "256" {
		t.Errorf("a memory resize wrote the burstable shares: %s", got)
	}

	if err := m.ResizePod(ctx, p, v1.ResourceCPU); err != nil {
		t.Fatal(err)
	}
	if got := file("cpu", "cpu.cfs_quota_us"); got != "200000" {
		t.Errorf("cpu quota = %s, want 200000", got)
	}
	if got := file("cpu", "cpu.shares"); got != "512" {
		t.Errorf("cpu shares = %s, want 512", got)
	}
	if got := qosShares(); got != "512" {
		t.Errorf("burstable shares after = %s, want 512", got)
	}

	if err := m.ResizePod(ctx, p, v1.ResourceEphemeralStorage); err == nil {
		t.Error("resizing ephemeral-storage succeeded")
	}
	bad := testPod("../x", burstable)
	if err := m.ResizePod(ctx, bad, v1.ResourceCPU); err == nil {
		t.Error("a pod UID with a path in it was resized")
	}
}

func TestMemoryUsage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		root   func(*testing.T) string
		podDir func(root string) string
		file   string
	}{
		{"v1", fakeV1, func(root string) string { return filepath.Join(root, "memory/kubepods/burstable/podr") }, "memory.usage_in_bytes"},
		{"v2", fakeV2, func(root string) string { return filepath.Join(root, "kubepods/burstable/podr") }, "memory.current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root(t)
			m := newManager(t, Options{Root: root})
			p := testPod("r", burstable)
			dir := tc.podDir(root)
			mustMkdir(t, filepath.Join(dir, "abc123"))
			mustWrite(t, filepath.Join(dir, tc.file), "4096\n")
			mustWrite(t, filepath.Join(dir, "abc123", tc.file), "1024\n")
			if got, err := m.PodMemoryUsage(ctx, p); err != nil || got != 4096 {
				t.Errorf("PodMemoryUsage = %d, %v; want 4096", got, err)
			}
			if got, err := m.ContainerMemoryUsage(ctx, p, "abc123"); err != nil || got != 1024 {
				t.Errorf("ContainerMemoryUsage = %d, %v; want 1024", got, err)
			}
			if _, err := m.ContainerMemoryUsage(ctx, p, "missing"); err == nil {
				t.Error("a container without a cgroup has a usage")
			}
			// A container ID is never a path: no reading another cgroup's
			// (or any) file through it.
			for _, id := range []string{"..", "../podr", "../../..", "a/b", "."} {
				if got, err := m.ContainerMemoryUsage(ctx, p, id); err == nil {
					t.Errorf("ContainerMemoryUsage(%q) = %d, want an error", id, got)
				}
			}
		})
	}
}
