package volume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The directories above the volumes keep other local users out: the root
// directory (also one made 0755 by someone else), pods, the pod's
// directory, its volumes directory and every plugin directory are 0750,
// whatever the umask (0 here), while the volume directories and files
// inside keep the modes containers expect.
func TestVolumeParentDirsClosed(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	e := newEnv(t, true)
	if err := os.Chmod(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	e.getter.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "s"}, Data: map[string][]byte{"password": []byte("hunter2")}})
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cm"}, Data: map[string]string{"k": "v"}})
	pod := newPod("u1",
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
		v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
	)
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	podDir := e.m.PodDir(pod.UID)
	want := map[string]os.FileMode{
		e.root:                           0o750,
		filepath.Join(e.root, "pods"):    0o750,
		podDir:                           0o750,
		filepath.Join(podDir, "volumes"): 0o750,
		e.m.volumeDir(pod.UID, PluginEmptyDir, "scratch"):               0o777,
		filepath.Dir(e.m.volumeDir(pod.UID, PluginEmptyDir, "scratch")): 0o750,
		filepath.Dir(e.m.volumeDir(pod.UID, PluginSecret, "sec")):       0o750,
		filepath.Dir(e.m.volumeDir(pod.UID, PluginConfigMap, "cfg")):    0o750,
		filepath.Dir(e.m.volumeDir(pod.UID, PluginDownwardAPI, "info")): 0o750,
		// Files follow defaultMode, as upstream.
		filepath.Join(e.m.volumeDir(pod.UID, PluginSecret, "sec"), "password"): 0o644,
	}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := fi.Mode().Perm(); got != mode {
			t.Errorf("%s: mode %#o, want %#o", p, got, mode)
		}
	}
}

func TestMakePodDir(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	root := filepath.Join(t.TempDir(), "a", "root")
	dir, err := MakePodDir(root, "uid1", "containers", "app")
	if err != nil {
		t.Fatal(err)
	}
	if dir != filepath.Join(root, "pods", "uid1", "containers", "app") {
		t.Errorf("dir = %s", dir)
	}
	// Created 0750 even under umask 077 (group traversal as upstream).
	for p := dir; p != filepath.Dir(root); p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != DataDirMode {
			t.Errorf("%s: mode %v (%v), want %#o", p, fi.Mode().Perm(), err, DataDirMode)
		}
	}
	// An existing narrower directory is not widened.
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := MakePodDir(root, "uid1"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(root); fi.Mode().Perm() != 0o700 {
		t.Errorf("root widened to %#o", fi.Mode().Perm())
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := MakePodDir(root, "uid1", bad); err == nil {
			t.Errorf("MakePodDir accepted %q", bad)
		}
	}
	// A file in a directory's place is an error.
	if err := os.WriteFile(filepath.Join(root, "pods", "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MakePodDir(root, "f"); err == nil {
		t.Error("MakePodDir accepted a file as the pod directory")
	}
}
