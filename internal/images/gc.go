package images

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/metrics"
)

// Image garbage collection, as upstream: how often it runs, and the event
// reasons of its failures on the node.
const (
	// DefaultGCPeriod is how often image garbage collection runs.
	DefaultGCPeriod = 5 * time.Minute
	// DefaultGCDelay is how long after the start the first pass runs, so
	// that the node's stats are collected and the running pods adopted.
	DefaultGCDelay = 30 * time.Second
	// ReasonImageGCFailed is the event of a pass that failed twice in a
	// row (the first failure may be stats not collected yet).
	ReasonImageGCFailed = "ImageGCFailed"
	// ReasonFreeDiskSpaceFailed is the event of a pass that could not
	// free enough to get below the low threshold.
	ReasonFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	// ReasonInvalidDiskCapacity is the event of an image filesystem of
	// capacity 0.
	ReasonInvalidDiskCapacity = "InvalidDiskCapacity"
	// ensuredProtection is how long an image EnsureImage returned counts
	// as used, so that the container about to be created from it never
	// loses its image to a pass that ran before the runtime listed it.
	ensuredProtection = 5 * time.Minute
)

// GCPolicy is the image garbage collection policy of the configuration.
type GCPolicy struct {
	// HighThresholdPercent is the image filesystem usage, in percent, at
	// which images are removed (imageGCHighThresholdPercent); 100 turns
	// space-based collection off.
	HighThresholdPercent int
	// LowThresholdPercent is the usage collection brings the filesystem
	// down to (imageGCLowThresholdPercent).
	LowThresholdPercent int
	// MinAge is how long an image is kept at least after heartlet first
	// saw it (imageMinimumGCAge).
	MinAge time.Duration
	// MaxAge, when positive, removes an image unused that long whatever
	// the usage (imageMaximumGCAge).
	MaxAge time.Duration
}

// GCRuntime is what image garbage collection needs of the runtime.
//
// Contract: ListImages returns every image with its ID, tags, digests,
// size and pinned flag. RemoveImage removes an image by ID; an image
// already gone is an error wrapping errdefs.ErrNotFound or none.
// ImagesInUse returns references (IDs, tags or digests, as the runtime
// reports them) of the image of every container the runtime holds,
// whatever its state, until the container is removed, and of the
// runtime's sandbox (pause) image when it tells it. A pass that cannot
// list either removes nothing. All are safe for concurrent use.
type GCRuntime interface {
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image string) error
	ImagesInUse(ctx context.Context) ([]string, error)
}

// ImageFs reads the image filesystem's size: its capacity and the bytes
// still available, in bytes.
type ImageFs interface {
	ImageFsStats(ctx context.Context) (capacity, available uint64, err error)
}

// GCOptions configure a GC.
type GCOptions struct {
	Policy  GCPolicy
	Runtime GCRuntime
	Fs      ImageFs
	// Clock drives the ages and the period; nil means the real one.
	Clock clock.WithTicker
	// Recorder and Node (the node's reference) receive the failure
	// events; either nil records none.
	Recorder Recorder
	Node     *v1.ObjectReference
	// Period is how often Run collects; default DefaultGCPeriod.
	Period time.Duration
	// Delay is how long after the start Run collects the first time;
	// default DefaultGCDelay.
	Delay time.Duration
	// VolumeImages returns the references of the images the image
	// volumes of the node's pods mount (see VolumeImageRefs); they count
	// as in use. The runtime lists no container by them, and the
	// reference is read from the pods so that it holds across restarts.
	// Nil: none.
	VolumeImages func() []string
}

// VolumeImageRefs returns the references of the image volumes of pods.
func VolumeImageRefs(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.Image != nil && v.Image.Reference != "" {
				out = append(out, v.Image.Reference)
			}
		}
	}
	return out
}

// imageRecord is what GC knows of one image, by ID.
type imageRecord struct {
	id            string
	firstDetected time.Time
	lastUsed      time.Time // zero when never seen used
	size          uint64
	pinned        bool
}

