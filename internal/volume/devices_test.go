package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// claimPlugin owns claim volumes and sets each up as its table says.
type claimPlugin struct{ mounted map[string]Mounted }

func (p *claimPlugin) Handles(v *v1.Volume) bool { return v.PersistentVolumeClaim != nil }
func (p *claimPlugin) SetUp(_ context.Context, _ *v1.Pod, v *v1.Volume) (Mounted, error) {
	return p.mounted[v.Name], nil
}
func (p *claimPlugin) Reconstruct(context.Context, *v1.Pod) error { return nil }
func (p *claimPlugin) TearDown(context.Context, types.UID) error  { return nil }

func claimVolume(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
}

func TestDevices(t *testing.T) {
	const link = "/var/lib/kubelet/pods/uid-1/volumeDevices/kubernetes.io~csi/pv"
	vols := []v1.Volume{
		claimVolume("block"), claimVolume("block-ro"), claimVolume("fs"),
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/dev"}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		csiVolume("inline"),
	}
	tests := []struct {
		name    string
		devices []v1.VolumeDevice
		want    []string // container path, host path, permissions
		wantErr error
		errText string
	}{
		{name: "block claim", devices: []v1.VolumeDevice{{Name: "block", DevicePath: "/dev/xvda"}}, want: []string{"/dev/xvda", link, "mrw"}},
		{name: "read-only block claim", devices: []v1.VolumeDevice{{Name: "block-ro", DevicePath: "/dev/xvdb"}}, want: []string{"/dev/xvdb", link + "-ro", "r"}},
		{name: "filesystem claim", devices: []v1.VolumeDevice{{Name: "fs", DevicePath: "/dev/xvda"}}, errText: "volume fs has volumeMode Filesystem, but is specified in volumeDevices"},
		// A pod must never choose the host side of a device.
		{name: "hostPath refused", devices: []v1.VolumeDevice{{Name: "host", DevicePath: "/dev/sda"}}, wantErr: ErrUnsupported, errText: "hostPath"},
		{name: "emptyDir refused", devices: []v1.VolumeDevice{{Name: "scratch", DevicePath: "/dev/sda"}}, wantErr: ErrUnsupported, errText: "emptyDir"},
		{name: "plugin volume that is no claim refused", devices: []v1.VolumeDevice{{Name: "inline", DevicePath: "/dev/sda"}}, wantErr: ErrUnsupported},
		{name: "relative device path", devices: []v1.VolumeDevice{{Name: "block", DevicePath: "dev/xvda"}}, errText: "absolute"},
		{name: "device path with ..", devices: []v1.VolumeDevice{{Name: "block", DevicePath: "/dev/../etc/xvda"}}, errText: "'..'"},
		{name: "unknown volume", devices: []v1.VolumeDevice{{Name: "nope", DevicePath: "/dev/xvda"}}, errText: "cannot find volume"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.m.opts.Plugins = []Plugin{
				&claimPlugin{mounted: map[string]Mounted{
					"block":    {HostPath: link, Device: true},
					"block-ro": {HostPath: link + "-ro", ReadOnly: true, Device: true},
					"fs":       {HostPath: t.TempDir()},
				}},
				&fakePlugin{mounted: Mounted{HostPath: "/dev/sda", Device: true}},
			}
			pod := newPod("uid-1", vols...)
			pod.Spec.Containers[0].VolumeDevices = tc.devices
			if err := e.m.Prepare(context.Background(), pod); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			got, err := e.m.Devices(context.Background(), pod, &pod.Spec.Containers[0])
			if tc.want != nil {
				if err != nil {
					t.Fatalf("Devices: %v", err)
				}
				if len(got) != 1 || got[0].ContainerPath != tc.want[0] || got[0].HostPath != tc.want[1] || got[0].Permissions != tc.want[2] {
					t.Fatalf("Devices = %v, want %v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Devices = %v, want an error", got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Devices error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("Devices error %q does not contain %q", err, tc.errText)
			}
		})
	}
}

// A raw block volume is never mounted, and gets no fsGroup ownership.
func TestDeviceNotMounted(t *testing.T) {
	e := newEnv(t, true)
	dir := t.TempDir()
	e.m.opts.Plugins = []Plugin{&claimPlugin{mounted: map[string]Mounted{"block": {HostPath: dir, Device: true, Ownership: true}}}}
	pod := newPod("uid-1", claimVolume("block"))
	gid := int64(4242)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "block", MountPath: "/data"}}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	_, err := e.m.Mounts(context.Background(), pod, &pod.Spec.Containers[0])
	if err == nil || !strings.Contains(err.Error(), "volume block has volumeMode Block, but is specified in volumeMounts") {
		t.Fatalf("Mounts of a block volume: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetgid != 0 {
		t.Errorf("the fsGroup was applied to a raw block volume")
	}
}

