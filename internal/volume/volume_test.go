package volume

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestEmptyDir(t *testing.T) {
	tests := []struct {
		name      string
		src       v1.EmptyDirVolumeSource
		limits    v1.ResourceList
		alloc     v1.ResourceList
		wantMount bool
		wantOpts  []string
		wantErr   error
	}{
		{name: "disk", src: v1.EmptyDirVolumeSource{}},
		{name: "memory default size", src: v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}, wantMount: true},
		{
			name: "memory sizeLimit", wantMount: true, wantOpts: []string{"size=1048576"},
			src: v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi"))},
		},
		{
			name: "memory pod limit smaller than sizeLimit", wantMount: true, wantOpts: []string{"size=524288"},
			src:    v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr(resource.MustParse("1Mi"))},
			limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("512Ki")},
		},
		{
			name: "memory node allocatable", wantMount: true, wantOpts: []string{"size=2097152"},
			src:   v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory},
			alloc: v1.ResourceList{v1.ResourceMemory: resource.MustParse("2Mi")},
		},
		{name: "hugepages", src: v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}, wantErr: ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			if tc.alloc != nil {
				e.m.opts.Allocatable = func() v1.ResourceList { return tc.alloc }
			}
			pod := newPod("u1", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &tc.src}})
			pod.Spec.Containers[0].Resources.Limits = tc.limits
			ctx := context.Background()
			err := e.m.Prepare(ctx, pod)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Prepare = %v, want %v", err, tc.wantErr)
				}
				var ve *VolumeError
				if !errors.As(err, &ve) || ve.Volume != "scratch" {
					t.Fatalf("error %v does not name the volume", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~empty-dir/scratch")
			if m := fileMode(t, dir); m != 0o777 {
				t.Errorf("mode of %s = %o, want 777", dir, m)
			}
			if got := e.mounter.calls(); (got == 1) != tc.wantMount {
				t.Fatalf("mount calls = %d, want mounted=%v", got, tc.wantMount)
			}
			if tc.wantMount {
				opts := e.mounter.options[dir]
				if strings.Join(opts, ",") != strings.Join(tc.wantOpts, ",") {
					t.Errorf("tmpfs options = %v, want %v", opts, tc.wantOpts)
				}
			}
			// Idempotent: no second mount.
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatal(err)
			}
			if got := e.mounter.calls(); got > 1 {
				t.Errorf("second Prepare mounted again (%d calls)", got)
			}
		})
	}
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "missing")
	dirLink := filepath.Join(dir, "dirlink")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}
	// Any block device of the machine; its rows are skipped without one.
	blockDev := ""
	if entries, err := os.ReadDir("/dev"); err == nil {
		for _, e := range entries {
			if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
				blockDev = filepath.Join("/dev", e.Name())
				break
			}
		}
	}
	// Created paths get upstream's modes exactly: 0755 and 0644 under
	// umask 0.
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	mode := func(want os.FileMode) func(t *testing.T, p string) {
		return func(t *testing.T, p string) {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v (%v), want %#o", p, fi.Mode().Perm(), err, want)
			}
		}
	}

	tests := []struct {
		name     string
		path     string
		typ      *v1.HostPathType
		wantErr  string
		check    func(t *testing.T, p string)
		needsDev bool
	}{
		{name: "nil type", path: missing},
		{name: "unset type", path: missing, typ: ptr(v1.HostPathUnset)},
		{name: "directory", path: dir, typ: ptr(v1.HostPathDirectory)},
		{name: "directory on file", path: file, typ: ptr(v1.HostPathDirectory), wantErr: "hostPath type check failed: " + file + " is not a directory"},
		{name: "directory missing", path: missing, typ: ptr(v1.HostPathDirectory), wantErr: "hostPath " + missing + " doesn't exist"},
		{
			name: "directory or create", path: filepath.Join(dir, "new/nested"), typ: ptr(v1.HostPathDirectoryOrCreate),
			check: func(t *testing.T, p string) {
				if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
					t.Errorf("%s not created as a directory: %v", p, err)
				}
			},
		},
		{name: "directory or create on file", path: file, typ: ptr(v1.HostPathDirectoryOrCreate), wantErr: "is not a directory"},
		{name: "directory or create mode", path: filepath.Join(dir, "new2"), typ: ptr(v1.HostPathDirectoryOrCreate), check: mode(0o755)},
		{name: "directory or create existing", path: dir, typ: ptr(v1.HostPathDirectoryOrCreate)},
		{name: "directory through a symlink", path: dirLink, typ: ptr(v1.HostPathDirectory)},
		{name: "directory on socket", path: sock, typ: ptr(v1.HostPathDirectory), wantErr: "hostPath type check failed: " + sock + " is not a directory, it's a Socket"},
		{name: "file", path: file, typ: ptr(v1.HostPathFile)},
		{name: "file on directory", path: dir, typ: ptr(v1.HostPathFile), wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{
			name: "file or create", path: filepath.Join(dir, "newfile"), typ: ptr(v1.HostPathFileOrCreate),
			check: func(t *testing.T, p string) {
				fi, err := os.Stat(p)
				if err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
					t.Errorf("%s not created as an empty file: %v", p, err)
				}
			},
		},
		{name: "file or create mode", path: filepath.Join(dir, "newfile2"), typ: ptr(v1.HostPathFileOrCreate), check: mode(0o644)},
		{name: "file or create existing", path: file, typ: ptr(v1.HostPathFileOrCreate)},
		{name: "file missing", path: missing, typ: ptr(v1.HostPathFile), wantErr: "hostPath " + missing + " doesn't exist"},
		{name: "file on char device", path: "/dev/null", typ: ptr(v1.HostPathFile), wantErr: "is not a file, it's a CharDevice"},
		// As upstream, the parent of a FileOrCreate path must exist.
		{name: "file or create without parent", path: filepath.Join(dir, "nodir/f"), typ: ptr(v1.HostPathFileOrCreate), wantErr: "create hostPath file"},
		{name: "file or create on directory", path: dir, typ: ptr(v1.HostPathFileOrCreate), wantErr: "is not a file"},
		{name: "socket", path: sock, typ: ptr(v1.HostPathSocket)},
		{name: "socket on file", path: file, typ: ptr(v1.HostPathSocket), wantErr: "is not a socket file, it's a File"},
		{name: "char device", path: "/dev/null", typ: ptr(v1.HostPathCharDev)},
		{name: "char device on file", path: file, typ: ptr(v1.HostPathCharDev), wantErr: "is not a character device"},
		{name: "socket missing", path: missing, typ: ptr(v1.HostPathSocket), wantErr: "hostPath " + missing + " doesn't exist"},
		{name: "char device on directory", path: dir, typ: ptr(v1.HostPathCharDev), wantErr: "is not a character device, it's a Directory"},
		{name: "char device on block device", path: blockDev, typ: ptr(v1.HostPathCharDev), wantErr: "is not a character device, it's a BlockDevice", needsDev: true},
		{name: "block device", path: blockDev, typ: ptr(v1.HostPathBlockDev), needsDev: true},
		{name: "block device on char device", path: "/dev/null", typ: ptr(v1.HostPathBlockDev), wantErr: "is not a block device, it's a CharDevice"},
		{name: "block device on file", path: file, typ: ptr(v1.HostPathBlockDev), wantErr: "is not a block device, it's a File"},
		{name: "invalid type", path: dir, typ: ptr(v1.HostPathType("Pipe")), wantErr: "Pipe is an invalid volume type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsDev && blockDev == "" {
				t.Skip("no block device in /dev")
			}
			e := newEnv(t, false)
			pod := newPod("u1", v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: tc.path, Type: tc.typ}}})
			err := e.m.Prepare(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Prepare = %v, want error containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), `MountVolume.SetUp failed for volume "h"`) {
					t.Errorf("error %q does not name the volume", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare = %v", err)
			}
			if tc.check != nil {
				tc.check(t, tc.path)
			}
		})
	}
}

