package pvc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/volume"
)

// blockDevice returns a block device node of this machine (any: the test
// only links it), or skips.
func blockDevice(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir("/dev")
	if err != nil {
		t.Skipf("no /dev: %v", err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeDevice != 0 && e.Type()&fs.ModeCharDevice == 0 {
			return filepath.Join("/dev", e.Name())
		}
	}
	t.Skip("no block device node in /dev")
	return ""
}

func TestSetUpBlock(t *testing.T) {
	dev := blockDevice(t)
	dir := t.TempDir()
	block := v1.PersistentVolumeBlock
	fsMode := v1.PersistentVolumeFilesystem
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}}
	withMode := func(src v1.PersistentVolumeSource, mode *v1.PersistentVolumeMode) *v1.PersistentVolume {
		pv := pvWith("pv-block", src)
		pv.Spec.VolumeMode = mode
		pv.Spec.NodeAffinity = affinity(nodeName)
		return pv
	}
	localDev := withMode(v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}}, &block)
	localDir := withMode(v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}, &block)
	localFS := withMode(v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}, &fsMode)
	hostPathDev := withMode(v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dev}}, &block)
	csiBlock := withMode(v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}, &block)
	csiBlockRO := csiBlock.DeepCopy()
	csiBlockRO.Spec.CSI.ReadOnly = true

	devicesPod := func(readOnly bool) *v1.Pod {
		pod := testPod()
		pod.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = readOnly
		pod.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}}
		return pod
	}
	mountsPod := testPod()
	mountsPod.Spec.InitContainers = []v1.Container{{Name: "init", VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}
	link := volume.DeviceLink(dir, "pod-uid", LocalPluginDir, "pv-block")

	tests := []struct {
		name    string
		pod     *v1.Pod
		pv      *v1.PersistentVolume
		want    volume.Mounted
		csi     int
		wantErr error
		errText string
	}{
		{name: "local device", pod: devicesPod(false), pv: localDev, want: volume.Mounted{HostPath: link, Device: true}},
		{name: "local device read-only claim", pod: devicesPod(true), pv: localDev, want: volume.Mounted{HostPath: link, ReadOnly: true, Device: true}},
		{name: "local path not a device", pod: devicesPod(false), pv: localDir, wantErr: ErrNotBlockDevice},
		{name: "block volume in volumeMounts", pod: mountsPod, pv: localDev, errText: "volume data has volumeMode Block, but is specified in volumeMounts"},
		{name: "filesystem volume in volumeDevices", pod: devicesPod(false), pv: localFS, errText: "volume data has volumeMode Filesystem, but is specified in volumeDevices"},
		{name: "hostPath block refused", pod: devicesPod(false), pv: hostPathDev, wantErr: volume.ErrUnsupported, errText: "hostPath"},
		{name: "csi block delegated", pod: devicesPod(false), pv: csiBlock, csi: 1, want: volume.Mounted{HostPath: "/csi-block/pv-block", Device: true}},
		{name: "csi block read-only PV", pod: devicesPod(false), pv: csiBlockRO, csi: 1, want: volume.Mounted{HostPath: "/csi-block/pv-block", ReadOnly: true, Device: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCSI{}
			p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(boundClaim("claim", "pv-block"), tc.pv, node)), nodeName), f, WithRootDir(dir))
			got, err := p.SetUp(context.Background(), tc.pod, &tc.pod.Spec.Volumes[0])
			if f.calls != tc.csi {
				t.Errorf("CSI publisher called %d times, want %d", f.calls, tc.csi)
			}
			if tc.wantErr == nil && tc.errText == "" {
				if err != nil {
					t.Fatalf("SetUp: %v", err)
				}
				if got != tc.want {
					t.Fatalf("SetUp = %+v, want %+v", got, tc.want)
				}
				if tc.pv.Spec.Local != nil {
					if target, err := os.Readlink(got.HostPath); err != nil || target != dev {
						t.Fatalf("link %s -> %q, %v; want %s", got.HostPath, target, err, dev)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("SetUp succeeded with %+v, want an error", got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("SetUp error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("SetUp error %q does not contain %q", err, tc.errText)
			}
		})
	}
}

// A link of an earlier set-up that points elsewhere (another PV once had
// the name) is replaced by the PV's own device.
func TestSetUpBlockReplacesLink(t *testing.T) {
	dev := blockDevice(t)
	dir := t.TempDir()
	block := v1.PersistentVolumeBlock
	pv := pvWith("pv-block", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}})
	pv.Spec.VolumeMode = &block
	pod := testPod()
	pod.Spec.Containers = []v1.Container{{Name: "c", VolumeDevices: []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}}}
	if _, err := volume.LinkDevice(dir, pod.UID, LocalPluginDir, "pv-block", "/etc/shadow"); err != nil {
		t.Fatal(err)
	}
	p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(boundClaim("claim", "pv-block"), pv)), nodeName), nil, WithRootDir(dir))
	got, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0])
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(got.HostPath); err != nil || target != dev {
		t.Fatalf("link -> %q, %v; want %s", target, err, dev)
	}
}

// What upstream's kubelet left at its global map path for a pod's local
// block volume (here a plain file) is removed at tear-down; another pod's
// entry stays.
func TestTearDownBlockReleasesUpstreamGlobalMap(t *testing.T) {
	root := t.TempDir()
	if _, err := volume.LinkDevice(root, "uid-1", LocalPluginDir, "pv-block", "/dev/loop9"); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "plugins", "kubernetes.io~local-volume", "volumeDevices", "pv-block")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"uid-1", "uid-2"} {
		if err := os.WriteFile(filepath.Join(dir, uid), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := New(nil, nil, WithRootDir(root))
	if err := p.TearDown(context.Background(), "uid-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "uid-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pod's entry is left: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "uid-2")); err != nil {
		t.Errorf("another pod's entry was removed: %v", err)
	}
}
