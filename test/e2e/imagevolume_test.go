//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// imageVolumePod mounts the test busybox image as an image volume: whole
// at /img and its bin directory (subPath) at /imgbin, and logs what the
// container sees: a file of the image, the same through the subPath, and
// whether it can write to the volume.
func imageVolumePod(t *testing.T, name string) string {
	return manifest(t, name, func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "img", VolumeSource: v1.VolumeSource{
			Image: &v1.ImageVolumeSource{Reference: busyboxImage, PullPolicy: v1.PullIfNotPresent}}}}
		c := shContainer("app", `test -f /img/bin/busybox && echo "whole ok"; test -f /imgbin/busybox && echo "sub ok"; `+
			`test -e /imgbin/bin && echo "sub wrong"; if touch /img/written 2>/dev/null; then echo "write ok"; else echo "write refused"; fi; `+
			`echo "done"; `+sleeper)
		c.VolumeMounts = []v1.VolumeMount{
			{Name: "img", MountPath: "/img"},
			{Name: "img", MountPath: "/imgbin", SubPath: "bin"},
		}
		p.Spec.Containers = []v1.Container{c}
	})
}

// TestImageVolume runs a pod with an image volume on a containerd 2.x,
// which mounts OCI images (upstream's e2e_node image volume tests): the
// container reads a file of the image, sees a directory of it through a
// subPath, and cannot write to it.
func TestImageVolume(t *testing.T) {
	c := startContainerd2(t)
	h := newHeartlet(t, "")
	t.Cleanup(h.cleanup)
	h.startOn(c)
	h.addPod(t, "imgvol.yaml", "imgvol", imageVolumePod(t, "imgvol"))
	pod := h.waitRunning(t, "imgvol")
	logPath := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "app", "0.log")
	var lines string
	waitFor(t, 30*time.Second, pod.Name+"'s output", func() (bool, string) {
		b, err := os.ReadFile(logPath)
		lines = string(b)
		return err == nil && strings.Contains(lines, "done"), lines
	})
	t.Logf("the container logged: %q", lines)
	for _, want := range []string{"whole ok", "sub ok", "write refused"} {
		if !strings.Contains(lines, want) {
			t.Errorf("the container logged %q, want %q", lines, want)
		}
	}
	for _, bad := range []string{"sub wrong", "write ok"} {
		if strings.Contains(lines, bad) {
			t.Errorf("the container logged %q: %q", lines, bad)
		}
	}
}

// TestImageVolumeRefusedOnContainerd16 checks that on the environment's
// containerd 1.6, which would ignore the CRI image mount and give the
// container an empty directory, the pod is refused with a message naming
// the volume and what the runtime lacks.
func TestImageVolumeRefusedOnContainerd16(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "imgvol16.yaml", "imgvol16", imageVolumePod(t, "imgvol16"))
	p := h.waitPod(t, "imgvol16", podStartTimeout, "to be refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "UnsupportedPodField" || !strings.Contains(p.Status.Message, "spec.volumes[img].image") ||
		!strings.Contains(p.Status.Message, "containerd 2.1") {
		t.Errorf("status %q: %q, want UnsupportedPodField naming spec.volumes[img].image and the runtime it needs", p.Status.Reason, p.Status.Message)
	}
	t.Logf("refused: %s: %s", p.Status.Reason, p.Status.Message)
}