func TestConfigMapVolume(t *testing.T) {
	cm := &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"},
		Data:       map[string]string{"app.conf": "port=80", "other": "x"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2}},
	}
	tests := []struct {
		name      string
		src       v1.ConfigMapVolumeSource
		wantFiles map[string]string
		wantModes map[string]os.FileMode
		wantErr   error
		wantMsg   string
	}{
		{
			name:      "all keys with default mode",
			src:       v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}},
			wantFiles: map[string]string{"app.conf": "port=80", "other": "x", "bin": "\x00\x01\x02"},
			wantModes: map[string]os.FileMode{"app.conf": 0o644, "bin": 0o644},
		},
		{
			name:      "defaultMode",
			src:       v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr(int32(0o400))},
			wantFiles: map[string]string{"app.conf": "port=80", "other": "x", "bin": "\x00\x01\x02"},
			wantModes: map[string]os.FileMode{"other": 0o400},
		},
		{
			name: "items with paths and modes",
			src: v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
				DefaultMode:          ptr(int32(0o640)),
				Items: []v1.KeyToPath{
					{Key: "app.conf", Path: "etc/app/app.conf", Mode: ptr(int32(0o600))},
					{Key: "bin", Path: "data.bin"},
				},
			},
			wantFiles: map[string]string{"etc/app/app.conf": "port=80", "data.bin": "\x00\x01\x02"},
			wantModes: map[string]os.FileMode{"etc/app/app.conf": 0o600, "data.bin": 0o640},
		},
		{
			name:    "missing key",
			src:     v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "nope", Path: "p"}}},
			wantErr: ErrMissingKey, wantMsg: "configmap references non-existent config key: nope",
		},
		{
			name: "missing key optional",
			src: v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Optional: ptr(true),
				Items: []v1.KeyToPath{{Key: "nope", Path: "p"}, {Key: "other", Path: "o"}}},
			wantFiles: map[string]string{"o": "x"},
		},
		{
			name:    "missing object",
			src:     v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}},
			wantErr: ErrMissingObject, wantMsg: `MountVolume.SetUp failed for volume "v" : configmap "absent" not found`,
		},
		{
			name:      "missing object optional",
			src:       v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)},
			wantFiles: map[string]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.getter.setConfigMap(cm)
			src := tc.src
			pod := newPod("u1", v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &src}})
			err := e.m.Prepare(context.Background(), pod)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("Prepare = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~configmap/v")
			mustEqualMap(t, readVolume(t, dir), tc.wantFiles)
			for p, want := range tc.wantModes {
				if got := fileMode(t, filepath.Join(dir, p)); got != want {
					t.Errorf("mode of %s = %o, want %o", p, got, want)
				}
			}
			if e.mounter.calls() != 0 {
				t.Error("configMap volume mounted a tmpfs")
			}
		})
	}
}

