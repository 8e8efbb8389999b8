//go:build integration

package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// removeTreeRig is a temporary directory with a pod directory "pod" and,
// outside it, a directory "host" holding "marker" and a file "host-file":
// what a removal must never delete.
type removeTreeRig struct {
	base, pod, host, marker, hostFile string
}

func newRemoveTreeRig(t *testing.T) *removeTreeRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting needs root")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Runs before the temporary directory is removed: never remove it
	// through a mount left by a failed test.
	t.Cleanup(func() { detachBelow(t, base) })
	r := &removeTreeRig{base: base, pod: filepath.Join(base, "pod"), host: filepath.Join(base, "host")}
	r.marker, r.hostFile = filepath.Join(r.host, "marker"), filepath.Join(base, "host-file")
	mkdirs(t, r.pod, r.host)
	for _, p := range []string{r.marker, r.hostFile} {
		if err := os.WriteFile(p, []byte("host data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mountID(0, "stdin"); errors.Is(err, errNoMountID) {
		t.Skipf("skipping: %v", err)
	}
	return r
}

func (r *removeTreeRig) checkHostIntact(t *testing.T) {
	t.Helper()
	for _, p := range []string{r.marker, r.hostFile} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "host data" {
			t.Errorf("%s: %q, %v; want it untouched", p, b, err)
		}
	}
}

func bindMount(t *testing.T, source, target string) {
	t.Helper()
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount %s on %s: %v", source, target, err)
	}
}

// TestIntegrationRemoveTreeStopsAtMounts plants mounts in a pod directory
// as a container with bidirectional mount propagation, or a volume
// plugin, could: RemoveTree must stop at each without deleting anything
// through it. The bind mounts come from the same filesystem as the pod
// directory, so a check of the device number alone (st_dev) would walk
// through them and delete the host's files.
func TestIntegrationRemoveTreeStopsAtMounts(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, r *removeTreeRig) // mounts on r.pod's content
	}{
		{"bind mount of a host directory", func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volumes/kubernetes.io~empty-dir/scratch/escape")
			mkdirs(t, dir)
			writeTestFiles(t, filepath.Join(r.pod, "volumes/kubernetes.io~empty-dir/scratch/own"))
			bindMount(t, r.host, dir)
		}},
		{"bind mount of a host file", func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volume-subpaths/v/c")
			mkdirs(t, dir)
			writeTestFiles(t, filepath.Join(dir, "0"))
			bindMount(t, r.hostFile, filepath.Join(dir, "0"))
		}},
		{"bind mount inside a tmpfs", func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volumes/kubernetes.io~empty-dir/mem")
			mkdirs(t, dir)
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatalf("mount tmpfs: %v", err)
			}
			mkdirs(t, filepath.Join(dir, "in"))
			bindMount(t, r.host, filepath.Join(dir, "in"))
		}},
		{"the pod directory itself", func(t *testing.T, r *removeTreeRig) {
			bindMount(t, r.host, r.pod)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRemoveTreeRig(t)
			tt.plant(t, r)
			planted := mountsBelow(t, r.pod)
			if len(planted) == 0 {
				t.Fatal("no mount planted")
			}
			err := removeTree(r.pod)
			if !errors.Is(err, errMountBelow) {
				t.Fatalf("removeTree = %v, want an error wrapping %v", err, errMountBelow)
			}
			r.checkHostIntact(t)
			if left := mountsBelow(t, r.pod); len(left) != len(planted) {
				t.Errorf("mounts after removeTree: %v, want %v", left, planted)
			}
			// Once unmounted, the rest goes.
			for i := len(planted) - 1; i >= 0; i-- {
				if err := unix.Unmount(planted[i], 0); err != nil {
					t.Fatalf("unmount %s: %v", planted[i], err)
				}
			}
			if err := removeTree(r.pod); err != nil {
				t.Fatalf("removeTree after unmounting = %v", err)
			}
			if _, err := os.Lstat(r.pod); !os.IsNotExist(err) {
				t.Errorf("pod directory after removeTree: %v", err)
			}
			r.checkHostIntact(t)
		})
	}
}

// countingMounter is the system mounter counting its reads of the mount
// table.
type countingMounter struct {
	systemMounter
	lists atomic.Int32
}

func (c *countingMounter) List() ([]MountPoint, error) {
	c.lists.Add(1)
	return c.systemMounter.List()
}

// TestIntegrationCleanupReadsTableOnlyForMounts cleans up a pod without
// mounts, which must not read the node's mount table, and one whose
// memory-backed emptyDir is mounted and into whose disk emptyDir a
// container bind-mounted a host directory: both are unmounted, nothing of
// the host is deleted, and the table is read to find and then to check
// them.
func TestIntegrationCleanupReadsTableOnlyForMounts(t *testing.T) {
	r := newRemoveTreeRig(t)
	root := filepath.Join(r.base, "root")
	clk := testingclock.NewFakeClock(epoch)
	mounter := &countingMounter{}
	m := New(Options{RootDir: root, Getter: newFakeGetter(clk), Clock: clk, Mounter: mounter})
	ctx := context.Background()
	disk := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	mem := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}

	plain := newPod("plain", disk)
	if err := m.Prepare(ctx, plain); err != nil {
		t.Fatal(err)
	}
	writeTestFiles(t, filepath.Join(root, "pods/plain/volumes/kubernetes.io~empty-dir/scratch/data"))
	before := mounter.lists.Load()
	if err := m.Cleanup(ctx, plain.UID); err != nil {
		t.Fatalf("Cleanup of a pod without mounts: %v", err)
	}
	if n := mounter.lists.Load() - before; n != 0 {
		t.Errorf("Cleanup of a pod without mounts read the mount table %d times, want 0", n)
	}
	if _, err := os.Lstat(filepath.Join(root, "pods/plain")); !os.IsNotExist(err) {
		t.Errorf("pod directory after Cleanup: %v", err)
	}

	mounted := newPod("mounted", disk, mem)
	if err := m.Prepare(ctx, mounted); err != nil {
		t.Skipf("skipping: cannot mount tmpfs here: %v", err)
	}
	escape := filepath.Join(root, "pods/mounted/volumes/kubernetes.io~empty-dir/scratch/escape")
	mkdirs(t, escape)
	bindMount(t, r.host, escape)
	podDir := filepath.Join(root, "pods/mounted")
	if n := len(mountsBelow(t, podDir)); n != 2 {
		t.Fatalf("%d mounts below the pod directory, want 2", n)
	}
	before = mounter.lists.Load()
	if err := m.Cleanup(ctx, mounted.UID); err != nil {
		t.Fatalf("Cleanup of a pod with mounts: %v", err)
	}
	if n := mounter.lists.Load() - before; n != 2 {
		t.Errorf("Cleanup of a pod with mounts read the mount table %d times, want 2", n)
	}
	if left := mountsBelow(t, podDir); len(left) != 0 {
		t.Errorf("mounts after Cleanup: %v", left)
	}
	if _, err := os.Lstat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod directory after Cleanup: %v", err)
	}
	r.checkHostIntact(t)
}