// GC removes least recently used images when the image filesystem is
// above the high threshold until it is below the low one, and images
// unused for longer than the maximum age, as upstream. It never removes an
// image a container (in any state, until removed) or a sandbox uses, the
// runtime's sandbox image, a pinned image, one first seen less than
// MinAge ago, nor one EnsureImage returned less than ensuredProtection
// ago, nor one an image volume of a pod mounts. It is safe for concurrent use; passes are serialized.
type GC struct {
	opts  GCOptions
	start time.Time

	// mu serializes passes and guards records and initialized.
	mu          sync.Mutex
	records     map[string]*imageRecord
	initialized bool

	// ensuredMu guards ensured: image references by the time EnsureImage
	// last returned them.
	ensuredMu sync.Mutex
	ensured   map[string]time.Time
}

// NewGC returns a GC; it starts nothing.
func NewGC(opts GCOptions) *GC {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Period <= 0 {
		opts.Period = DefaultGCPeriod
	}
	if opts.Delay <= 0 {
		opts.Delay = DefaultGCDelay
	}
	return &GC{opts: opts, start: opts.Clock.Now(), records: map[string]*imageRecord{}, ensured: map[string]time.Time{}}
}

// Ensured records that ref (an image ID or reference) is about to be used
// by a container; the Manager calls it from EnsureImage.
func (g *GC) Ensured(ref string) {
	if ref == "" {
		return
	}
	g.ensuredMu.Lock()
	defer g.ensuredMu.Unlock()
	now := g.opts.Clock.Now()
	g.ensured[ref] = now
	for r, at := range g.ensured {
		if now.Sub(at) > ensuredProtection {
			delete(g.ensured, r)
		}
	}
}

// recentlyEnsured returns the references EnsureImage returned within
// ensuredProtection of now.
func (g *GC) recentlyEnsured(now time.Time) []string {
	g.ensuredMu.Lock()
	defer g.ensuredMu.Unlock()
	var out []string
	for r, at := range g.ensured {
		if now.Sub(at) <= ensuredProtection {
			out = append(out, r)
		}
	}
	return out
}

// Run detects the images, then collects Delay after the start and every
// Period after that until ctx is done. The images present at the first
// detection count as detected long ago, as upstream. A pass that fails
// twice in a row records ImageGCFailed on the node.
func (g *GC) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	g.mu.Lock()
	_, err := g.detect(ctx, time.Time{})
	g.mu.Unlock()
	if err != nil {
		logger.V(2).Info("Image garbage collection: first detection failed", "err", err)
	}
	wait := g.opts.Delay
	failedBefore := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.opts.Clock.After(wait):
		}
		wait = g.opts.Period
		err := g.GarbageCollect(ctx)
		switch {
		case err == nil:
			if failedBefore {
				logger.Info("Image garbage collection succeeded")
			}
			failedBefore = false
		case failedBefore:
			logger.Error(err, "Image garbage collection failed multiple times in a row")
			g.event(v1.EventTypeWarning, ReasonImageGCFailed, "%s", err.Error())
		default:
			logger.Error(err, "Image garbage collection failed once; stats may not be collected yet")
			failedBefore = true
		}
	}
}

// GarbageCollect is one pass: images unused for longer than MaxAge go,
// then, when the image filesystem's usage is at or above the high
// threshold, least recently used images until it is at the low one. Not
// freeing enough is an error and a FreeDiskSpaceFailed event.
func (g *GC) GarbageCollect(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	logger := klog.FromContext(ctx)
	now := g.opts.Clock.Now()
	order, err := g.evictionOrder(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	if g.opts.Policy.MaxAge > 0 {
		var err error
		order, err = g.freeOld(ctx, order, now)
		errs = append(errs, err)
	}
	if g.opts.Policy.HighThresholdPercent >= 100 {
		return errors.Join(errs...)
	}
	capacity, available, err := g.opts.Fs.ImageFsStats(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("image filesystem stats: %w", err))...)
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		g.event(v1.EventTypeWarning, ReasonInvalidDiskCapacity, "%s", err.Error())
		return errors.Join(append(errs, err)...)
	}
	if available > capacity {
		logger.Info("Image filesystem reports more available than its capacity", "available", available, "capacity", capacity)
		available = capacity
	}
	amount := AmountToFree(g.opts.Policy, capacity, available)
	if amount <= 0 {
		return errors.Join(errs...)
	}
	logger.Info("Image filesystem usage over the high threshold, removing images",
		"usagePercent", UsagePercent(capacity, available), "highThreshold", g.opts.Policy.HighThresholdPercent,
		"amountToFree", amount, "lowThreshold", g.opts.Policy.LowThresholdPercent)
	freed, err := g.freeSpace(ctx, uint64(amount), order, now, metrics.ImageGCReasonSpace)
	errs = append(errs, err)
	if freed < uint64(amount) {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", amount, freed)
		g.event(v1.EventTypeWarning, ReasonFreeDiskSpaceFailed, "%s", msg)
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}