func TestMissingObjectErrorFields(t *testing.T) {
	e := newEnv(t, true)
	pod := newPod("u1", v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}})
	err := e.m.Prepare(context.Background(), pod)
	var mo *MissingObjectError
	if !errors.As(err, &mo) {
		t.Fatalf("Prepare = %v, want a *MissingObjectError", err)
	}
	if mo.Kind != "secret" || mo.Namespace != "ns1" || mo.Name != "creds" {
		t.Errorf("MissingObjectError = %+v", mo)
	}
	if got, want := mo.Error(), `secret "creds" not found`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestSecretVolumeOnTmpfs(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setSecret(&v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"},
		Data:       map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")},
	})
	pod := newPod("u1", v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: "creds", Items: []v1.KeyToPath{{Key: "pass", Path: "password", Mode: ptr(int32(0o400))}},
	}}})
	ctx := context.Background()
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~secret/s")
	mps, _ := e.mounter.List()
	if len(mps) != 1 || mps[0].Path != dir || mps[0].FSType != "tmpfs" {
		t.Fatalf("mounts = %v, want a tmpfs on %s", mps, dir)
	}
	mustEqualMap(t, readVolume(t, dir), map[string]string{"password": "s3cret"})
	if m := fileMode(t, filepath.Join(dir, "password")); m != 0o400 {
		t.Errorf("mode = %o, want 400", m)
	}
	// Prepare again: still one mount and one data dir.
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if e.mounter.calls() != 1 || len(dataDirs(t, dir)) != 1 {
		t.Errorf("second Prepare: %d mounts, data dirs %v", e.mounter.calls(), dataDirs(t, dir))
	}
}

