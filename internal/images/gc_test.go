package images_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

const mib = 1 << 20

// fakeImageFs is an image filesystem of capacity bytes whose used bytes
// are the sizes of the fake runtime's images plus other.
type fakeImageFs struct {
	srv      *fakecri.Server
	capacity uint64
	other    uint64
	err      error
}

func (f *fakeImageFs) ImageFsStats(context.Context) (uint64, uint64, error) {
	if f.err != nil {
		return 0, 0, f.err
	}
	used := f.other
	for _, im := range f.srv.Images() {
		used += im.Size
	}
	return f.capacity, f.capacity - min(used, f.capacity), nil
}

// nodeEvents records the events' reasons.
type nodeEvents struct {
	mu      sync.Mutex
	reasons []string
}

func (r *nodeEvents) Eventf(_ k8sruntime.Object, _, reason, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *nodeEvents) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reasons)
}

type gcEnv struct {
	t   *testing.T
	ctx context.Context
	srv *fakecri.Server
	rt  *runtime.Runtime
	clk *clocktesting.FakeClock
	fs  *fakeImageFs
	rec *nodeEvents
	gc  *images.GC
}

func newGCEnv(t *testing.T, policy images.GCPolicy) *gcEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv := fakecri.Start(t)
	rt, err := runtime.New(ctx, srv.Endpoint(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	e := &gcEnv{t: t, ctx: ctx, srv: srv, rt: rt, clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		fs: &fakeImageFs{srv: srv, capacity: 1000 * mib}, rec: &nodeEvents{}}
	e.gc = images.NewGC(images.GCOptions{Policy: policy, Runtime: rt, Fs: e.fs, Clock: e.clk, Recorder: e.rec,
		Node: &v1.ObjectReference{Kind: "Node", Name: "n", UID: "n"}})
	return e
}

// image adds an image of size MiB and returns its ID.
func (e *gcEnv) image(ref string, size uint64) string {
	id := e.srv.AddImage(ref)
	e.srv.SetImageSize(ref, size*mib)
	return id
}

// sandbox runs a sandbox for pod name.
func (e *gcEnv) sandbox(name string) (string, *runtimeapi.PodSandboxConfig) {
	e.t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"}}
	id, err := e.rt.RunPodSandbox(e.ctx, cfg, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return id, cfg
}

// container creates a container of image in a new sandbox and brings it
// to state: "created", "running" or "exited".
func (e *gcEnv) container(name, image, state string) string {
	e.t.Helper()
	sb, cfg := e.sandbox(name)
	id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
	}, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if state == "created" {
		return id
	}
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
	if state == "exited" {
		e.srv.SetExit(id, 1, "Error")
	}
	return id
}

// present returns the refs (first tag) of the images the runtime has.
func (e *gcEnv) present() []string {
	var out []string
	for _, im := range e.srv.Images() {
		out = append(out, im.RepoTags[0])
	}
	slices.Sort(out)
	return out
}

func (e *gcEnv) removeContainer(id string) {
	e.t.Helper()
	if err := e.rt.RemoveContainer(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

// aggressive collects everything it may: usage is always above the high
// threshold and the low one is 0.
var aggressive = images.GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0}

// No image a container or sandbox uses, nor the sandbox image, a pinned
// image, an image younger than imageMinimumGCAge or one EnsureImage just
// returned, is ever removed, however full the image filesystem; a free
// image beside it is.
func TestGCNeverRemoves(t *testing.T) {
	const kept = "docker.io/library/kept:1"
	tests := []struct {
		name   string
		policy images.GCPolicy
		setup  func(e *gcEnv)
	}{
		{"image of a running container", aggressive, func(e *gcEnv) { e.container("web", kept, "running") }},
		{"image of an exited container not yet collected", aggressive, func(e *gcEnv) { e.container("job", kept, "exited") }},
		{"image of a created container", aggressive, func(e *gcEnv) { e.container("new", kept, "created") }},
		{"sandbox image (containerd 1.x config)", aggressive, func(e *gcEnv) {
			e.srv.SetStatusInfo(map[string]string{"config": `{"sandboxImage":"kept:1"}`})
		}},
		{"sandbox image (containerd 2.x pinnedImages)", aggressive, func(e *gcEnv) {
			e.srv.SetStatusInfo(map[string]string{"config": `{"pinnedImages":{"sandbox":"docker.io/library/kept:1"}}`})
		}},
		{"pinned image", aggressive, func(e *gcEnv) { e.srv.SetImagePinned(kept, true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newGCEnv(t, tt.policy)
			e.image(kept, 300)
			tt.setup(e)
			e.clk.Step(time.Minute)
			e.image("docker.io/library/free:1", 200)
			e.clk.Step(3 * time.Hour)
			err := e.gc.GarbageCollect(e.ctx)
			if err == nil {
				t.Error("GarbageCollect = nil; want an error: the kept image cannot be freed and usage stays above the threshold")
			}
			if got := e.present(); !slices.Contains(got, kept) {
				t.Errorf("images after GC = %v; %s was removed", got, kept)
			}
			if slices.Contains(e.present(), "docker.io/library/free:1") {
				t.Errorf("images after GC = %v; the free image was kept", e.present())
			}
			if !slices.Contains(e.rec.list(), images.ReasonFreeDiskSpaceFailed) {
				t.Errorf("events = %v; want %s", e.rec.list(), images.ReasonFreeDiskSpaceFailed)
			}
		})
	}
}

// An image first seen less than imageMinimumGCAge ago is kept; the
// images present at the first detection after the start count as old.
func TestGCKeepsYoungImages(t *testing.T) {
	e := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 1, MinAge: time.Hour})
	e.image("present:1", 100)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 0 {
		t.Fatalf("images = %v; an image present at the start is not protected by imageMinimumGCAge", got)
	}
	e.image("old:1", 100)
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect = nil; want an error: old:1 was just detected")
	}
	e.clk.Step(61 * time.Minute)
	e.image("young:1", 100)
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect = nil; want an error: young:1 cannot be freed")
	}
	if got, want := e.present(), []string{"young:1"}; !slices.Equal(got, want) {
		t.Errorf("images = %v, want %v", got, want)
	}
	e.clk.Step(59 * time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect = nil; want an error: young:1 is 59m old")
	}
	if got, want := e.present(), []string{"young:1"}; !slices.Equal(got, want) {
		t.Errorf("after 59m images = %v, want %v", got, want)
	}
	e.clk.Step(time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 0 {
		t.Errorf("images = %v; want young:1 gone once an hour old", got)
	}
}

