package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMounts(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v"}})
	hostDir := t.TempDir()
	pod := newPod("u1",
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
	)
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "host", MountPath: "/host", ReadOnly: true, MountPropagation: ptr(v1.MountPropagationHostToContainer)},
		{Name: "cfg", MountPath: "/etc/cfg"},
		{Name: "scratch", MountPath: "/logs", SubPath: "logs/app"},
		{Name: "host", MountPath: "/h2", SubPath: "sub", MountPropagation: ptr(v1.MountPropagationNone)},
		{Name: "cfg", MountPath: "/etc/k", SubPath: "k"},
		{Name: "scratch", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: ptr(v1.RecursiveReadOnlyEnabled), BindMountOptions: []string{string(v1.BindMountOptionNoExec)}},
	}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Mounts(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
	cfg := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~configmap/cfg")
	realKey, err := filepath.EvalSymlinks(filepath.Join(cfg, "k"))
	if err != nil {
		t.Fatal(err)
	}
	realScratch, _ := filepath.EvalSymlinks(scratch)
	realHost, _ := filepath.EvalSymlinks(hostDir)
	realRoot, _ := filepath.EvalSymlinks(e.root)
	subPaths := filepath.Join(realRoot, "pods/u1/volume-subpaths")
	private := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	want := []*runtimeapi.Mount{
		{ContainerPath: "/scratch", HostPath: scratch, Propagation: private},
		{ContainerPath: "/host", HostPath: hostDir, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/etc/cfg", HostPath: cfg, Readonly: true, Propagation: private},
		{ContainerPath: "/logs", HostPath: filepath.Join(subPaths, "scratch/c1/3"), Propagation: private},
		{ContainerPath: "/h2", HostPath: filepath.Join(subPaths, "host/c1/4"), Propagation: private},
		{ContainerPath: "/etc/k", HostPath: filepath.Join(subPaths, "cfg/c1/5"), Readonly: true, Propagation: private},
		{ContainerPath: "/rro", HostPath: scratch, Readonly: true, RecursiveReadOnly: true, Propagation: private, MountOptions: []string{"noexec"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ContainerPath != w.ContainerPath || g.HostPath != w.HostPath || g.Readonly != w.Readonly ||
			g.Propagation != w.Propagation || g.SelinuxRelabel || g.RecursiveReadOnly != w.RecursiveReadOnly ||
			strings.Join(g.MountOptions, ",") != strings.Join(w.MountOptions, ",") {
			t.Errorf("mount %d = %v, want %v", i, g, w)
		}
	}
	// Each subPath is bind-mounted from what it resolved to, onto a
	// target of its type.
	for i, src := range map[int]string{3: filepath.Join(realScratch, "logs/app"), 4: filepath.Join(realHost, "sub"), 5: realKey} {
		if b := e.mounter.bound(want[i].HostPath); b != src {
			t.Errorf("mount %d: %s bound from %q, want %q", i, want[i].HostPath, b, src)
		}
	}
	if fi, err := os.Lstat(want[5].HostPath); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("target of a file subPath: %v, %v; want an empty file", fi, err)
	}
	if fi, err := os.Lstat(want[3].HostPath); err != nil || !fi.IsDir() {
		t.Errorf("target of a directory subPath: %v, %v; want a directory", fi, err)
	}
	// The sub-paths were created with the volume directory's mode.
	if m := fileMode(t, filepath.Join(scratch, "logs/app")); m != 0o777 {
		t.Errorf("mode of created subPath = %o, want 777", m)
	}
	if !strings.HasPrefix(realKey, cfg+"/..") {
		t.Errorf("configMap subPath %s does not resolve into the data dir", realKey)
	}
}

func TestMountsPropagation(t *testing.T) {
	tests := []struct {
		mode       *v1.MountPropagationMode
		privileged bool
		want       runtimeapi.MountPropagation
		wantErr    string
	}{
		{nil, false, runtimeapi.MountPropagation_PROPAGATION_PRIVATE, ""},
		{ptr(v1.MountPropagationNone), false, runtimeapi.MountPropagation_PROPAGATION_PRIVATE, ""},
		{ptr(v1.MountPropagationHostToContainer), false, runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, ""},
		{ptr(v1.MountPropagationBidirectional), true, runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, ""},
		{ptr(v1.MountPropagationBidirectional), false, 0, "only to privileged containers"},
		{ptr(v1.MountPropagationMode("Sideways")), false, 0, "invalid mountPropagation"},
	}
	for _, tc := range tests {
		c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/v", MountPropagation: tc.mode}}}
		if tc.privileged {
			c.SecurityContext = &v1.SecurityContext{Privileged: ptr(true)}
		}
		got, err := propagation(&c.VolumeMounts[0], c)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("propagation(%v) = %v, want error %q", tc.mode, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("propagation(%v) = %v, %v; want %v", tc.mode, got, err, tc.want)
		}
	}
}

func TestMountsErrors(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name    string
		mount   v1.VolumeMount
		setup   func(t *testing.T, volDir string)
		wantErr string
		is      error
	}{
		{name: "unknown volume", mount: v1.VolumeMount{Name: "nope", MountPath: "/x"}, wantErr: `cannot find volume "nope" to mount into container "c1"`},
		{name: "absolute subPath", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "/etc"}, is: ErrInvalidSubPath, wantErr: "must not be an absolute path"},
		{name: "dotdot subPath", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "a/../../etc"}, is: ErrInvalidSubPath, wantErr: "must not contain '..'"},
		{
			name: "symlink escape", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "evil/inside"}, is: ErrInvalidSubPath, wantErr: "leads out of volume path",
			setup: func(t *testing.T, volDir string) {
				if err := os.Symlink(outside, filepath.Join(volDir, "evil")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "relative symlink escape", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "up"}, is: ErrInvalidSubPath, wantErr: "leads out of volume path",
			setup: func(t *testing.T, volDir string) {
				if err := os.Symlink("../../..", filepath.Join(volDir, "up")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{name: "subPathExpr missing variable", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPathExpr: "$(NOPE)/logs"}, wantErr: "missing value for NOPE"},
		{name: "subPathExpr escape", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPathExpr: "$(UP)"}, is: ErrInvalidSubPath},
		{name: "recursive read-only without readOnly", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", RecursiveReadOnly: ptr(v1.RecursiveReadOnlyEnabled)}, wantErr: "recursiveReadOnly"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			pod := newPod("u1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
			c := &pod.Spec.Containers[0]
			c.Env = []v1.EnvVar{{Name: "UP", Value: ".."}}
			c.VolumeMounts = []v1.VolumeMount{tc.mount}
			if err := e.m.Prepare(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			volDir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
			if tc.setup != nil {
				tc.setup(t, volDir)
			}
			_, err := e.m.Mounts(context.Background(), pod, c)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("Mounts = %v, want error containing %q (is %v)", err, tc.wantErr, tc.is)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 0 {
				t.Errorf("something was created outside the volume: %v", entries)
			}
			if n := e.mounter.calls(); n != 0 {
				t.Errorf("%d mounts made for a refused volumeMount", n)
			}
		})
	}
}

