package agent

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/userns"
	"github.com/heartlet/heartlet/internal/volume"
)

// The node's handlers come in the order of podresources.ForNode; without
// cgroupsPerQOS there is no pod cgroup handler (a nil manager does not
// become a handler); the user namespace IDs come after the volumes, whose
// pod directory holds their record.
func TestNewPodResources(t *testing.T) {
	root := t.TempDir()
	vols := volume.New(volume.Options{RootDir: root})
	got := newPodResources(nil, vols, nil, t.TempDir(), root, nil).Names()
	want := []string{podresources.NameLogs, podresources.NameVolumes, podresources.NameContainerFiles}
	if !slices.Equal(got, want) {
		t.Errorf("handlers = %q, want %q", got, want)
	}
	uns, err := userns.New(userns.Config{PodsDir: filepath.Join(root, "pods"), Range: userns.DefaultRange})
	if err != nil {
		t.Fatal(err)
	}
	got = newPodResources(nil, vols, uns, t.TempDir(), root, nil).Names()
	want = []string{podresources.NameLogs, podresources.NameVolumes, userns.NameUserNamespace, podresources.NameContainerFiles}
	if !slices.Equal(got, want) {
		t.Errorf("handlers with user namespaces = %q, want %q", got, want)
	}
}