// An image EnsureImage returned is kept for the container about to be
// created from it, for ensuredProtection (5 minutes).
func TestGCKeepsEnsuredImage(t *testing.T) {
	e := newGCEnv(t, aggressive)
	e.image("kept:1", 100)
	e.clk.Step(time.Hour)
	e.gc.Ensured("kept:1")
	e.clk.Step(time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect = nil; want an error: the ensured image cannot be freed")
	}
	if got := e.present(); len(got) != 1 {
		t.Fatalf("images = %v; the image EnsureImage returned a minute ago was removed", got)
	}
	e.clk.Step(5 * time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 0 {
		t.Errorf("images = %v; want kept:1 gone 6 minutes after EnsureImage without a container", got)
	}
}

// Images are removed least recently used first (never used before any
// used one), only as many as bring usage to the low threshold.
func TestGCLeastRecentlyUsedFirst(t *testing.T) {
	e := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80})
	e.image("a:1", 100)
	e.image("b:1", 100)
	e.image("c:1", 100)
	e.image("d:1", 100)
	// At t0 a and c are used; at t0+1m only c.
	ca := e.container("a", "a:1", "running")
	cc := e.container("c", "c:1", "exited")
	pass := func(other uint64, want ...string) {
		t.Helper()
		e.fs.other = other * mib
		if err := e.gc.GarbageCollect(e.ctx); err != nil {
			t.Fatal(err)
		}
		if got := e.present(); !slices.Equal(got, want) {
			t.Fatalf("with %d MiB of other data images = %v, want %v", other, got, want)
		}
	}
	pass(0, "a:1", "b:1", "c:1", "d:1")
	e.removeContainer(ca)
	e.clk.Step(time.Minute)
	pass(0, "a:1", "b:1", "c:1", "d:1")
	e.removeContainer(cc)
	e.clk.Step(time.Minute)
	// 1000 MiB capacity: 500 MiB of other data and 400 MiB of images is
	// 90% used, 100 MiB must go to reach 80%: one never-used image.
	e.fs.other = 500 * mib
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := e.present()
	if len(got) != 3 || !slices.Contains(got, "a:1") || !slices.Contains(got, "c:1") {
		t.Fatalf("after the first pass over the threshold images = %v; want a never-used image (b or d) removed", got)
	}
	pass(600, "a:1", "c:1")
	// Then a, last used before c.
	pass(700, "c:1")
}

// Below the high threshold nothing is removed.
func TestGCBelowHighThresholdRemovesNothing(t *testing.T) {
	e := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80})
	e.fs.other = 740 * mib
	e.image("a:1", 100) // 84%
	e.clk.Step(time.Hour)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 1 {
		t.Errorf("images = %v; want a:1 kept at 84%% usage", got)
	}
	// imageGCHighThresholdPercent 100 turns space-based collection off.
	off := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 0})
	off.fs.other = 1000 * mib
	off.image("a:1", 100)
	if err := off.gc.GarbageCollect(off.ctx); err != nil {
		t.Fatal(err)
	}
	if got := off.present(); len(got) != 1 {
		t.Errorf("with the high threshold at 100 images = %v; want a:1 kept", got)
	}
}