func TestStandaloneRefusesAPIObjects(t *testing.T) {
	apiVolumes := []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}},
		{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
	}
	localVolumes := []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}}},
		{Name: "meta", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "pmeta", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	cases := []struct {
		name    string
		withAPI bool
		source  string
	}{
		{"no API server", false, "file"},
		{"static pod with API server", true, "file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.withAPI)
			pod := newPod("u1", append(append([]v1.Volume{}, apiVolumes...), localVolumes...)...)
			pod.Annotations[podConfigSourceKey] = tc.source
			err := e.m.Prepare(context.Background(), pod)
			if !errors.Is(err, ErrNoAPI) {
				t.Fatalf("Prepare = %v, want ErrNoAPI", err)
			}
			for _, v := range apiVolumes {
				if !strings.Contains(err.Error(), `volume "`+v.Name+`"`) {
					t.Errorf("error does not report volume %s: %v", v.Name, err)
				}
			}
			for _, v := range localVolumes {
				if strings.Contains(err.Error(), `volume "`+v.Name+`"`) {
					t.Errorf("local volume %s failed: %v", v.Name, err)
				}
			}
			if !strings.Contains(err.Error(), "static pods cannot reference API objects") {
				t.Errorf("error %q lacks the explanation", err)
			}
			got := readVolume(t, filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~downward-api/meta"))
			mustEqualMap(t, got, map[string]string{"name": "web"})
			if tc.withAPI && len(e.getter.tokenCalls()) != 0 {
				t.Error("a token was requested for a static pod")
			}
		})
	}
}

func TestDownwardAPIVolume(t *testing.T) {
	e := newEnv(t, false)
	e.m.opts.Allocatable = func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	}
	pod := newPod("u1", v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
		DefaultMode: ptr(int32(0o444)),
		Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
			{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}, Mode: ptr(int32(0o400))},
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
			{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
			{Path: "res/cpu_limit_milli", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c1", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
			{Path: "res/cpu_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c1", Resource: "limits.cpu"}},
			{Path: "res/cpu_request", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c1", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
			{Path: "res/mem_limit_mi", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c1", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
			{Path: "res/side_mem_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "side", Resource: "limits.memory", Divisor: resource.MustParse("1Gi")}},
			{Path: "res/side_mem_request", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "side", Resource: "requests.memory"}},
		},
	}}})
	pod.Annotations = map[string]string{podConfigSourceKey: "api", "note": "say \"hi\"\nbye"}
	pod.Spec.Containers = []v1.Container{
		{Name: "c1", Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("100M")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		}},
		{Name: "side"},
	}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~downward-api/info")
	mustEqualMap(t, readVolume(t, dir), map[string]string{
		"name":                 "web",
		"namespace":            "ns1",
		"uid":                  "u1",
		"labels":               "app=\"web\"\ntier=\"front\"",
		"annotations":          "kubernetes.io/config.source=\"api\"\nnote=\"say \\\"hi\\\"\\nbye\"",
		"app":                  "web",
		"res/cpu_limit_milli":  "1250",
		"res/cpu_limit":        "2",
		"res/cpu_request":      "250",
		"res/mem_limit_mi":     "96",
		"res/side_mem_limit":   "8",
		"res/side_mem_request": "0",
	})
	if m := fileMode(t, filepath.Join(dir, "uid")); m != 0o400 {
		t.Errorf("mode of uid = %o, want 400", m)
	}
	if m := fileMode(t, filepath.Join(dir, "name")); m != 0o444 {
		t.Errorf("mode of name = %o, want 444", m)
	}

	// Labels change: the next Prepare rewrites the file.
	pod2 := pod.DeepCopy()
	pod2.Labels["tier"] = "back"
	if err := e.m.Prepare(context.Background(), pod2); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, dir)["labels"]; got != "app=\"web\"\ntier=\"back\"" {
		t.Errorf("labels after update = %q", got)
	}
}

