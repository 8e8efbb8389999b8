package podsync

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

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