func TestLinkDevice(t *testing.T) {
	root := t.TempDir()
	link, err := LinkDevice(root, "uid-1", "kubernetes.io~csi", "pv", "/dev/loop7")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "pods", "uid-1", "volumeDevices", "kubernetes.io~csi", "pv"); link != want {
		t.Fatalf("link %s, want %s", link, want)
	}
	// Idempotent, and it follows a new target.
	for _, target := range []string{"/dev/loop7", "/dev/loop8"} {
		if _, err := LinkDevice(root, "uid-1", "kubernetes.io~csi", "pv", target); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.Readlink(link); got != target {
			t.Fatalf("link -> %s, want %s", got, target)
		}
	}
	names, err := DeviceLinks(root, "uid-1", "kubernetes.io~csi")
	if err != nil || len(names) != 1 || names[0] != "pv" {
		t.Fatalf("DeviceLinks = %v, %v", names, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b"} {
		if _, err := LinkDevice(root, "uid-1", "kubernetes.io~csi", bad, "/dev/loop7"); err == nil {
			t.Errorf("LinkDevice accepted the name %q", bad)
		}
	}
	if _, err := LinkDevice(root, "../x", "kubernetes.io~csi", "pv", "/dev/loop7"); err == nil {
		t.Error("LinkDevice accepted the pod UID ../x")
	}
}

func TestReleaseGlobalMap(t *testing.T) {
	dir := t.TempDir()
	sys := filepath.Join(dir, "sys")
	path := filepath.Join(dir, "volumeDevices", "pv", "uid-1")
	other := filepath.Join(dir, "volumeDevices", "pv", "uid-2")
	for _, p := range []string{path, other} {
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	backing := map[string]string{"loop3": path + "\n", "loop4": other + "\n", "loop5": path + " (deleted)\n"}
	for loop, file := range backing {
		if err := os.MkdirAll(filepath.Join(sys, loop, "loop"), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, loop, "loop", "backing_file"), []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var detached, unmounted []string
	ops := globalMapOps{
		sysBlock: sys,
		detach:   func(dev string) error { detached = append(detached, dev); return nil },
		unmount:  func(p string) error { unmounted = append(unmounted, p); return nil },
	}
	if err := ops.release(path); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(detached, []string{"/dev/loop3", "/dev/loop5"}) || !slices.Equal(unmounted, []string{path}) {
		t.Fatalf("detached %v, unmounted %v; want loop3 and loop5 (the pod's), and %s", detached, unmounted, path)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left: %v", path, err)
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("another pod's entry was removed: %v", err)
	}
	// Nothing there: nothing to do.
	detached, unmounted = nil, nil
	if err := ops.release(path); err != nil || len(detached)+len(unmounted) != 0 {
		t.Fatalf("release of nothing: %v, detached %v, unmounted %v", err, detached, unmounted)
	}
	// A failure is reported and keeps the entry.
	ops.unmount = func(string) error { return errors.New("busy") }
	if err := ops.release(other); err == nil {
		t.Fatal("release succeeded with a failing unmount")
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("the entry was removed despite the failure: %v", err)
	}
}