// DeleteUnusedImages removes every image the policy allows to remove,
// whatever the usage (node-level reclaim under disk pressure), and
// returns the bytes freed.
func (g *GC) DeleteUnusedImages(ctx context.Context) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Clock.Now()
	order, err := g.evictionOrder(ctx, now)
	if err != nil {
		return 0, err
	}
	return g.freeSpace(ctx, ^uint64(0), order, now, metrics.ImageGCReasonSpace)
}

// UsagePercent is the image filesystem's usage in whole percent, as
// upstream computes it (rounding the available share down).
func UsagePercent(capacity, available uint64) int {
	if capacity == 0 {
		return 0
	}
	return 100 - int(available*100/capacity)
}

// AmountToFree is how many bytes must go to bring the filesystem from its
// usage down to the low threshold: 0 below the high threshold or when
// space-based collection is off.
func AmountToFree(p GCPolicy, capacity, available uint64) int64 {
	if p.HighThresholdPercent >= 100 || capacity == 0 || UsagePercent(capacity, available) < p.HighThresholdPercent {
		return 0
	}
	return int64(capacity)*int64(100-p.LowThresholdPercent)/100 - int64(available)
}

// detect lists the images and those in use, brings the records up to
// date (a new image is first detected at detectTime; the zero time on the
// first detection after the start) and returns the IDs in use.
func (g *GC) detect(ctx context.Context, detectTime time.Time) (map[string]bool, error) {
	images, err := g.opts.Runtime.ListImages(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	// Containers are listed after the images: an image pulled in between
	// is not in the list, so it cannot be removed by this pass.
	used, err := g.opts.Runtime.ImagesInUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images in use: %w", err)
	}
	now := g.opts.Clock.Now()
	used = append(used, g.recentlyEnsured(now)...)
	if g.opts.VolumeImages != nil {
		used = append(used, g.opts.VolumeImages()...)
	}
	refs := map[string]bool{}
	for _, r := range used {
		for _, k := range refKeys(r) {
			refs[k] = true
		}
	}
	if !g.initialized {
		detectTime = time.Time{}
		g.initialized = true
	}
	inUse := map[string]bool{}
	current := map[string]bool{}
	for _, im := range images {
		id := im.GetId()
		if id == "" {
			continue
		}
		current[id] = true
		r := g.records[id]
		if r == nil {
			r = &imageRecord{id: id, firstDetected: detectTime}
			g.records[id] = r
		}
		if imageUsed(im, refs) {
			r.lastUsed = now
			inUse[id] = true
		}
		r.size, r.pinned = im.GetSize(), im.GetPinned()
	}
	for id := range g.records {
		if !current[id] {
			delete(g.records, id)
		}
	}
	return inUse, nil
}

// evictionOrder detects the images and returns those that may be removed
// (not in use, not pinned), least recently used first, then first
// detected first.
func (g *GC) evictionOrder(ctx context.Context, now time.Time) ([]*imageRecord, error) {
	inUse, err := g.detect(ctx, now)
	if err != nil {
		return nil, err
	}
	var out []*imageRecord
	for id, r := range g.records {
		if inUse[id] || r.pinned {
			continue
		}
		c := *r
		out = append(out, &c)
	}
	SortLRU(out)
	return out, nil
}

