package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// resolvers are the two ways a subPath is opened: openSubPath (openat2
// where the kernel has it, the walk for what is missing) and the walk
// alone, as on kernels without openat2.
var resolvers = []struct {
	name string
	open func(base, sub string, perm os.FileMode) (int, error)
}{
	{"openSubPath", openSubPath},
	{"walk", func(base, sub string, perm os.FileMode) (int, error) {
		root, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		defer unix.Close(root)
		fd, err := walkBeneath(root, sub, perm)
		if err != nil {
			return -1, subPathError(base, sub, err)
		}
		return fd, nil
	}},
}

// fdPath is the path the kernel gives an open descriptor.
func fdPath(t *testing.T, fd int) string {
	t.Helper()
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// layout makes <root>/vol (the volume) and <root>/outside with a marker,
// and the links given (name in the volume → target).
func layout(t *testing.T, links map[string]string) (vol, outside string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vol, outside = filepath.Join(root, "vol"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(vol, "real/deep"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{filepath.Join(vol, "real/file"): "in", filepath.Join(outside, "marker"): "out"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		target = strings.ReplaceAll(target, "OUTSIDE", outside)
		target = strings.ReplaceAll(target, "VOL", vol)
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	return vol, outside
}

func TestOpenSubPath(t *testing.T) {
	links := map[string]string{
		"in":       "real",
		"indeep":   "real/deep/../file", // climbs, but stays inside
		"chain":    "in",
		"abs":      "OUTSIDE",
		"absin":    "VOL/real", // absolute, even though inside: refused
		"up":       "../outside",
		"upup":     "../../..",
		"viareal":  "real/../../outside",
		"loop":     "loop",
		"ping":     "pong",
		"pong":     "ping",
		"dangling": "made/by/heartlet",
		"self":     ".",
	}
	tests := []struct {
		sub     string
		want    string // path relative to the volume, "" for the volume itself
		created bool   // want is a directory created with the volume's mode
		invalid bool   // ErrInvalidSubPath
		errno   error  // another error with this errno
	}{
		{sub: "real", want: "real"},
		{sub: "real/file", want: "real/file"},
		{sub: ".", want: ""},
		{sub: "self/self/real", want: "real"},
		{sub: "in/file", want: "real/file"},
		{sub: "chain/deep", want: "real/deep"},
		{sub: "indeep", want: "real/file"},
		{sub: "new/a/b", want: "new/a/b", created: true},
		{sub: "in/new", want: "real/new", created: true},
		{sub: "dangling", want: "made/by/heartlet", created: true},
		{sub: "abs", invalid: true},
		{sub: "abs/marker", invalid: true},
		{sub: "abs/new", invalid: true},
		{sub: "absin", invalid: true},
		{sub: "up", invalid: true},
		{sub: "up/new", invalid: true},
		{sub: "upup", invalid: true},
		{sub: "viareal/marker", invalid: true},
		{sub: "loop", invalid: true},
		{sub: "ping/x", invalid: true},
		{sub: "real/file/x", errno: unix.ENOTDIR},
	}
	for _, r := range resolvers {
		for _, tc := range tests {
			t.Run(r.name+"/"+tc.sub, func(t *testing.T) {
				vol, outside := layout(t, links)
				fd, err := r.open(vol, tc.sub, 0o777)
				if entries, _ := os.ReadDir(outside); len(entries) != 1 {
					t.Errorf("the directory outside the volume now holds %v", entries)
				}
				switch {
				case tc.invalid:
					if !errors.Is(err, ErrInvalidSubPath) {
						t.Fatalf("open %q = %v, want ErrInvalidSubPath", tc.sub, err)
					}
					return
				case tc.errno != nil:
					if !errors.Is(err, tc.errno) || errors.Is(err, ErrInvalidSubPath) {
						t.Fatalf("open %q = %v, want %v", tc.sub, err, tc.errno)
					}
					return
				case err != nil:
					t.Fatalf("open %q: %v", tc.sub, err)
				}
				defer unix.Close(fd)
				if got, want := fdPath(t, fd), filepath.Join(vol, tc.want); got != want {
					t.Errorf("open %q = %s, want %s", tc.sub, got, want)
				}
				if tc.created {
					if m := fileMode(t, filepath.Join(vol, tc.want)); m != 0o777 {
						t.Errorf("mode of created %s = %o, want 777 (the volume's)", tc.want, m)
					}
				}
			})
		}
	}
}

// TestOpenSubPathRace attacks the resolution: while it runs, a goroutine
// swaps an element of the subPath between a directory and a link out of
// the volume as fast as it can. Every open must either fail or give the
// directory inside the volume.
func TestOpenSubPathRace(t *testing.T) {
	for _, r := range resolvers {
		for _, link := range []string{"OUTSIDE", "../outside"} {
			t.Run(r.name+"/"+link, func(t *testing.T) {
				vol, outside := layout(t, nil)
				target := strings.ReplaceAll(link, "OUTSIDE", outside)
				d := filepath.Join(vol, "d")
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						_ = os.Mkdir(d, 0o755)
						_ = os.RemoveAll(d)
						_ = os.Symlink(target, d)
						_ = os.RemoveAll(d)
					}
				}()
				defer func() { cancel(); wg.Wait() }()
				var ok, refused, other int
				for i := 0; i < 2000; i++ {
					fd, err := r.open(vol, "d/sub", 0o755)
					switch {
					case errors.Is(err, ErrInvalidSubPath):
						refused++
						continue
					case err != nil:
						// The directory vanished under the walk.
						other++
						continue
					}
					p := fdPath(t, fd)
					unix.Close(fd)
					if !strings.HasPrefix(p, vol+"/") {
						t.Fatalf("attempt %d opened %s, outside the volume", i, p)
					}
					ok++
				}
				if entries, _ := os.ReadDir(outside); len(entries) != 1 {
					t.Errorf("the directory outside the volume now holds %v", entries)
				}
				t.Logf("2000 opens: %d inside the volume, %d refused, %d failed otherwise", ok, refused, other)
			})
		}
	}
}

// FuzzOpenSubPath checks both resolvers on any subPath: what they open
// lies inside the volume, nothing is created outside it, and the walk
// agrees with openat2 on what exists.
func FuzzOpenSubPath(f *testing.F) {
	for _, s := range []string{"a", "a/b/c", "/etc", "in/x", "out", "out/x", "dot/./x", "a//b", "self/self/x", "loop", ".", "in/deep", "up/x", "real/file/x", "absin"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		if validateSubPath(sub) != nil || sub == "" {
			return
		}
		vol, outside := layout(t, map[string]string{"in": "real", "out": "../outside", "abs": "OUTSIDE", "absin": "VOL/real",
			"self": ".", "loop": "loop", "dot": ".", "up": "real/../..", "deep": "real/deep/.."})
		root, err := unix.Open(vol, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(root)
		kfd, kerr := openBeneath(root, sub)
		if errors.Is(kerr, errOpenat2Unavailable) {
			t.Skip("no openat2 here")
		}
		wfd, werr := walkBeneath(root, sub, 0o755)
		if entries, _ := os.ReadDir(outside); len(entries) != 1 {
			t.Fatalf("walk of %q left %v outside the volume", sub, entries)
		}
		if werr == nil {
			defer unix.Close(wfd)
			if p := fdPath(t, wfd); p != vol && !strings.HasPrefix(p, vol+"/") {
				t.Fatalf("walk of %q opened %s, outside the volume", sub, p)
			}
		}
		switch {
		case kerr == nil:
			defer unix.Close(kfd)
			if werr != nil {
				t.Fatalf("openat2 opened %q (%s) but the walk failed: %v", sub, fdPath(t, kfd), werr)
			}
			if k, w := fdPath(t, kfd), fdPath(t, wfd); k != w {
				t.Fatalf("openat2 opened %q as %s, the walk as %s", sub, k, w)
			}
		case errors.Is(kerr, unix.EXDEV), errors.Is(kerr, unix.ELOOP):
			if !errors.Is(subPathError(vol, sub, werr), ErrInvalidSubPath) {
				t.Fatalf("openat2 refused %q (%v), the walk said %v", sub, kerr, werr)
			}
		}
	})
}

// subPathPod is a pod whose container c1 mounts subPath sub of an
// emptyDir (medium Memory, so the fake mounter has a volume mount too).
func subPathPod(sub string) *v1.Pod {
	pod := newPod("u1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "scratch", MountPath: "/all"},
		{Name: "scratch", MountPath: "/x", SubPath: sub},
	}
	return pod
}

func countMounts(t *testing.T, m Mounter, path string) int {
	t.Helper()
	mps, err := m.List()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mp := range mps {
		if mp.Path == path {
			n++
		}
	}
	return n
}

// Repeated calls (container restarts) leave one mount on the target: a
// stale or stacked mount is unmounted before the new one, and a target of
// the wrong type is replaced.
func TestMountsSubPathNoStacking(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	pod := subPathPod("d")
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Mounts(ctx, pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	target := got[1].HostPath
	realRoot, _ := filepath.EvalSymlinks(e.root)
	if want := filepath.Join(realRoot, "pods/u1/volume-subpaths/scratch/c1/1"); target != want {
		t.Fatalf("HostPath = %s, want %s", target, want)
	}
	// Two more mounts stacked on the target, as a crash might leave.
	for range 2 {
		if err := e.mounter.BindMount("/", target); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := e.m.Mounts(ctx, pod, &pod.Spec.Containers[0]); err != nil {
			t.Fatal(err)
		}
		if n := countMounts(t, e.mounter, target); n != 1 {
			t.Fatalf("%d mounts on %s, want 1", n, target)
		}
	}
	// The directory is replaced by a file: the target becomes a file.
	vol := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
	if err := os.Remove(filepath.Join(vol, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "d"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Mounts(ctx, pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(target); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("target after the subPath became a file: %v, %v", fi, err)
	}
	if n := countMounts(t, e.mounter, target); n != 1 {
		t.Errorf("%d mounts on %s, want 1", n, target)
	}
}

// Cleanup unmounts the subPath mounts before the volumes they point into,
// and removes the volume-subpaths tree.
func TestCleanupSubPaths(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	pod := subPathPod("a/b")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/y", SubPath: "a"}}}}
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, c := range []*v1.Container{&pod.Spec.InitContainers[0], &pod.Spec.Containers[0]} {
		got, err := e.m.Mounts(ctx, pod, c)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, got[len(got)-1].HostPath)
	}
	if err := e.m.Cleanup(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	vol, _ := filepath.EvalSymlinks(e.root)
	vol = filepath.Join(vol, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
	unmounted := e.mounter.unmounted
	iv := slices.Index(unmounted, vol)
	for _, tg := range targets {
		if it := slices.Index(unmounted, tg); it < 0 || iv < 0 || it > iv {
			t.Errorf("unmounts %v: want %s before the volume %s", unmounted, tg, vol)
		}
	}
	if _, err := os.Stat(e.m.PodDir(pod.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory after Cleanup: %v", err)
	}
	if mps, _ := e.mounter.List(); len(mps) != 0 {
		t.Errorf("mounts left: %v", mps)
	}
}

// Cleanup never removes through a mount: when unmounting fails, or when a
// target holds something the mount table does not show, it fails and
// leaves the content alone.
func TestCleanupSubPathsKeepsContent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, e *env, target string)
	}{
		{"unmount fails", func(t *testing.T, e *env, _ string) { e.mounter.unmountErr = errors.New("device busy") }},
		{"mount not in the table", func(t *testing.T, e *env, target string) {
			// The fake forgets the mount; the target then holds files,
			// as a real mount would show them.
			e.mounter.mounts = slices.DeleteFunc(e.mounter.mounts, func(mp MountPoint) bool { return mp.Path == target })
			if err := os.WriteFile(filepath.Join(target, "precious"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			ctx := context.Background()
			pod := subPathPod("d")
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatal(err)
			}
			got, err := e.m.Mounts(ctx, pod, &pod.Spec.Containers[0])
			if err != nil {
				t.Fatal(err)
			}
			target := got[1].HostPath
			vol := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
			if err := os.WriteFile(filepath.Join(vol, "d/data"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			tc.prepare(t, e, target)
			if err := e.m.Cleanup(ctx, pod.UID); err == nil {
				t.Fatal("Cleanup succeeded")
			}
			for _, p := range []string{filepath.Join(vol, "d/data"), target} {
				if _, err := os.Lstat(p); err != nil {
					t.Errorf("%s after the failed Cleanup: %v", p, err)
				}
			}
			if e.mounter.unmountErr != nil {
				if n := countMounts(t, e.mounter, vol); n != 1 {
					t.Errorf("the volume was unmounted while its subPath mount was still there")
				}
			}
		})
	}
}

// TestSubPathCreatedModeAndOwner: a missing subPath, each missing element
// of it, is created with the mode of the volume's directory, its special
// bits included, and owned by root and the group the volume's directory
// hands down, as upstream's makeMounts (GetMode of the volume, then
// SafeMakeDir, which chmods every directory it creates to that mode). An
// emptyDir under fsGroup is 2777 with the fsGroup: its subPath is too.
func TestSubPathCreatedModeAndOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the volume another group")
	}
	tests := []struct {
		name    string
		volMode os.FileMode
		volGid  int
		want    os.FileMode
		wantGid int
	}{
		{"emptyDir", 0o777, 0, 0o777, 0},
		{"emptyDir with fsGroup", 0o777 | os.ModeSetgid, 4242, 0o777 | os.ModeSetgid, 4242},
		{"hostPath 0755", 0o755, 0, 0o755, 0},
		{"sticky 1777", 0o777 | os.ModeSticky, 0, 0o777 | os.ModeSticky, 0},
		// Without setgid the group is the creator's, not the volume's.
		{"group without setgid", 0o770, 4242, 0o770, 0},
	}
	for _, r := range resolvers {
		for _, tc := range tests {
			t.Run(r.name+"/"+tc.name, func(t *testing.T) {
				vol := filepath.Join(t.TempDir(), "vol")
				if err := os.Mkdir(vol, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(vol, 0, tc.volGid); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(vol, tc.volMode); err != nil {
					t.Fatal(err)
				}
				perm, err := subPathDirMode(vol)
				if err != nil {
					t.Fatal(err)
				}
				fd, err := r.open(vol, "a/b", perm)
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
				for _, p := range []string{"a", "a/b"} {
					fi, err := os.Stat(filepath.Join(vol, p))
					if err != nil {
						t.Fatal(err)
					}
					st := fi.Sys().(*syscall.Stat_t)
					if got := fi.Mode() &^ os.ModeDir; got != tc.want || int(st.Gid) != tc.wantGid || st.Uid != 0 {
						t.Errorf("%s: mode %v uid %d gid %d, want %v uid 0 gid %d", p, got, st.Uid, st.Gid, tc.want, tc.wantGid)
					}
				}
			})
		}
	}
}
