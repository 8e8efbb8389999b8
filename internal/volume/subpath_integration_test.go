//go:build integration

package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// subPathRig is a volume manager with the system mounter over a temporary
// root, a pod with an emptyDir "scratch" and a hostPath "host", and a
// directory outside every volume holding a marker file.
type subPathRig struct {
	m       *Manager
	root    string
	pod     *v1.Pod
	vol     string // the emptyDir's directory
	hostDir string // the hostPath volume
	outside string // holds "marker"
}

func newSubPathRig(t *testing.T) *subPathRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: bind mounts need root")
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &subPathRig{root: filepath.Join(base, "root"), hostDir: filepath.Join(base, "host"), outside: filepath.Join(base, "outside")}
	// Runs before the temporary directory is removed: never remove it
	// through a mount left by a failed test.
	t.Cleanup(func() { detachBelow(t, base) })
	for _, d := range []string{r.root, filepath.Join(r.hostDir, "sub"), r.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range map[string]string{filepath.Join(r.outside, "marker"): "host secret", filepath.Join(r.hostDir, "sub/keep"): "host data"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clk := testingclock.NewFakeClock(epoch)
	g := newFakeGetter(clk)
	g.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"key": "value"}})
	r.m = New(Options{RootDir: r.root, Clock: clk, Getter: g})
	r.pod = newPod("sp-1",
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: r.hostDir}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
	)
	r.vol = filepath.Join(r.root, "pods/sp-1/volumes/kubernetes.io~empty-dir/scratch")
	if err := r.m.Prepare(context.Background(), r.pod); err != nil {
		t.Fatal(err)
	}
	return r
}

// mounts returns the HostPaths of the container's volumeMounts, each
// given as volume:subPath.
func (r *subPathRig) mounts(ctx context.Context, c string, specs ...string) ([]string, error) {
	ctr := v1.Container{Name: c}
	for i, s := range specs {
		name, sub, _ := strings.Cut(s, ":")
		ctr.VolumeMounts = append(ctr.VolumeMounts, v1.VolumeMount{Name: name, MountPath: "/m" + string(rune('a'+i)), SubPath: sub})
	}
	got, err := r.m.Mounts(ctx, r.pod, &ctr)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(got))
	for i, m := range got {
		out[i] = m.HostPath
	}
	return out, nil
}

// mountIDs lists the IDs of the mounts at path, from /proc/self/mountinfo.
func mountIDs(t *testing.T, path string) []string {
	t.Helper()
	var ids []string
	for _, f := range mountinfoLines(t) {
		if f[4] == path {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// uniqueMountID is the never reused ID of the mount path is on (Linux
// 6.8 and later).
func uniqueMountID(t *testing.T, path string) uint64 {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &stx); err != nil {
		t.Fatal(err)
	}
	if stx.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		t.Skip("skipping: the kernel has no unique mount IDs")
	}
	return stx.Mnt_id
}

// mountsBelow lists the mount points at or below dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, f := range mountinfoLines(t) {
		if f[4] == dir || strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

func mountinfoLines(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 5 {
			out = append(out, f)
		}
	}
	return out
}

// detachBelow lazily unmounts whatever a failed test left below dir.
func detachBelow(t *testing.T, dir string) {
	for {
		left := mountsBelow(t, dir)
		if len(left) == 0 {
			return
		}
		t.Errorf("mounts left below %s: %v", dir, left)
		for _, p := range left {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Logf("unmount %s: %v", p, err)
				return
			}
		}
	}
}

// seesMarker tells whether the runtime, mounting hostPath as it gets it
// (links in the path are followed), would show the container the marker
// file outside the volume.
func seesMarker(hostPath string) bool {
	_, err := os.Stat(filepath.Join(hostPath, "marker"))
	return err == nil
}

