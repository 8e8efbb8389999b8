package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/config"
)

// fakePodDirs are pod directories; Cleanup records what it removes.
type fakePodDirs struct {
	uids    []types.UID
	err     error
	removed []types.UID
}

func (f *fakePodDirs) PodDirs() ([]types.UID, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.uids, nil
}
func (f *fakePodDirs) Cleanup(_ context.Context, uid types.UID) error {
	f.removed = append(f.removed, uid)
	return nil
}

// fakePodCgroups are pod cgroups; RemovePod fails for busy ones.
type fakePodCgroups struct {
	uids    []types.UID
	err     error
	busy    map[types.UID]bool
	removed []types.UID
}

func (f *fakePodCgroups) ListPods(context.Context) ([]types.UID, error) { return f.uids, f.err }
func (f *fakePodCgroups) RemovePod(_ context.Context, uid types.UID) error {
	if f.busy[uid] {
		return errors.New("busy")
	}
	f.removed = append(f.removed, uid)
	return nil
}

func TestPodResources(t *testing.T) {
	ctx := t.Context()
	dirs := &fakePodDirs{uids: []types.UID{"a", "b"}}
	cgs := &fakePodCgroups{uids: []types.UID{"b", "c"}, busy: map[types.UID]bool{"c": true}}
	r := &podResources{dirs: dirs, cgroups: cgs}
	uids, err := r.PodsWithResources(ctx)
	if err != nil || !slices.Equal(uids, []types.UID{"a", "b", "c"}) {
		t.Fatalf("PodsWithResources = %v, %v; want [a b c] (each once)", uids, err)
	}
	for _, uid := range uids {
		err := r.CleanupPod(ctx, uid)
		if (err != nil) != (uid == "c") {
			t.Errorf("CleanupPod(%s) = %v", uid, err)
		}
	}
	if !slices.Equal(dirs.removed, []types.UID{"a", "b", "c"}) || !slices.Equal(cgs.removed, []types.UID{"a", "b"}) {
		t.Errorf("removed dirs %v cgroups %v", dirs.removed, cgs.removed)
	}

	// One kind cannot be listed: the other is still listed.
	dirs.err = errors.New("unreadable")
	uids, err = r.PodsWithResources(ctx)
	if err == nil || !errors.Is(err, dirs.err) || !slices.Equal(uids, []types.UID{"b", "c"}) {
		t.Errorf("with a dirs error PodsWithResources = %v, %v; want [b c] and the error", uids, err)
	}

	// Without cgroupsPerQOS only directories are cleaned.
	if r := newPodResources(dirs, nil); r.cgroups != nil {
		t.Errorf("nil cgroup manager became a non-nil interface")
	}
}

// Run checks the host before it touches the node: with a missing static
// pod directory it fails naming the setting and creates no root directory.
func TestRunChecksHostFirst(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	a, err := New(&config.Options{
		Config:  &kubeletv1beta1.KubeletConfiguration{StaticPodPath: filepath.Join(dir, "missing")},
		RootDir: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(t.Context())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "staticPodPath") {
		t.Fatalf("Run = %v, want the missing static pod path", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("root directory made before the host checks passed: %v", err)
	}
}
