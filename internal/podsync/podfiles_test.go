package podsync

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/podworker"
)

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

// The log directory handler creates <ns>_<name>_<uid> and removes by UID
// alone exactly that pod's directory, whatever its name.
func TestLogDirHandler(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	h := LogDir(root)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u"}}
	if err := h.Prepare(ctx, pod); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, "ns_web_u")
	if !exists(own) {
		t.Fatal("Prepare made no log directory")
	}
	if err := h.Reconstruct(ctx, pod); err != nil {
		t.Fatal(err)
	}
	others := []string{"ns_web_uu", "ns_web_au", "ns_u", "x_y_z_u"}
	for _, o := range others {
		mkdirs(t, filepath.Join(root, o))
	}
	renamed := filepath.Join(root, "other_name_u") // found by UID, not name
	mkdirs(t, renamed)
	for range 2 {
		if err := h.Cleanup(ctx, "u"); err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
	}
	if exists(own) || exists(renamed) {
		t.Error("the pod's log directories are still there")
	}
	for _, o := range others {
		if !exists(filepath.Join(root, o)) {
			t.Errorf("another pod's directory %s was removed", o)
		}
	}
	for _, bad := range []types.UID{"", ".", "..", "../x"} {
		if err := h.Cleanup(ctx, bad); err == nil {
			t.Errorf("Cleanup(%q) succeeded", bad)
		}
	}
	if err := LogDir(filepath.Join(root, "missing")).Cleanup(ctx, "u"); err != nil {
		t.Errorf("Cleanup without a log root: %v", err)
	}
}

// The container files handler removes the termination message files and
// the hosts file, and the pod directory only once nothing else is in it.
func TestContainerFilesHandler(t *testing.T) {
	ctx := t.Context()
	if ContainerFiles("") != nil {
		t.Fatal("a handler without a root directory")
	}
	root := t.TempDir()
	h := ContainerFiles(root)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	if err := errors.Join(h.Prepare(ctx, pod), h.Reconstruct(ctx, pod)); err != nil {
		t.Fatal(err)
	}
	podDir := filepath.Join(root, "pods", "u")
	if exists(podDir) {
		t.Fatal("Prepare or Reconstruct made the pod directory")
	}
	write := func(withVolume bool) {
		mkdirs(t, filepath.Join(podDir, "containers", "app"))
		if err := os.WriteFile(filepath.Join(podDir, "containers", "app", "msg"), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(podDir, hostsFileName), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if withVolume {
			mkdirs(t, filepath.Join(podDir, "volumes"))
		}
	}
	write(true)
	if err := h.Cleanup(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(podDir, "containers")) || exists(filepath.Join(podDir, hostsFileName)) {
		t.Error("container files left")
	}
	if !exists(filepath.Join(podDir, "volumes")) {
		t.Error("the volumes went with the container files")
	}
	os.RemoveAll(filepath.Join(podDir, "volumes"))
	write(false)
	for range 2 {
		if err := h.Cleanup(ctx, "u"); err != nil {
			t.Fatal(err)
		}
	}
	if exists(podDir) {
		t.Error("empty pod directory left")
	}
	if err := h.Cleanup(ctx, "../u"); err == nil {
		t.Error("Cleanup of a UID with a slash succeeded")
	}
}

// recordingHandler records the syncer's calls of the resource Set.
type recordingHandler struct {
	calls      []string
	prepareErr error
}

func (r *recordingHandler) Name() string { return "recorded" }
func (r *recordingHandler) Prepare(_ context.Context, pod *v1.Pod) error {
	r.calls = append(r.calls, "prepare")
	return r.prepareErr
}
func (r *recordingHandler) Reconstruct(context.Context, *v1.Pod) error {
	r.calls = append(r.calls, "reconstruct")
	return nil
}
func (r *recordingHandler) Release(context.Context, *v1.Pod) error {
	r.calls = append(r.calls, "release")
	return nil
}
func (r *recordingHandler) Cleanup(context.Context, types.UID) error {
	r.calls = append(r.calls, "cleanup")
	return nil
}

// The syncer's one path through the pod's resources: prepared before the
// sandbox, adopted when a running pod is stopped, released once it has
// terminated (its logs stay), all removed with the pod.
func TestSyncerResourcePath(t *testing.T) {
	h, ev := lifecycleHarness(t)
	rec := &recordingHandler{}
	o := &h.syncer.opts
	o.Resources = podresources.New(LogDir(o.PodLogsDir), rec, ContainerFiles(o.RootDir))
	pod := hookPod(v1.RestartPolicyAlways, 1, nil)
	logs := podLogDir(o.PodLogsDir, pod)

	rec.prepareErr = errors.New("no cgroup")
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, pod); !errors.Is(err, rec.prepareErr) {
		t.Fatalf("SyncPod = %v, want the handler's error", err)
	}
	if len(h.fake.Sandboxes()) != 0 {
		t.Fatal("a sandbox was created although a resource could not be prepared")
	}
	if got := ev.withReason("FailedMount"); len(got) != 0 {
		t.Errorf("FailedMount events for a non-volume handler: %q", got)
	}
	rec.prepareErr = nil
	h.sync(pod)
	if !exists(logs) || len(h.fake.Sandboxes()) != 1 {
		t.Fatal("pod not started with its log directory")
	}
	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.syncer.SyncTerminatedPod(h.ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !exists(logs) {
		t.Error("the logs of a terminated pod went before its removal")
	}
	if err := h.syncer.RemovePod(h.ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if exists(logs) || exists(filepath.Join(o.RootDir, "pods", string(pod.UID))) {
		t.Error("log directory or pod directory left after RemovePod")
	}
	want := []string{"prepare", "prepare", "reconstruct", "release", "cleanup"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls %q, want %q", rec.calls, want)
	}
}
