//go:build integration

package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
	if _, err := mountIDOf(t, base); errors.Is(err, errNoMountID) {
		t.Skipf("skipping: %v", err)
	}
	return r
}

func mountIDOf(t *testing.T, path string) (uint64, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return mountID(int(f.Fd()), path)
}

// TestIntegrationRemoveTreeMountAfterOpen: a host directory mounted on a
// pod directory's subdirectory after the removal opened it is not emptied
// through the mount: the removal works on the descriptor, which still
// refers to the directory below the mount.
func TestIntegrationRemoveTreeMountAfterOpen(t *testing.T) {
	r := newRemoveTreeRig(t)
	dir := filepath.Join(r.pod, "v")
	mkdirs(t, dir)
	writeTestFiles(t, filepath.Join(dir, "own"))
	mnt, err := mountIDOf(t, r.pod)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	bindMount(t, r.host, dir) // the race, won by the attacker
	if err := removeContent(fd, dir, mnt); err != nil {
		t.Fatalf("removeContent = %v", err)
	}
	r.checkHostIntact(t)
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "own")); !os.IsNotExist(err) {
		t.Errorf("the pod's own file below the mount: %v, want it removed", err)
	}
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

func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
}

// TestIntegrationRemoveTreeUnmounts plants mounts in a pod directory as a
// volume, or a container with bidirectional mount propagation, could.
// RemoveTree unmounts those it can unmount on its own and stops at the
// others (errMountBelow), and never deletes anything through a mount. The
// bind mounts come from the same filesystem as the pod directory, so a
// check of the device number alone (st_dev) would walk through them and
// delete the host's files.
func TestIntegrationRemoveTreeUnmounts(t *testing.T) {
	scratch := "volumes/kubernetes.io~empty-dir/scratch"
	tests := []struct {
		name  string
		plant func(t *testing.T, r *removeTreeRig) // mounts on r.pod's content
		// stops: RemoveTree cannot unmount everything on its own.
		stops bool
	}{
		{name: "bind mount of a host directory", plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, scratch, "escape")
			mkdirs(t, dir)
			writeTestFiles(t, filepath.Join(r.pod, scratch, "own"))
			bindMount(t, r.host, dir)
		}},
		{name: "a host directory mounted twice on one path", plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, scratch, "escape")
			mkdirs(t, dir)
			bindMount(t, r.host, dir)
			bindMount(t, r.host, dir)
		}},
		{name: "tmpfs volume", plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volumes/kubernetes.io~secret/s")
			mkdirs(t, dir)
			mountTmpfs(t, dir)
			mkdirs(t, filepath.Join(dir, "..data"))
			writeTestFiles(t, filepath.Join(dir, "..data/key"))
		}},
		{name: "the pod directory itself", plant: func(t *testing.T, r *removeTreeRig) {
			bindMount(t, r.host, r.pod)
		}},
		{name: "bind mount of a host file", stops: true, plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volume-subpaths/v/c")
			mkdirs(t, dir)
			writeTestFiles(t, filepath.Join(dir, "0"))
			bindMount(t, r.hostFile, filepath.Join(dir, "0"))
		}},
		{name: "bind mount inside a tmpfs", stops: true, plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, "volumes/kubernetes.io~empty-dir/mem")
			mkdirs(t, dir)
			mountTmpfs(t, dir)
			mkdirs(t, filepath.Join(dir, "in"))
			bindMount(t, r.host, filepath.Join(dir, "in"))
		}},
		{name: "a mount in use", stops: true, plant: func(t *testing.T, r *removeTreeRig) {
			dir := filepath.Join(r.pod, scratch, "escape")
			mkdirs(t, dir)
			bindMount(t, r.host, dir)
			f, err := os.Open(filepath.Join(dir, "marker"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
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
			r.checkHostIntact(t)
			if tt.stops {
				if !errors.Is(err, errMountBelow) {
					t.Fatalf("removeTree = %v, want an error wrapping %v", err, errMountBelow)
				}
				if left := mountsBelow(t, r.pod); len(left) == 0 {
					t.Errorf("no mount left after removeTree stopped")
				}
				// Once unmounted from the table, the rest goes.
				left := mountsBelow(t, r.pod)
				sort.SliceStable(left, func(i, j int) bool { return len(left[i]) > len(left[j]) })
				for _, p := range left {
					if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
						t.Fatalf("unmount %s: %v", p, err)
					}
				}
				err = removeTree(r.pod)
			}
			if err != nil {
				t.Fatalf("removeTree = %v", err)
			}
			if left := mountsBelow(t, r.pod); len(left) != 0 {
				t.Errorf("mounts after removeTree: %v", left)
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

// TestIntegrationCleanupReadsTableOnlyForMounts cleans up pods: one
// without mounts and one whose memory-backed emptyDir is mounted and into
// whose disk emptyDir a container bind-mounted a host directory must not
// read the node's mount table; one with a mount below another (which only
// the table shows in the order to unmount them) reads it to find and then
// to check them. Each time everything is unmounted and removed and nothing
// of the host deleted.
func TestIntegrationCleanupReadsTableOnlyForMounts(t *testing.T) {
	r := newRemoveTreeRig(t)
	root := filepath.Join(r.base, "root")
	clk := testingclock.NewFakeClock(epoch)
	mounter := &countingMounter{}
	m := New(Options{RootDir: root, Getter: newFakeGetter(clk), Clock: clk, Mounter: mounter})
	ctx := context.Background()
	disk := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	mem := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	tests := []struct {
		name  string
		vols  []v1.Volume
		plant func(t *testing.T, podDir string)
		reads int32
	}{
		{"no mount", []v1.Volume{disk}, func(t *testing.T, podDir string) {
			writeTestFiles(t, filepath.Join(podDir, "volumes/kubernetes.io~empty-dir/scratch/data"))
		}, 0},
		{"tmpfs and a planted bind mount", []v1.Volume{disk, mem}, func(t *testing.T, podDir string) {
			escape := filepath.Join(podDir, "volumes/kubernetes.io~empty-dir/scratch/escape")
			mkdirs(t, escape)
			bindMount(t, r.host, escape)
		}, 0},
		{"a bind mount planted inside the tmpfs", []v1.Volume{mem}, func(t *testing.T, podDir string) {
			escape := filepath.Join(podDir, "volumes/kubernetes.io~empty-dir/mem/escape")
			mkdirs(t, escape)
			bindMount(t, r.host, escape)
		}, 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := newPod(fmt.Sprintf("pod-%d", i), tt.vols...)
			podDir := filepath.Join(root, "pods", string(pod.UID))
			if err := m.Prepare(ctx, pod); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			tt.plant(t, podDir)
			before := mounter.lists.Load()
			if err := m.Cleanup(ctx, pod.UID); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if n := mounter.lists.Load() - before; n != tt.reads {
				t.Errorf("Cleanup read the mount table %d times, want %d", n, tt.reads)
			}
			if left := mountsBelow(t, podDir); len(left) != 0 {
				t.Errorf("mounts after Cleanup: %v", left)
			}
			if _, err := os.Lstat(podDir); !os.IsNotExist(err) {
				t.Errorf("pod directory after Cleanup: %v", err)
			}
			r.checkHostIntact(t)
		})
	}
}
