package podresources

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// fakeCgroups records the cgroup manager calls.
type fakeCgroups struct {
	calls   []string
	listed  []types.UID
	listErr error
	busy    bool
}

func (f *fakeCgroups) EnsurePod(_ context.Context, pod *v1.Pod) error {
	f.calls = append(f.calls, "ensure "+string(pod.UID))
	return nil
}
func (f *fakeCgroups) AdoptPod(_ context.Context, pod *v1.Pod) error {
	f.calls = append(f.calls, "adopt "+string(pod.UID))
	return nil
}
func (f *fakeCgroups) RemovePod(_ context.Context, uid types.UID) error {
	f.calls = append(f.calls, "remove "+string(uid))
	if f.busy {
		return errors.New("busy")
	}
	return nil
}
func (f *fakeCgroups) ListPods(context.Context) ([]types.UID, error) {
	return f.listed, f.listErr
}

func TestPodCgroupHandler(t *testing.T) {
	ctx := t.Context()
	if PodCgroup(nil) != nil {
		t.Fatal("a nil manager gave a handler")
	}
	cg := &fakeCgroups{listed: []types.UID{"a"}}
	h := PodCgroup(cg)
	pod := testPod("u")
	if err := h.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconstruct(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.(Releaser).Release(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.Cleanup(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	// Reconstruct adopts: it neither creates nor removes a cgroup.
	if want := []string{"ensure u", "adopt u", "remove u", "remove u"}; !slices.Equal(cg.calls, want) {
		t.Errorf("calls %q, want %q", cg.calls, want)
	}
	if uids, err := h.(Lister).List(ctx); err != nil || !slices.Equal(uids, []types.UID{"a"}) {
		t.Errorf("List = %v, %v", uids, err)
	}
	cg.busy = true
	if err := h.Cleanup(ctx, "u"); err == nil {
		t.Error("Cleanup of a busy cgroup succeeded")
	}
}

// fakeVolumeManager records the volume manager calls.
type fakeVolumeManager struct {
	calls []string
	dirs  []types.UID
	err   error
}

func (f *fakeVolumeManager) Prepare(_ context.Context, pod *v1.Pod) error {
	f.calls = append(f.calls, "prepare "+string(pod.UID))
	return f.err
}
func (f *fakeVolumeManager) Adopt(_ context.Context, pod *v1.Pod) error {
	f.calls = append(f.calls, "adopt "+string(pod.UID))
	return nil
}
func (f *fakeVolumeManager) Cleanup(_ context.Context, uid types.UID) error {
	f.calls = append(f.calls, "cleanup "+string(uid))
	return f.err
}
func (f *fakeVolumeManager) PodDirs() ([]types.UID, error) { return f.dirs, nil }

func TestVolumesHandler(t *testing.T) {
	ctx := t.Context()
	if Volumes(nil) != nil {
		t.Fatal("a nil manager gave a handler")
	}
	vm := &fakeVolumeManager{dirs: []types.UID{"d"}}
	h := Volumes(vm)

	// A pod without volumes has nothing to prepare or adopt.
	bare := testPod("bare")
	if err := errors.Join(h.Prepare(ctx, bare), h.Reconstruct(ctx, bare)); err != nil || len(vm.calls) != 0 {
		t.Fatalf("pod without volumes: %v, calls %q", err, vm.calls)
	}

	pod := testPod("u")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	if err := h.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconstruct(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := h.(Releaser).Release(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// Cleanup goes to the manager even for a pod without volumes: its pod
	// directory may exist.
	if err := h.Cleanup(ctx, "bare"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"prepare u", "adopt u", "cleanup u", "cleanup bare"}; !slices.Equal(vm.calls, want) {
		t.Errorf("calls %q, want %q", vm.calls, want)
	}
	if uids, err := h.(Lister).List(ctx); err != nil || !slices.Equal(uids, []types.UID{"d"}) {
		t.Errorf("List = %v, %v", uids, err)
	}
	vm.err = errors.New("still mounted")
	if err := h.Prepare(ctx, pod); !errors.Is(err, vm.err) {
		t.Errorf("Prepare = %v, want the manager's error", err)
	}
}
