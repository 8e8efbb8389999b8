package volume

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statOwner returns the group and mode of path without following links.
func statOwner(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Gid, fi.Mode()
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group to an arbitrary fsGroup needs root")
	}
}

func withFSGroup(pod *v1.Pod, gid int64, policy *v1.PodFSGroupChangePolicy) *v1.Pod {
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid, FSGroupChangePolicy: policy}
	return pod
}

// Upstream SetVolumeOwnership (pkg/volume/volume_linux.go): every file gets
// the fsGroup and group rw (ro for read-only volumes); directories also get
// group search and setgid.
func TestFSGroupOwnership(t *testing.T) {
	requireRoot(t)
	const gid = 4321
	tests := []struct {
		name     string
		vol      v1.VolumeSource
		api      bool
		plugin   string
		file     string // a file below the volume, written by the test or the volume
		wantRoot os.FileMode
		wantFile os.FileMode
	}{
		{
			name: "emptyDir", vol: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}},
			plugin: PluginEmptyDir, wantRoot: os.ModeDir | os.ModeSetgid | 0o777,
		},
		{
			name: "configMap", api: true, plugin: PluginConfigMap, file: "..data/key",
			vol:      v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr(int32(0o400))}},
			wantRoot: os.ModeDir | os.ModeSetgid | 0o777, wantFile: 0o440,
		},
		{
			name: "downwardAPI", plugin: PluginDownwardAPI, file: "..data/name",
			vol: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			}}},
			wantRoot: os.ModeDir | os.ModeSetgid | 0o777, wantFile: 0o644,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.api)
			e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"key": "v"}})
			pod := withFSGroup(newPod("u1", v1.Volume{Name: "v", VolumeSource: tc.vol}), gid, nil)
			ctx := context.Background()
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			dir := e.m.volumeDir(pod.UID, tc.plugin, "v")
			g, mode := statOwner(t, dir)
			if g != gid || mode != tc.wantRoot {
				t.Errorf("root: gid %d mode %v, want %d %v", g, mode, gid, tc.wantRoot)
			}
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if g, _ := statOwner(t, p); g != gid {
					t.Errorf("%s: gid %d, want %d", p, g, gid)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.file != "" {
				_, mode := statOwner(t, filepath.Join(dir, tc.file))
				if mode.Perm() != tc.wantFile {
					t.Errorf("%s mode %v, want %v", tc.file, mode.Perm(), tc.wantFile)
				}
			}
			// A second Prepare leaves the content alone: the atomic writer
			// sees the modes it wrote.
			before, _ := os.Readlink(filepath.Join(dir, dataDirName))
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatalf("second Prepare: %v", err)
			}
			if after, _ := os.Readlink(filepath.Join(dir, dataDirName)); after != before {
				t.Errorf("second Prepare rewrote the volume: %q -> %q", before, after)
			}
		})
	}
}

// Without fsGroup nothing changes ownership: files stay heartlet's.
func TestNoFSGroupKeepsOwnership(t *testing.T) {
	e := newEnv(t, false)
	pod := newPod("u1", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	g, mode := statOwner(t, e.m.volumeDir(pod.UID, PluginEmptyDir, "v"))
	if int(g) != os.Getegid() || mode != os.ModeDir|0o777 {
		t.Errorf("gid %d mode %v, want %d %v", g, mode, os.Getegid(), os.ModeDir|0o777)
	}
}

// fsGroupChangePolicy OnRootMismatch skips the walk when the root already
// has the group and permissions; Always fixes every file (upstream
// skipPermissionChange).
func TestFSGroupChangePolicy(t *testing.T) {
	requireRoot(t)
	const gid = 4321
	onRoot := v1.FSGroupChangeOnRootMismatch
	always := v1.FSGroupChangeAlways
	tests := []struct {
		name      string
		policy    *v1.PodFSGroupChangePolicy
		rootMatch bool
		wantFixed bool
	}{
		{name: "OnRootMismatch, root matches: skipped", policy: &onRoot, rootMatch: true, wantFixed: false},
		{name: "OnRootMismatch, root differs: walked", policy: &onRoot, rootMatch: false, wantFixed: true},
		{name: "Always, root matches: walked", policy: &always, rootMatch: true, wantFixed: true},
		{name: "unset is Always", policy: nil, rootMatch: true, wantFixed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "f")
			if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			rootMode := os.FileMode(0o755)
			if tc.rootMatch {
				if err := os.Chown(dir, 0, gid); err != nil {
					t.Fatal(err)
				}
				rootMode = os.ModeSetgid | 0o775
			}
			if err := os.Chmod(dir, rootMode); err != nil {
				t.Fatal(err)
			}
			pod := withFSGroup(&v1.Pod{}, gid, tc.policy)
			if err := podOwnership(pod).apply(dir, false, true); err != nil {
				t.Fatal(err)
			}
			g, mode := statOwner(t, file)
			fixed := g == gid && mode.Perm() == 0o660
			if fixed != tc.wantFixed {
				t.Errorf("file gid %d mode %v: fixed = %v, want %v", g, mode.Perm(), fixed, tc.wantFixed)
			}
		})
	}
}