func TestDownwardAPIErrors(t *testing.T) {
	tests := []struct {
		name string
		item v1.DownwardAPIVolumeFile
		want string
	}{
		{"unsupported field", v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}, "unsupported fieldPath: spec.nodeName"},
		{"bad subscript", v1.DownwardAPIVolumeFile{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name['a']"}}, "does not support subscript"},
		{"unknown container", v1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}}, `container "nope"`},
		{"unsupported resource", v1.DownwardAPIVolumeFile{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c1", Resource: "limits.gpu"}}, "unsupported container resource: limits.gpu"},
		{"nothing set", v1.DownwardAPIVolumeFile{Path: "x"}, "neither fieldRef nor resourceFieldRef"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, false)
			pod := newPod("u1", v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{tc.item}}}})
			err := e.m.Prepare(context.Background(), pod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Prepare = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestFormatMap(t *testing.T) {
	tests := []struct {
		in   map[string]string
		want string
	}{
		{nil, ""},
		{map[string]string{"b": "2", "a": "1"}, "a=\"1\"\nb=\"2\""},
		{map[string]string{"k": "tab\there"}, `k="tab\there"`},
		{map[string]string{"k": "é"}, `k="é"`},
	}
	for _, tc := range tests {
		if got := formatMap(tc.in); got != tc.want {
			t.Errorf("formatMap(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// serviceAccountPod is a pod with the projected volume the API server's
// admission adds for service account tokens.
func serviceAccountPod(uid string, exp *int64) *v1.Pod {
	return newPod(uid, v1.Volume{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptr(int32(0o644)),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: exp}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
			}}},
		},
	}}})
}

func TestProjectedServiceAccountVolume(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "PEM"}})
	pod := serviceAccountPod("u1", ptr(int64(3607)))
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~projected/kube-api-access")
	mustEqualMap(t, readVolume(t, dir), map[string]string{"token": "token-1", "ca.crt": "PEM", "namespace": "ns1"})
	mps, _ := e.mounter.List()
	if len(mps) != 1 || mps[0].Path != dir {
		t.Errorf("projected volume not on tmpfs: mounts %v", mps)
	}

	calls := e.getter.tokenCalls()
	if len(calls) != 1 {
		t.Fatalf("token requests = %d, want 1", len(calls))
	}
	c := calls[0]
	if c.namespace != "ns1" || c.serviceAccount != "sa1" {
		t.Errorf("token requested for %s/%s, want ns1/sa1", c.namespace, c.serviceAccount)
	}
	ref := c.req.Spec.BoundObjectRef
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != "web" || ref.UID != types.UID("u1") {
		t.Errorf("BoundObjectRef = %+v, want the pod", ref)
	}
	if c.req.Spec.ExpirationSeconds == nil || *c.req.Spec.ExpirationSeconds != 3607 {
		t.Errorf("ExpirationSeconds = %v, want 3607", c.req.Spec.ExpirationSeconds)
	}
	if len(c.req.Spec.Audiences) != 0 {
		t.Errorf("Audiences = %v, want none (the API's default)", c.req.Spec.Audiences)
	}

	// Prepare again right away: the cached token is used.
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if n := len(e.getter.tokenCalls()); n != 1 {
		t.Errorf("token requests after second Prepare = %d, want 1", n)
	}
}

func TestProjectedAudienceAndDefaults(t *testing.T) {
	e := newEnv(t, true)
	pod := newPod("u1", v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "vault/token", Audience: "vault"}}},
	}}})
	pod.Spec.ServiceAccountName = ""
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := e.getter.tokenCalls()[0]
	if c.serviceAccount != "default" {
		t.Errorf("service account = %q, want default", c.serviceAccount)
	}
	if len(c.req.Spec.Audiences) != 1 || c.req.Spec.Audiences[0] != "vault" {
		t.Errorf("Audiences = %v, want [vault]", c.req.Spec.Audiences)
	}
	if *c.req.Spec.ExpirationSeconds != 3600 {
		t.Errorf("ExpirationSeconds = %d, want 3600", *c.req.Spec.ExpirationSeconds)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~projected/p")
	if m := fileMode(t, filepath.Join(dir, "vault/token")); m != 0o644 {
		t.Errorf("token mode = %o, want 644", m)
	}
}

