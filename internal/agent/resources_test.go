package agent

import (
	"slices"
	"testing"

	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/volume"
)

// The node's handlers come in the order of podresources.ForNode; without
// cgroupsPerQOS there is no pod cgroup handler (a nil manager does not
// become a handler).
func TestNewPodResources(t *testing.T) {
	vols := volume.New(volume.Options{RootDir: t.TempDir()})
	got := newPodResources(nil, vols, t.TempDir(), t.TempDir(), nil).Names()
	want := []string{podresources.NameLogs, podresources.NameVolumes, podresources.NameContainerFiles}
	if !slices.Equal(got, want) {
		t.Errorf("handlers = %q, want %q", got, want)
	}
}
