package images_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/images"
)

// An image an image volume of a pod mounts is in use: no container of the
// runtime names it, yet neither a pass above the high threshold nor
// DeleteUnusedImages removes it while a pod has the volume; once no pod
// has it, it goes.
func TestGCKeepsImageVolumeImages(t *testing.T) {
	e := newGCEnv(t, aggressive)
	e.image("tools:1", 100)
	e.image("free:1", 100)
	var mu sync.Mutex
	pods := []*v1.Pod{
		{Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "docker.io/library/tools:1"}}},
		}}},
		{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "empty", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{}}}}}},
	}
	e.gc = images.NewGC(images.GCOptions{Policy: aggressive, Runtime: e.rt, Fs: e.fs, Clock: e.clk, Recorder: e.rec,
		Node: &v1.ObjectReference{Kind: "Node", Name: "n", UID: "n"},
		VolumeImages: func() []string {
			mu.Lock()
			defer mu.Unlock()
			return images.VolumeImageRefs(pods)
		}})
	e.clk.Step(time.Hour)
	_ = e.gc.GarbageCollect(e.ctx) // cannot free enough: the volume's image stays
	if got, want := e.present(), []string{"tools:1"}; !slices.Equal(got, want) {
		t.Fatalf("images = %v, want %v: the image volume's image kept, the free one removed", got, want)
	}
	if _, err := e.gc.DeleteUnusedImages(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 1 {
		t.Fatalf("images = %v; DeleteUnusedImages removed the image volume's image", got)
	}
	mu.Lock()
	pods = pods[1:]
	mu.Unlock()
	e.clk.Step(time.Minute) // an image used at this very instant is kept, as upstream
	if _, err := e.gc.DeleteUnusedImages(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 0 {
		t.Errorf("images = %v; the image of a volume no pod has is kept", got)
	}
}

func TestVolumeImageRefs(t *testing.T) {
	pods := []*v1.Pod{
		{Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "r/a:1"}}},
			{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
		}}},
		{},
		{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "b", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "r/b"}}}}}},
	}
	if got, want := images.VolumeImageRefs(pods), []string{"r/a:1", "r/b"}; !slices.Equal(got, want) {
		t.Errorf("VolumeImageRefs = %v, want %v", got, want)
	}
}