func TestAmountToFree(t *testing.T) {
	p := images.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}
	tests := []struct {
		name                string
		policy              images.GCPolicy
		capacity, available uint64
		usage               int
		want                int64
	}{
		{"empty", p, 1000, 1000, 0, 0},
		{"just below high", p, 1000, 151, 85, 49}, // 84.9% rounds to 85 as upstream: available share rounded down
		{"below high", p, 1000, 160, 84, 0},
		{"at high", p, 1000, 150, 85, 50},
		{"full", p, 1000, 0, 100, 200},
		{"off at 100", images.GCPolicy{HighThresholdPercent: 100}, 1000, 0, 100, 0},
		{"no capacity", p, 0, 0, 0, 0},
		{"low 0", images.GCPolicy{HighThresholdPercent: 50}, 1000, 400, 60, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := images.UsagePercent(tt.capacity, tt.available); got != tt.usage {
				t.Errorf("UsagePercent(%d, %d) = %d, want %d", tt.capacity, tt.available, got, tt.usage)
			}
			if got := images.AmountToFree(tt.policy, tt.capacity, tt.available); got != tt.want {
				t.Errorf("AmountToFree(%d, %d) = %d, want %d", tt.capacity, tt.available, got, tt.want)
			}
		})
	}
}

// imageMaximumGCAge removes an image unused for longer, whatever the
// usage, never an image in use; the age of an image never used counts
// from the start.
func TestGCMaxAge(t *testing.T) {
	e := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: time.Hour})
	e.image("old:1", 10)
	e.image("busy:1", 10)
	e.container("busy", "busy:1", "running")
	before := testutil.ToFloat64(metrics.ImageGarbageCollected.WithLabelValues(metrics.ImageGCReasonAge))
	e.clk.Step(59 * time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.present(); len(got) != 2 {
		t.Fatalf("after 59m images = %v; want both", got)
	}
	e.image("young:1", 10)
	e.clk.Step(2 * time.Minute)
	if err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.present(), []string{"busy:1", "young:1"}; !slices.Equal(got, want) {
		t.Errorf("after 61m images = %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(metrics.ImageGarbageCollected.WithLabelValues(metrics.ImageGCReasonAge)) - before; got != 1 {
		t.Errorf("kubelet_image_garbage_collected_total{reason=age} grew by %v, want 1", got)
	}
}

// DeleteUnusedImages (node-level reclaim) removes every image the rules
// allow whatever the usage, and says how much it freed.
func TestGCDeleteUnusedImages(t *testing.T) {
	e := newGCEnv(t, images.GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80})
	e.image("a:1", 10)
	e.image("b:1", 20)
	e.image("pinned:1", 30)
	e.srv.SetImagePinned("pinned:1", true)
	e.image("busy:1", 40)
	e.container("busy", "busy:1", "exited")
	freed, err := e.gc.DeleteUnusedImages(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if freed != 30*mib {
		t.Errorf("freed %d bytes, want %d", freed, 30*mib)
	}
	if got, want := e.present(), []string{"busy:1", "pinned:1"}; !slices.Equal(got, want) {
		t.Errorf("images = %v, want %v", got, want)
	}
}

// A failing runtime removes nothing; a filesystem of capacity 0 is an
// error with an InvalidDiskCapacity event; Run records ImageGCFailed only
// for the second failure in a row.
func TestGCFailures(t *testing.T) {
	e := newGCEnv(t, aggressive)
	e.image("a:1", 10)
	e.srv.InjectError("ListContainers", errors.New("runtime down"))
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect with the containers unlisted = nil, want an error")
	}
	if got := e.present(); len(got) != 1 {
		t.Errorf("images = %v; a failed listing removed images", got)
	}
	e.fs.capacity = 0
	if err := e.gc.GarbageCollect(e.ctx); err == nil {
		t.Error("GarbageCollect with capacity 0 = nil, want an error")
	}
	if !slices.Contains(e.rec.list(), images.ReasonInvalidDiskCapacity) {
		t.Errorf("events = %v, want %s", e.rec.list(), images.ReasonInvalidDiskCapacity)
	}

	r := newGCEnv(t, aggressive)
	r.fs.err = errors.New("no stats yet")
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error)
	go func() { done <- r.gc.Run(ctx) }()
	for i, want := range [][]string{nil, {images.ReasonImageGCFailed}} {
		waitForWaiter(t, r.clk)
		r.clk.Step(images.DefaultGCPeriod)
		err := wait.PollUntilContextTimeout(r.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r.clk.HasWaiters() && slices.Equal(r.rec.list(), want), nil
		})
		if err != nil {
			t.Fatalf("after failure %d events = %v, want %v", i+1, r.rec.list(), want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

func waitForWaiter(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	})
	if err != nil {
		t.Fatal("Run never waited on the clock")
	}
}
