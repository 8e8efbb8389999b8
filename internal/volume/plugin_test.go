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

// fakePlugin owns CSI volumes and records its calls.
type fakePlugin struct {
	mounted  Mounted
	setUpErr error
	calls    []string
	// onTearDown runs in TearDown (to look at the mount table then).
	onTearDown func()
}

func (p *fakePlugin) Handles(v *v1.Volume) bool { return v.CSI != nil }

func (p *fakePlugin) SetUp(_ context.Context, pod *v1.Pod, v *v1.Volume) (Mounted, error) {
	p.calls = append(p.calls, "setup "+v.Name)
	return p.mounted, p.setUpErr
}

func (p *fakePlugin) Reconstruct(_ context.Context, pod *v1.Pod) error {
	p.calls = append(p.calls, "reconstruct "+string(pod.UID))
	return nil
}

func (p *fakePlugin) TearDown(_ context.Context, uid types.UID) error {
	p.calls = append(p.calls, "teardown "+string(uid))
	if p.onTearDown != nil {
		p.onTearDown()
	}
	return nil
}

func csiVolume(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}}
}

func TestPluginVolumes(t *testing.T) {
	e := newEnv(t, true)
	target := filepath.Join(t.TempDir(), "published")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	fp := &fakePlugin{mounted: Mounted{HostPath: target, Ownership: true}}
	e.m.opts.Plugins = []Plugin{fp}
	pod := newPod("uid-1", csiVolume("data"), v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}})
	gid := int64(os.Getgid())
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}

	err := e.m.Prepare(context.Background(), pod)
	// The volume no plugin owns is still refused.
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Prepare: %v, want ErrUnsupported for the nfs volume", err)
	}
	var ve *VolumeError
	if !errors.As(err, &ve) || ve.Volume != "nfs" {
		t.Fatalf("Prepare error %v does not name the nfs volume alone", err)
	}
	mounts, err := e.m.Mounts(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatalf("Mounts: %v", err)
	}
	if len(mounts) != 1 || mounts[0].HostPath != target || mounts[0].Readonly {
		t.Fatalf("Mounts = %v, want %s read-write", mounts, target)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetgid == 0 {
		t.Errorf("fsGroup ownership not applied to the plugin's volume: mode %v", fi.Mode())
	}

	// Cleanup tears the plugin's volumes down before it unmounts what is
	// left: the plugin sees its mount still there.
	podDir := e.m.PodDir(pod.UID)
	leftover := filepath.Join(podDir, "volumes", "kubernetes.io~csi", "data", "mount")
	if err := os.MkdirAll(leftover, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := e.mounter.Mount("src", leftover, "ext4", nil); err != nil {
		t.Fatal(err)
	}
	sawMount := false
	fp.onTearDown = func() { sawMount = !slices.Contains(e.mounter.unmounted, leftover) }
	if err := e.m.Cleanup(context.Background(), pod.UID); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if !sawMount {
		t.Error("the pod directory's mounts were unmounted before the plugin's TearDown")
	}
	if !slices.Contains(fp.calls, "teardown uid-1") {
		t.Errorf("plugin calls %v, want a teardown", fp.calls)
	}
}

func TestPluginMountsBeforeSetUp(t *testing.T) {
	e := newEnv(t, true)
	fp := &fakePlugin{setUpErr: errors.New("driver not registered")}
	e.m.opts.Plugins = []Plugin{fp}
	pod := newPod("uid-2", csiVolume("data"))
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if err := e.m.Prepare(context.Background(), pod); err == nil {
		t.Fatal("Prepare succeeded with a failing plugin")
	}
	if _, err := e.m.Mounts(context.Background(), pod, &pod.Spec.Containers[0]); err == nil {
		t.Fatal("Mounts gave a path for a volume its plugin did not set up")
	}
}

func TestPluginReconstructOnAdopt(t *testing.T) {
	e := newEnv(t, true)
	fp := &fakePlugin{}
	e.m.opts.Plugins = []Plugin{fp}
	pod := newPod("uid-3", csiVolume("data"))
	if err := os.MkdirAll(e.m.PodDir(pod.UID), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Adopt(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fp.calls, []string{"reconstruct uid-3"}) {
		t.Fatalf("plugin calls %v, want one reconstruct", fp.calls)
	}
}

// A subPath of a plugin's volume is opened beneath the volume and bound
// like any other; one that climbs out is refused.
func TestPluginVolumeSubPath(t *testing.T) {
	e := newEnv(t, true)
	vol := filepath.Join(t.TempDir(), "published")
	if err := os.MkdirAll(filepath.Join(vol, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.m.opts.Plugins = []Plugin{&fakePlugin{mounted: Mounted{HostPath: vol}}}
	pod := newPod("uid-4", csiVolume("data"))
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/var/lib/db", SubPath: "db"}}
	if err := e.m.Prepare(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Mounts(context.Background(), pod, c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got[0].HostPath, "volume-subpaths") || !strings.HasSuffix(e.mounter.bound(got[0].HostPath), "/published/db") {
		t.Errorf("subPath mount %s bound from %s", got[0].HostPath, e.mounter.bound(got[0].HostPath))
	}
	c.VolumeMounts[0].SubPath = "../../etc"
	if _, err := e.m.Mounts(context.Background(), pod, c); !errors.Is(err, ErrInvalidSubPath) {
		t.Errorf("a subPath climbing out of the plugin's volume: %v, want ErrInvalidSubPath", err)
	}
}
