package runtime

import (
	"context"
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetPodStatus reports a container's bind mounts as the runtime keeps
// them: heartlet finds a termination message file again through them.
func TestGetPodStatusMounts(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	pod := testPod("web", "uid-web")
	sb := w.sandbox(t, pod, 0, false)
	cfg := containerConfig(pod, &pod.Spec.Containers[0], 0, false)
	cfg.Mounts = []*runtimeapi.Mount{
		{HostPath: "/var/lib/kubelet/pods/uid-web/volumes/x", ContainerPath: "/data"},
		{HostPath: "/var/lib/kubelet/pods/uid-web/containers/main/0a1b2c3d", ContainerPath: "/dev/termination-log"},
	}
	if _, err := w.r.CreateContainer(ctx, sb, cfg, nil); err != nil {
		t.Fatal(err)
	}
	ps, err := w.r.GetPodStatus(ctx, "uid-web")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(ps.Containers))
	}
	want := []Mount{
		{HostPath: "/var/lib/kubelet/pods/uid-web/volumes/x", ContainerPath: "/data"},
		{HostPath: "/var/lib/kubelet/pods/uid-web/containers/main/0a1b2c3d", ContainerPath: "/dev/termination-log"},
	}
	if got := ps.Containers[0].Mounts; !reflect.DeepEqual(got, want) {
		t.Errorf("mounts = %+v, want %+v", got, want)
	}
}
