package eviction

import (
	"context"
	"errors"

	"k8s.io/klog/v2"
)

// NodeReclaimer frees disk on the node without evicting a pod: upstream's
// node-level reclaim, tried first when a disk signal is met.
//
// Contract: DeleteUnusedContainers removes the dead containers and the
// empty sandboxes no pod needs (the newest dead instance of each
// container of an existing pod stays, so its status keeps its last state)
// and returns how many objects it removed. DeleteUnusedImages removes
// every image image garbage collection may remove (never one a container
// or sandbox uses, the sandbox image, nor a pinned one) and returns the
// bytes freed. ImageFsDedicated tells whether the images live on another
// filesystem than the root directory (nodefs). The manager calls them
// from its pass, one at a time; they return when ctx is done. A partial
// result comes with its error.
type NodeReclaimer interface {
	DeleteUnusedContainers(ctx context.Context) (int, error)
	DeleteUnusedImages(ctx context.Context) (uint64, error)
	ImageFsDedicated(ctx context.Context) bool
}

// reclaimState is what node-level reclaim remembers between passes.
type reclaimState struct {
	// freed is set when the last reclaim freed something: the next pass
	// that still finds the threshold met evicts without reclaiming again,
	// so a pod that keeps leaving dead containers cannot hold eviction
	// off for good.
	freed bool
}

// Reclaims tells which node-level reclaims a signal tries, in order, as
// upstream: the nodefs signals remove dead containers, and unused images
// too when the images share nodefs; the imagefs signals remove dead
// containers, then unused images. Other signals try none.
func Reclaims(s Signal, imageFsDedicated bool) (containers, images bool) {
	switch s {
	case SignalNodeFsAvailable, SignalNodeFsInodesFree:
		return true, !imageFsDedicated
	case SignalImageFsAvailable, SignalImageFsInodesFree:
		return true, true
	}
	return false, false
}

// reclaimNodeLevel tries node-level reclaim for signal s. It reports true
// when it freed something: the pass then evicts nobody, and the next one,
// a settle period later on fresh stats, decides whether the threshold is
// still met. It reports false when there is nothing to try or nothing was
// freed, or when the last reclaim freed something and the threshold is
// still met: then a pod is evicted.
func (m *Manager) reclaimNodeLevel(ctx context.Context, s Signal) bool {
	r := m.opts.Reclaimer
	if r == nil {
		return false
	}
	containers, images := Reclaims(s, r.ImageFsDedicated(ctx))
	if !containers && !images {
		return false
	}
	if m.reclaim.freed {
		m.reclaim.freed = false
		return false
	}
	logger := klog.FromContext(ctx)
	var (
		removed int
		bytes   uint64
		errs    []error
	)
	if containers {
		n, err := r.DeleteUnusedContainers(ctx)
		removed += n
		errs = append(errs, err)
	}
	if images {
		b, err := r.DeleteUnusedImages(ctx)
		bytes += b
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		logger.Error(err, "Eviction manager: node-level reclaim failed in part", "signal", s)
	}
	if removed == 0 && bytes == 0 {
		logger.Info("Eviction manager: node-level reclaim freed nothing", "signal", s)
		return false
	}
	logger.Info("Eviction manager: node-level reclaim freed disk; deciding again on fresh stats", "signal", s,
		"containersAndSandboxes", removed, "imageBytes", bytes)
	m.reclaim.freed = true
	m.settleUntil = m.opts.Clock.Now().Add(settlePeriod)
	return true
}
