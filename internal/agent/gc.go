package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/containergc"
	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/runtime"
)

// garbageCollectors are image and container garbage collection; they are
// also the eviction manager's node-level reclaim.
type garbageCollectors struct {
	images     *images.GC
	containers *containergc.GC
	rt         *runtime.Runtime
	rootDir    string
}

// newGarbageCollectors builds image garbage collection from the image GC
// fields of the configuration and container garbage collection with
// upstream's default policy. They read the desired pods, the workers,
// the stats and the recorder through c when they run.
func (a *Agent) newGarbageCollectors(c *components, rt *runtime.Runtime) *garbageCollectors {
	cfg := a.opts.Config
	node := &v1.ObjectReference{Kind: "Node", Name: a.opts.NodeName, UID: types.UID(a.opts.NodeName)}
	deps := gcDeps{c}
	return &garbageCollectors{
		rt:      rt,
		rootDir: a.opts.RootDir,
		images: images.NewGC(images.GCOptions{
			Policy: images.GCPolicy{
				HighThresholdPercent: int(derefInt32(cfg.ImageGCHighThresholdPercent)),
				LowThresholdPercent:  int(derefInt32(cfg.ImageGCLowThresholdPercent)),
				MinAge:               cfg.ImageMinimumGCAge.Duration,
				MaxAge:               cfg.ImageMaximumGCAge.Duration,
			},
			Runtime:  rt,
			Fs:       deps,
			Clock:    a.clock,
			Recorder: deps,
			Node:     node,
			// The image volumes of the desired pods.
			VolumeImages: deps.VolumeImages,
		}),
		containers: containergc.New(rt, deps, containergc.Options{
			Policy:   containergc.DefaultPolicy(),
			LogsDir:  cfg.PodLogsDir,
			Clock:    a.clock,
			Recorder: deps,
			Node:     node,
		}),
	}
}

// Run runs both collectors until ctx is done.
func (g *garbageCollectors) Run(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	eg.Go(func() error { return g.images.Run(ctx) })
	eg.Go(func() error { return g.containers.Run(ctx) })
	return eg.Wait()
}

// DeleteUnusedContainers is the containers' node-level reclaim.
func (g *garbageCollectors) DeleteUnusedContainers(ctx context.Context) (int, error) {
	res, err := g.containers.DeleteAllUnusedContainers(ctx)
	return res.Containers + res.Sandboxes, err
}

// DeleteUnusedImages is the images' node-level reclaim.
func (g *garbageCollectors) DeleteUnusedImages(ctx context.Context) (uint64, error) {
	return g.images.DeleteUnusedImages(ctx)
}

// ImageFsDedicated tells whether the runtime's image filesystem is
// another device than the root directory's; unknown counts as shared.
func (g *garbageCollectors) ImageFsDedicated(ctx context.Context) bool {
	fss, err := g.rt.ImageFsInfo(ctx)
	if err != nil || len(fss) == 0 || fss[0].Mountpoint == "" {
		return false
	}
	a, errA := device(g.rootDir)
	b, errB := device(fss[0].Mountpoint)
	if errA != nil || errB != nil {
		klog.FromContext(ctx).V(2).Info("Image filesystem's device unknown; taken as nodefs", "err", errors.Join(errA, errB))
		return false
	}
	return a != b
}

func device(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no device number", path)
	}
	return uint64(st.Dev), nil
}

// gcDeps give the collectors the parts of c built after them.
type gcDeps struct{ c *components }

func (d gcDeps) SourcesReady() bool { return d.c.desired.SeenAllSources(d.c.sources...) }

func (d gcDeps) Desired(uid types.UID) bool {
	for _, p := range d.c.desired.SharedPods() {
		if p.UID == uid {
			return true
		}
	}
	return false
}

func (d gcDeps) Known(uid types.UID) bool { return d.c.workers.Known(uid) }

// VolumeImages are the references of the desired pods' image volumes.
func (d gcDeps) VolumeImages() []string {
	return images.VolumeImageRefs(d.c.desired.SharedPods())
}

// ImageFsStats reads the image filesystem's capacity and available bytes
// from the node's stats (no pod's are read).
func (d gcDeps) ImageFsStats(ctx context.Context) (uint64, uint64, error) {
	s, err := d.c.summary.SummaryOf(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("stats summary: %w", err)
	}
	if s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil {
		return 0, 0, errors.New("stats summary: no image filesystem")
	}
	fs := s.Node.Runtime.ImageFs
	if fs.CapacityBytes == nil || fs.AvailableBytes == nil {
		return 0, 0, errors.New("stats summary: image filesystem without capacity or available bytes")
	}
	return *fs.CapacityBytes, *fs.AvailableBytes, nil
}

func (d gcDeps) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	if d.c.recorder != nil {
		d.c.recorder.Eventf(obj, eventtype, reason, format, args...)
	}
}