func TestMountsSymlinkInsideVolume(t *testing.T) {
	e := newEnv(t, false)
	pod := newPod("u1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/x", SubPath: "link/file"}}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	volDir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
	if err := os.MkdirAll(filepath.Join(volDir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volDir, "real/file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(volDir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Mounts(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	realVol, _ := filepath.EvalSymlinks(volDir)
	if want := filepath.Join(realVol, "real/file"); e.mounter.bound(got[0].HostPath) != want {
		t.Errorf("%s bound from %q, want %s", got[0].HostPath, e.mounter.bound(got[0].HostPath), want)
	}
}

func TestMountsSubPathExpr(t *testing.T) {
	e := newEnv(t, false)
	pod := newPod("u1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "DIR", Value: "logs-$(POD)"},
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/x", SubPathExpr: "$(DIR)/$(NODE)/$$(LIT)"}}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Mounts(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	if b := e.mounter.bound(got[0].HostPath); !strings.HasSuffix(b, "/scratch/logs-web/node-1/$(LIT)") {
		t.Errorf("%s bound from %s", got[0].HostPath, b)
	}
	// With the caller's environment.
	got, err = e.m.MountsWithEnv(context.Background(), pod, c, map[string]string{"DIR": "d", "NODE": "n"})
	if err != nil {
		t.Fatal(err)
	}
	if b := e.mounter.bound(got[0].HostPath); !strings.HasSuffix(b, "/scratch/d/n/$(LIT)") {
		t.Errorf("%s bound with env from %s", got[0].HostPath, b)
	}
}

func TestValidateSubPath(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"a", true},
		{"a/b", true},
		{"a/./b", true},
		{"..a/b..", true},
		{"/a", false},
		{"..", false},
		{"a/..", false},
		{"a/../b", false},
		{"a\x00b", false},
	}
	for _, tc := range tests {
		err := validateSubPath(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("validateSubPath(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidSubPath) {
			t.Errorf("validateSubPath(%q) error %v is not ErrInvalidSubPath", tc.in, err)
		}
	}
}
