package runtime

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
)

func TestUpdateContainerResources(t *testing.T) {
	r, _ := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod("web", "uid-resize")
	sbCfg := sandboxConfig(pod, 0, false)
	sbID, err := r.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PullImage(ctx, testImage, nil, sbCfg); err != nil {
		t.Fatal(err)
	}
	cCfg := containerConfig(pod, &pod.Spec.Containers[0], 0, false)
	cCfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, CpuQuota: 20000, MemoryLimitInBytes: 64 << 20}}
	id, err := r.CreateContainer(ctx, sbID, cCfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	resources := func() *runtimeapi.LinuxContainerResources {
		t.Helper()
		ps, err := r.GetPodStatus(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps.Containers) != 1 {
			t.Fatalf("%d containers, want 1", len(ps.Containers))
		}
		return ps.Containers[0].Resources
	}
	if got := resources(); got.GetMemoryLimitInBytes() != 64<<20 || got.GetCpuQuota() != 20000 {
		t.Fatalf("resources before = %v", got)
	}

	update := snapshot(t, opUpdateContainer)
	want := &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 128 << 20}
	if err := r.UpdateContainerResources(ctx, id, want); err != nil {
		t.Fatalf("UpdateContainerResources: %v", err)
	}
	update.check(t, 1, 0)
	if got := resources(); !proto.Equal(got, want) {
		t.Errorf("resources after = %v, want %v", got, want)
	}

	update = snapshot(t, opUpdateContainer)
	err = r.UpdateContainerResources(ctx, "missing", want)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("UpdateContainerResources of a missing container = %v, want ErrNotFound", err)
	}
	update.check(t, 1, 1)
}