// SortLRU orders records least recently used first, then first detected
// first, then by ID.
func SortLRU(rs []*imageRecord) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return a.id < b.id
	})
}

// freeOld removes the images of order unused for longer than MaxAge and
// returns the others. The age counts from the last use, or for an image
// never seen used from when it was first detected or heartlet started,
// whichever is later.
func (g *GC) freeOld(ctx context.Context, order []*imageRecord, now time.Time) ([]*imageRecord, error) {
	var kept []*imageRecord
	var errs []error
	for _, r := range order {
		since := r.lastUsed
		if since.Before(r.firstDetected) {
			since = r.firstDetected
		}
		if since.Before(g.start) {
			since = g.start
		}
		if now.Sub(since) <= g.opts.Policy.MaxAge {
			kept = append(kept, r)
			continue
		}
		klog.FromContext(ctx).Info("Removing image unused for longer than imageMaximumGCAge", "imageID", r.id, "unusedFor", now.Sub(since), "maxAge", g.opts.Policy.MaxAge)
		if err := g.remove(ctx, r, metrics.ImageGCReasonAge); err != nil {
			errs = append(errs, err)
			kept = append(kept, r)
		}
	}
	return kept, errors.Join(errs...)
}

// freeSpace removes images of order, in order, until amount bytes are
// freed, skipping those used at now or first detected less than MinAge
// ago, and returns the bytes freed.
func (g *GC) freeSpace(ctx context.Context, amount uint64, order []*imageRecord, now time.Time, reason string) (uint64, error) {
	var freed uint64
	var errs []error
	for _, r := range order {
		if freed >= amount {
			break
		}
		if !r.lastUsed.Before(now) {
			continue
		}
		if now.Sub(r.firstDetected) < g.opts.Policy.MinAge {
			klog.FromContext(ctx).V(4).Info("Image younger than imageMinimumGCAge kept", "imageID", r.id, "age", now.Sub(r.firstDetected))
			continue
		}
		klog.FromContext(ctx).Info("Removing image to free space", "imageID", r.id, "size", r.size)
		if err := g.remove(ctx, r, reason); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += r.size
	}
	return freed, errors.Join(errs...)
}

// remove removes one image by ID and forgets its record.
func (g *GC) remove(ctx context.Context, r *imageRecord, reason string) error {
	err := g.opts.Runtime.RemoveImage(ctx, r.id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return fmt.Errorf("remove image %s: %w", r.id, err)
	}
	delete(g.records, r.id)
	metrics.ImageGarbageCollected.WithLabelValues(reason).Inc()
	return nil
}

func (g *GC) event(eventtype, reason, format string, args ...any) {
	if g.opts.Recorder != nil && g.opts.Node != nil {
		g.opts.Recorder.Eventf(g.opts.Node, eventtype, reason, format, args...)
	}
}

// imageUsed tells whether any of im's ID, tags or digests is in refs.
func imageUsed(im *runtimeapi.Image, refs map[string]bool) bool {
	for _, k := range refKeys(im.GetId()) {
		if refs[k] {
			return true
		}
	}
	for _, list := range [][]string{im.GetRepoTags(), im.GetRepoDigests()} {
		for _, r := range list {
			for _, k := range refKeys(r) {
				if refs[k] {
					return true
				}
			}
		}
	}
	return false
}

// refKeys are the spellings under which a reference is matched: as
// given, without a sha256: prefix, and normalized (docker.io/library/...
// with its default tag) when it parses.
func refKeys(ref string) []string {
	if ref == "" {
		return nil
	}
	keys := []string{ref, strings.TrimPrefix(ref, "sha256:")}
	if n, err := NormalizeImage(ref); err == nil {
		if full, err := fullName(n); err == nil {
			keys = append(keys, full)
		}
	}
	return keys
}

// fullName is ref fully qualified (docker.io/library/busybox:latest for
// busybox:latest).
func fullName(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image name %q: %w", ref, err)
	}
	return named.String(), nil
}
