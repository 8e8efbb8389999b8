package runtime

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

func TestSandboxPidInfo(t *testing.T) {
	tests := []struct {
		name    string
		info    map[string]string
		want    int
		wantErr bool
	}{
		{"containerd", map[string]string{"info": `{"pid":1234,"processStatus":"running","netNamespaceClosed":false}`}, 1234, false},
		{"no info", nil, 0, false},
		{"no pid", map[string]string{"info": `{"image":"pause"}`}, 0, false},
		{"garbage", map[string]string{"info": `{`}, 0, true},
	}
	for _, tt := range tests {
		got, err := sandboxPid(tt.info)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("%s: sandboxPid = %d, %v; want %d, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestContainerStats(t *testing.T) {
	r, srv := newTestRuntime(t)
	ctx := context.Background()
	srv.AddImage(testImage)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"}}
	sb, err := r.RunPodSandbox(ctx, sandboxConfig(pod, 0, false), "")
	if err != nil {
		t.Fatal(err)
	}
	c := &v1.Container{Name: "c", Image: testImage}
	running, err := r.CreateContainer(ctx, sb, containerConfig(pod, c, 0, false), sandboxConfig(pod, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, running); err != nil {
		t.Fatal(err)
	}
	c2 := &v1.Container{Name: "created", Image: testImage}
	if _, err := r.CreateContainer(ctx, sb, containerConfig(pod, c2, 0, false), sandboxConfig(pod, 0, false)); err != nil {
		t.Fatal(err)
	}
	srv.SetContainerStats(running, fakecri.ContainerUsage{CPUUsageNanos: 7, MemoryWorkingSet: 8, WritableLayerBytes: 9, WritableLayerInodes: 10})
	srv.SetSandboxPid(sb, 4321)

	list, err := r.ListContainerStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("ListContainerStats = %d containers, want the running one", len(list))
	}
	s := list[0]
	if s.ID != running || s.CPUUsageNanos == nil || *s.CPUUsageNanos != 7 || s.MemoryWorkingSet == nil || *s.MemoryWorkingSet != 8 || s.Timestamp.IsZero() {
		t.Errorf("stats = %+v, want cpu 7, working set 8 of %s, stamped", s, running)
	}
	if w := s.WritableLayer; w == nil || *w.UsedBytes != 9 || *w.InodesUsed != 10 || w.Mountpoint != fakecri.ImageFsMountpoint {
		t.Errorf("writable layer = %+v, want 9 bytes, 10 inodes on %s", w, fakecri.ImageFsMountpoint)
	}

	fs, err := r.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Mountpoint != fakecri.ImageFsMountpoint || fs[0].UsedBytes == nil || *fs[0].UsedBytes == 0 {
		t.Errorf("ImageFsInfo = %+v, want the image filesystem with its usage", fs)
	}

	pid, err := r.SandboxPid(ctx, sb)
	if err != nil || pid != 4321 {
		t.Errorf("SandboxPid = %d, %v; want 4321", pid, err)
	}
	srv.InjectError("ListContainerStats", status.Error(codes.Internal, "boom"))
	if _, err := r.ListContainerStats(ctx); err == nil {
		t.Error("ListContainerStats succeeded while the runtime failed")
	}
	if _, err := r.SandboxPid(ctx, "missing"); err == nil {
		t.Error("SandboxPid of a missing sandbox succeeded")
	}
}
