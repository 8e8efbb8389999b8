package logrotate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/runtime"
)

type fakeRuntime struct {
	pod       *runtime.PodStatus
	reopenErr error
	reopened  []string
}

func (f *fakeRuntime) ListPods(context.Context) ([]*runtime.PodStatus, error) {
	return []*runtime.PodStatus{f.pod}, nil
}
func (f *fakeRuntime) GetPodStatus(context.Context, types.UID) (*runtime.PodStatus, error) {
	return f.pod, nil
}
func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	if f.reopenErr != nil {
		return f.reopenErr
	}
	f.reopened = append(f.reopened, id)
	c := f.pod.Containers[0]
	return os.WriteFile(c.LogPath, nil, 0o644)
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestRotate follows upstream pkg/kubelet/logs container_log_manager.go:
// at most MaxFiles files, the newest rotated one plain, older ones .gz.
func TestRotate(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{pod: &runtime.PodStatus{UID: "u", Name: "p", Namespace: "ns",
		Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "c", State: runtime.ContainerRunning, LogPath: log}}}}
	clk := testclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := New(rt, Options{MaxSize: 10, MaxFiles: 3, MaxWorkers: 2, Interval: 3 * time.Second, Clock: clk})
	ctx := context.Background()
	for i := range 5 {
		if err := os.WriteFile(log, []byte(strings.Repeat("x", 20)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.RotateAll(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Step(3 * time.Second)
		got := files(t, dir)
		if len(got) > 3 {
			t.Fatalf("pass %d: %d files %v, want <= 3", i, len(got), got)
		}
	}
	got := files(t, dir)
	// With MaxFiles 3 upstream keeps one rotated file, which stays plain.
	want := []string{"0.log", "0.log.20260102-030414", "0.log.20260102-030417"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files %v, want %v", got, want)
	}
	if len(rt.reopened) != 5 {
		t.Errorf("reopened %d times, want 5", len(rt.reopened))
	}
	// Under the limit: nothing happens.
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rt.reopened) != 5 {
		t.Errorf("small log rotated")
	}
}

// TestReopenFailsRenamesBack: upstream renames the rotated file back.
func TestReopenFailsRenamesBack(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{reopenErr: errors.New("boom"), pod: &runtime.PodStatus{UID: "u",
		Containers: []*runtime.ContainerStatus{{ID: "c1", State: runtime.ContainerRunning, LogPath: log}}}}
	m := New(rt, Options{MaxSize: 1, MaxFiles: 2, Clock: testclock.NewFakeClock(time.Unix(0, 0))})
	if err := os.WriteFile(log, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 1 || got[0] != "0.log" {
		t.Errorf("files %v, want [0.log]", got)
	}
}