// The attack of CVE-2017-1002101: after heartlet has checked the subPath
// and before the runtime mounts what heartlet returned, the container
// replaces the directory with a link to the host. What the runtime mounts
// must still be the directory that was checked.
func TestIntegrationSubPathSwappedAfterCheck(t *testing.T) {
	r := newSubPathRig(t)
	ctx := context.Background()
	d := filepath.Join(r.vol, "d")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "inside"), []byte("pod data"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := r.mounts(ctx, "c1", "scratch:d")
	if err != nil {
		t.Fatal(err)
	}
	// The container's move.
	if err := os.Rename(d, d+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(r.outside, d); err != nil {
		t.Fatal(err)
	}
	if seesMarker(got[0]) {
		t.Fatalf("the runtime would mount %s, which now shows the host's marker", got[0])
	}
	if b, err := os.ReadFile(filepath.Join(got[0], "inside")); err != nil || string(b) != "pod data" {
		t.Errorf("%s shows %q, %v; want the checked directory's content", got[0], b, err)
	}
	if err := r.m.Cleanup(ctx, r.pod.UID); err != nil {
		t.Fatal(err)
	}
}

// The same attack, raced: a goroutine swaps the subPath's directory for a
// link out of the volume as fast as it can while container starts ask for
// the mount. No start may get the host's directory.
func TestIntegrationSubPathRace(t *testing.T) {
	r := newSubPathRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	d := filepath.Join(r.vol, "d")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_ = os.Mkdir(d, 0o755)
			_ = os.WriteFile(filepath.Join(d, "inside"), nil, 0o644)
			_ = os.RemoveAll(d)
			_ = os.Symlink(r.outside, d)
			_ = os.Remove(d)
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			cancel()
			wg.Wait()
			stopped = true
		}
	}
	defer stop()
	// 500 attempts, and more (up to 10,000) until one found the directory
	// in place: on two busy CPUs the attacker can win 500 in a row.
	const attempts, most = 500, 10_000
	var ok, refused, failed, i int
	var target string
	for ; i < attempts || (ok == 0 && i < most); i++ {
		got, err := r.mounts(context.Background(), "c1", "scratch:d")
		switch {
		case errors.Is(err, ErrInvalidSubPath):
			refused++
			continue
		case err != nil:
			if failed++; failed <= 3 {
				t.Logf("attempt %d: %v", i, err)
			}
			continue
		}
		ok++
		target = got[0]
		// The runtime resolves the path some time later, while the
		// attacker goes on: look at it repeatedly.
		for j := 0; j < 50; j++ {
			if seesMarker(got[0]) {
				t.Fatalf("attempt %d: the runtime would mount %s, which shows the host's marker", i, got[0])
			}
		}
	}
	stop()
	t.Logf("%d attempts: %d mounted inside the volume, %d refused (a link out at the time), %d failed otherwise", i, ok, refused, failed)
	if ok == 0 {
		t.Fatal("no attempt succeeded")
	}
	if n := len(mountIDs(t, target)); n > 1 {
		t.Errorf("%d mounts stacked on %s", n, target)
	}
	if err := r.m.Cleanup(context.Background(), r.pod.UID); err != nil {
		t.Fatal(err)
	}
	if left := mountsBelow(t, r.root); len(left) != 0 {
		t.Errorf("mounts left after Cleanup: %v", left)
	}
}

