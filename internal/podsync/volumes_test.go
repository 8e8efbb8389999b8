package podsync

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/volume"
)

// A hostPath volume of the wrong type is a FailedMount event with the type
// check's message, and no container starts, as for other volume errors.
func TestHostPathTypeMismatchIsFailedMount(t *testing.T) {
	h, ev := lifecycleHarness(t)
	h.useVolumes(volume.New(volume.Options{RootDir: h.syncer.opts.RootDir}))
	file := filepath.Join(t.TempDir(), "not-a-socket")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	socket := v1.HostPathSocket
	pod := hookPod(v1.RestartPolicyAlways, 30, nil)
	pod.Spec.Volumes = []v1.Volume{{Name: "sock", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: file, Type: &socket}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "sock", MountPath: "/run/app.sock"}}
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod); err == nil {
		t.Fatal("SyncPod succeeded with a hostPath of the wrong type")
	}
	want := `FailedMount: MountVolume.SetUp failed for volume "sock" : hostPath type check failed: ` + file + ` is not a socket file, it's a File`
	if got := ev.withReason("FailedMount"); len(got) != 1 || got[0] != want {
		t.Errorf("FailedMount events %q, want %q", got, want)
	}
	if cs := h.containers("app"); len(cs) != 0 {
		t.Errorf("containers created despite the failed mount: %+v", cs)
	}
}

// attachPlugin is a volume plugin whose volumes are never attached.
type attachPlugin struct{}

type notAttached struct{}

func (notAttached) Error() string       { return `volume "pv-1": VolumeAttachment csi-x not attached yet` }
func (notAttached) EventReason() string { return "FailedAttachVolume" }

func (attachPlugin) Handles(v *v1.Volume) bool { return v.CSI != nil }
func (attachPlugin) SetUp(context.Context, *v1.Pod, *v1.Volume) (volume.Mounted, error) {
	return volume.Mounted{}, notAttached{}
}
func (attachPlugin) Reconstruct(context.Context, *v1.Pod) error { return nil }
func (attachPlugin) TearDown(context.Context, types.UID) error  { return nil }

// A volume error that names its own reason (a volume not attached yet) is
// reported with it instead of FailedMount, as upstream's
// FailedAttachVolume.
func TestVolumeErrorReason(t *testing.T) {
	h, ev := lifecycleHarness(t)
	h.useVolumes(volume.New(volume.Options{RootDir: h.syncer.opts.RootDir, Plugins: []volume.Plugin{attachPlugin{}}}))
	pod := hookPod(v1.RestartPolicyAlways, 30, nil)
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}}}
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod); err == nil {
		t.Fatal("SyncPod succeeded with an unattached volume")
	}
	if got := ev.withReason("FailedAttachVolume"); len(got) != 1 || !strings.Contains(got[0], "not attached yet") {
		t.Errorf("FailedAttachVolume events %q", got)
	}
	if got := ev.withReason("FailedMount"); len(got) != 0 {
		t.Errorf("FailedMount events %q for an attach error", got)
	}
}