func TestProjectedUnsupportedSource(t *testing.T) {
	e := newEnv(t, true)
	pod := newPod("u1", v1.Volume{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "b"}}},
	}}})
	err := e.m.Prepare(context.Background(), pod)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "clusterTrustBundle") {
		t.Fatalf("Prepare = %v, want ErrUnsupported naming clusterTrustBundle", err)
	}
}

func TestUnsupportedVolumeType(t *testing.T) {
	e := newEnv(t, true)
	pod := newPod("u1", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}})
	err := e.m.Prepare(context.Background(), pod)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "persistentVolumeClaim") {
		t.Fatalf("Prepare = %v, want ErrUnsupported naming the type", err)
	}
}

// The watch can deliver a new pod before the API server's caches and its
// node authorizer have it: the first token request of a new pod is asked
// again at once (briefly) when the server says NotFound or Forbidden,
// instead of failing the pod's volume set-up.
func TestTokenOfPodTheServerDoesNotKnowYet(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "sa1", errors.New("no relationship found between node and this object"))
	unavailable := apierrors.NewServiceUnavailable("etcd down")
	tests := []struct {
		name      string
		age       time.Duration // of the pod
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"new pod, pod not found twice", time.Second, []error{notFound, notFound}, 3, false},
		{"new pod, node not yet allowed", time.Second, []error{forbidden}, 2, false},
		{"new pod, never allowed", time.Second, slices.Repeat([]error{forbidden}, 10), 1 + len(unseenPodRetries), true},
		{"new pod, another error", time.Second, []error{unavailable}, 1, true},
		{"old pod", time.Minute, []error{notFound}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "PEM"}})
			e.getter.tokenErrs = tc.errs
			pod := serviceAccountPod("u1", ptr(int64(3600)))
			pod.CreationTimestamp = metav1.NewTime(epoch.Add(-tc.age))
			done := make(chan error, 1)
			go func() { done <- e.m.Prepare(context.Background(), pod) }()
			var err error
		wait:
			for {
				select {
				case err = <-done:
					break wait
				default:
				}
				if e.clk.HasWaiters() {
					e.clk.Step(time.Second)
				}
				runtime.Gosched()
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("Prepare = %v, want error %v", err, tc.wantErr)
			}
			if n := len(e.getter.tokenCalls()); n != tc.wantCalls {
				t.Errorf("token requests = %d, want %d", n, tc.wantCalls)
			}
		})
	}
}

func TestTokenRefresh(t *testing.T) {
	tests := []struct {
		name    string
		exp     int64
		notYet  time.Duration
		renewAt time.Duration
	}{
		{"80% of the lifetime", 3600, 47 * time.Minute, 48 * time.Minute},
		{"24 hours at most", 7 * 24 * 3600, 23*time.Hour + 59*time.Minute, 24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "PEM"}})
			pod := serviceAccountPod("u1", ptr(tc.exp))
			ctx := context.Background()
			if err := e.m.Prepare(ctx, pod); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~projected/kube-api-access")

			e.clk.SetTime(epoch.Add(tc.notYet))
			e.m.Refresh(ctx)
			if n := len(e.getter.tokenCalls()); n != 1 {
				t.Fatalf("token requests at %v = %d, want 1", tc.notYet, n)
			}
			if got := readVolume(t, dir)["token"]; got != "token-1" {
				t.Fatalf("token at %v = %q, want token-1", tc.notYet, got)
			}

			e.clk.SetTime(epoch.Add(tc.renewAt))
			e.m.Refresh(ctx)
			if n := len(e.getter.tokenCalls()); n != 2 {
				t.Fatalf("token requests at %v = %d, want 2", tc.renewAt, n)
			}
			if got := readVolume(t, dir)["token"]; got != "token-2" {
				t.Fatalf("token at %v = %q, want token-2", tc.renewAt, got)
			}
		})
	}
}