func TestIntegrationSubPathRefused(t *testing.T) {
	r := newSubPathRig(t)
	ctx := context.Background()
	for name, target := range map[string]string{
		"abs":  r.outside,
		"rel":  "../../../../../../outside",
		"loop": "loop",
		"ping": "pong",
		"pong": "ping",
	} {
		if err := os.Symlink(target, filepath.Join(r.vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"abs", "abs/new", "rel", "rel/marker", "loop", "ping/x"} {
		if _, err := r.mounts(ctx, "c1", "scratch:"+sub); !errors.Is(err, ErrInvalidSubPath) {
			t.Errorf("subPath %s: %v, want ErrInvalidSubPath", sub, err)
		}
	}
	if left := mountsBelow(t, r.root); len(left) != 0 {
		t.Errorf("mounts made for refused subPaths: %v", left)
	}
	if entries, _ := os.ReadDir(r.outside); len(entries) != 1 {
		t.Errorf("created outside the volume: %v", entries)
	}
	if err := r.m.Cleanup(ctx, r.pod.UID); err != nil {
		t.Fatal(err)
	}
}

// Missing directories are created, the targets are made with the type of
// what they show, repeated calls keep the same mount, a replaced subPath
// is remounted in place, and Cleanup unmounts everything without touching
// the host's files behind a hostPath subPath.
func TestIntegrationSubPathLifecycle(t *testing.T) {
	r := newSubPathRig(t)
	ctx := context.Background()
	specs := []string{"scratch:a/b/c", "host:sub", "cfg:key", "scratch:"}
	got, err := r.mounts(ctx, "c1", specs...)
	if err != nil {
		t.Fatal(err)
	}
	subPaths := filepath.Join(r.root, "pods/sp-1/volume-subpaths")
	for i, want := range []string{filepath.Join(subPaths, "scratch/c1/0"), filepath.Join(subPaths, "host/c1/1"), filepath.Join(subPaths, "cfg/c1/2"), r.vol} {
		if got[i] != want {
			t.Errorf("HostPath %d = %s, want %s", i, got[i], want)
		}
	}
	if m := fileMode(t, filepath.Join(r.vol, "a/b/c")); m != 0o777 {
		t.Errorf("mode of the created subPath = %o, want 777", m)
	}
	if b, err := os.ReadFile(filepath.Join(got[1], "keep")); err != nil || string(b) != "host data" {
		t.Errorf("hostPath subPath shows %q, %v", b, err)
	}
	if fi, err := os.Lstat(got[2]); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("target of the configMap key: %v, %v; want a file", fi, err)
	}
	if b, err := os.ReadFile(got[2]); err != nil || string(b) != "value" {
		t.Errorf("configMap subPath shows %q, %v", b, err)
	}
	// What the mount shows is the volume's directory.
	if err := os.WriteFile(filepath.Join(r.vol, "a/b/c/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(got[0], "f")); err != nil {
		t.Errorf("the subPath mount does not show the volume's file: %v", err)
	}

	// Container restarts: the same mount every time.
	if ids := mountIDs(t, got[0]); len(ids) != 1 {
		t.Fatalf("mounts on %s: %v, want one", got[0], ids)
	}
	first := uniqueMountID(t, got[0])
	for range 10 {
		if _, err := r.mounts(ctx, "c1", specs...); err != nil {
			t.Fatal(err)
		}
	}
	if ids, id := mountIDs(t, got[0]), uniqueMountID(t, got[0]); len(ids) != 1 || id != first {
		t.Errorf("mounts on %s after restarts: %v, unique ID %d; want one, %d", got[0], ids, id, first)
	}

	// The subPath replaced by another directory: remounted, still one.
	if err := os.Rename(filepath.Join(r.vol, "a/b/c"), filepath.Join(r.vol, "a/b/old")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mounts(ctx, "c1", specs...); err != nil {
		t.Fatal(err)
	}
	if ids, id := mountIDs(t, got[0]), uniqueMountID(t, got[0]); len(ids) != 1 || id == first {
		t.Errorf("mounts on %s after the subPath was replaced: %v, unique ID %d (was %d); want one new", got[0], ids, id, first)
	}
	if _, err := os.Stat(filepath.Join(got[0], "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the remounted subPath still shows the old directory: %v", err)
	}

	// A fresh manager (heartlet restarted) cleans the pod up from disk and
	// the mount table alone.
	m2 := New(Options{RootDir: r.root})
	if err := m2.Cleanup(ctx, r.pod.UID); err != nil {
		t.Fatal(err)
	}
	if left := mountsBelow(t, r.root); len(left) != 0 {
		t.Errorf("mounts left after Cleanup: %v", left)
	}
	if _, err := os.Stat(filepath.Join(r.root, "pods/sp-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod directory after Cleanup: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(r.hostDir, "sub/keep")); err != nil || string(b) != "host data" {
		t.Errorf("the hostPath's file after Cleanup: %q, %v", b, err)
	}
	if err := m2.Cleanup(ctx, r.pod.UID); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
}