func TestTokenRenewalFailure(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": "PEM"}})
	pod := serviceAccountPod("u1", ptr(int64(3600)))
	ctx := context.Background()
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.getter.mu.Lock()
	e.getter.tokenErr = errors.New("apiserver down")
	e.getter.mu.Unlock()

	// Due but still valid: the current token stays.
	e.clk.SetTime(epoch.Add(50 * time.Minute))
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatalf("Prepare with a valid cached token = %v", err)
	}
	// Expired: the volume fails.
	e.clk.SetTime(epoch.Add(61 * time.Minute))
	err := e.m.Prepare(ctx, pod)
	if err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "apiserver down") {
		t.Fatalf("Prepare with an expired token = %v", err)
	}
}

func TestCleanup(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"}, Data: map[string][]byte{"k": []byte("v")}})
	pod := newPod("u1",
		v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	ctx := context.Background()
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(e.root, "pods/u1")
	// A nested mount and an unrelated one.
	nested := filepath.Join(podDir, "volumes/kubernetes.io~empty-dir/mem/inner")
	if err := os.Mkdir(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.mounter.Mount("tmpfs", nested, "tmpfs", nil); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(e.root, "pods/u10")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = e.mounter.Mount("tmpfs", other, "tmpfs", nil)

	// Unmount failure: nothing removed.
	e.mounter.unmountErr = errors.New("busy")
	if err := e.m.Cleanup(ctx, "u1"); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("Cleanup with a failing unmount = %v", err)
	}
	if _, err := os.Stat(podDir); err != nil {
		t.Fatalf("pod dir removed although unmount failed: %v", err)
	}
	e.mounter.unmountErr = nil

	if err := e.m.Cleanup(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Fatalf("pod dir still there: %v", err)
	}
	if len(e.mounter.unmounted) != 3 || e.mounter.unmounted[0] != nested {
		t.Errorf("unmounted %v, want 3 with the nested one first", e.mounter.unmounted)
	}
	mps, _ := e.mounter.List()
	if len(mps) != 1 || mps[0].Path != other {
		t.Errorf("mounts left = %v, want only %s", mps, other)
	}
	// Idempotent, and safe without Prepare; with the pod's directory gone
	// nothing can be mounted below it, so the mount table (whose reading
	// costs in proportion to every mount on the node) is not read.
	e.mounter.lists = 0
	if err := e.m.Cleanup(ctx, "u1"); err != nil {
		t.Errorf("second Cleanup = %v", err)
	}
	if err := e.m.Cleanup(ctx, "never-prepared"); err != nil {
		t.Errorf("Cleanup without Prepare = %v", err)
	}
	if e.mounter.lists != 0 {
		t.Errorf("Cleanup of pods without a directory read the mount table %d times", e.mounter.lists)
	}
	// A directory with nothing mounted below: one read, no second look.
	if err := os.MkdirAll(filepath.Join(e.root, "pods/u2/volumes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Cleanup(ctx, "u2"); err != nil {
		t.Errorf("Cleanup without mounts = %v", err)
	}
	if e.mounter.lists != 1 {
		t.Errorf("Cleanup without mounts read the mount table %d times, want 1", e.mounter.lists)
	}
	if _, err := os.Stat(filepath.Join(e.root, "pods/u2")); !os.IsNotExist(err) {
		t.Errorf("pod dir without mounts still there: %v", err)
	}
	// The pod is no longer refreshed.
	e.m.mu.Lock()
	n := len(e.m.pods)
	e.m.mu.Unlock()
	if n != 0 {
		t.Errorf("%d pods still tracked after Cleanup", n)
	}
}

func TestRunRefreshesConfigMap(t *testing.T) {
	e := newEnv(t, true)
	e.m.opts.RefreshPeriod = time.Minute
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v1"}})
	pod := newPod("u1", v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	other := newPod("u2", v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range []*v1.Pod{pod, other} {
		if err := e.m.Prepare(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	e.m.Forget("u2")

	ticks := make(chan struct{}, 10)
	e.m.afterRefresh = func() { ticks <- struct{}{} }
	done := make(chan error, 1)
	go func() { done <- e.m.Run(ctx) }()
	<-ticks // armed

	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~configmap/c")
	otherDir := filepath.Join(e.root, "pods/u2/volumes/kubernetes.io~configmap/c")
	before := dataDirs(t, dir)

	// Unchanged: a pass writes nothing.
	e.clk.Step(time.Minute)
	<-ticks
	if got := dataDirs(t, dir); len(got) != 1 || got[0] != before[0] {
		t.Fatalf("data dirs after an unchanged pass = %v, want %v", got, before)
	}

	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v2", "new": "n"}})
	e.clk.Step(time.Minute)
	<-ticks
	mustEqualMap(t, readVolume(t, dir), map[string]string{"k": "v2", "new": "n"})
	mustEqualMap(t, readVolume(t, otherDir), map[string]string{"k": "v1"})

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func TestRefreshSurvivesErrors(t *testing.T) {
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v1"}})
	pod := newPod("u1", v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	ctx := context.Background()
	if err := e.m.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "pods/u1/volumes/kubernetes.io~configmap/c")
	// The ConfigMap disappears: the volume keeps its last content.
	e.getter.mu.Lock()
	delete(e.getter.configMaps, "ns1/cfg")
	e.getter.mu.Unlock()
	e.m.Refresh(ctx)
	mustEqualMap(t, readVolume(t, dir), map[string]string{"k": "v1"})
}

func TestPrepareNilPod(t *testing.T) {
	e := newEnv(t, false)
	if err := e.m.Prepare(context.Background(), nil); err == nil {
		t.Fatal("Prepare(nil) succeeded")
	}
}

func TestPodDirs(t *testing.T) {
	e := newEnv(t, true)
	if uids, err := e.m.PodDirs(); err != nil || len(uids) != 0 {
		t.Fatalf("PodDirs before any pod = %v, %v; want none", uids, err)
	}
	ctx := context.Background()
	for _, uid := range []string{"u1", "u2"} {
		if err := e.m.Prepare(ctx, newPod(uid, v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.root, "pods", "not-a-dir"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	uids, err := e.m.PodDirs()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(uids)
	if !slices.Equal(uids, []types.UID{"u1", "u2"}) {
		t.Errorf("PodDirs = %v, want [u1 u2]", uids)
	}
}

// The syncs of a starting pod prepare its content volumes once: a Prepare
// of the same pod object within contentRewriteGap reads and writes
// nothing; a new object of the pod, a failed write or the period passing
// makes the next Prepare write them again.
func TestPrepareWritesContentOncePerPodObject(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, true)
	e.getter.setConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v1"}})
	vol := v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	pod := newPod("u1", vol)
	reads := func() int { e.getter.mu.Lock(); defer e.getter.mu.Unlock(); return e.getter.gets }
	steps := []struct {
		name      string
		do        func()
		pod       func() *v1.Pod
		wantReads int
		wantErr   bool
	}{
		{"first prepare", func() {}, func() *v1.Pod { return pod }, 1, false},
		{"same object again", func() {}, func() *v1.Pod { return pod }, 0, false},
		{"same object, gap not over", func() { e.clk.Step(contentRewriteGap - time.Second) }, func() *v1.Pod { return pod }, 0, false},
		{"gap over: a periodic sync writes them", func() { e.clk.Step(time.Second) }, func() *v1.Pod { return pod }, 1, false},
		{"an update of the pod", func() { pod = pod.DeepCopy(); pod.Labels["v"] = "2" }, func() *v1.Pod { return pod }, 1, false},
		{"a failed read", func() { pod = pod.DeepCopy(); e.getter.getErr = errors.New("API down") }, func() *v1.Pod { return pod }, 1, true},
		{"retried after the failure", func() { e.getter.getErr = nil }, func() *v1.Pod { return pod }, 1, false},
		{"and then settled", func() {}, func() *v1.Pod { return pod }, 0, false},
	}
	for _, st := range steps {
		e.getter.mu.Lock()
		st.do()
		e.getter.mu.Unlock()
		before := reads()
		err := e.m.Prepare(ctx, st.pod())
		if (err != nil) != st.wantErr {
			t.Fatalf("%s: Prepare = %v, want error %v", st.name, err, st.wantErr)
		}
		if got := reads() - before; got != st.wantReads {
			t.Errorf("%s: %d reads, want %d", st.name, got, st.wantReads)
		}
	}
}
