package podlifecycle

import (
	"context"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
)

// HousekeepingPeriod is how often housekeeping runs, as upstream's.
const HousekeepingPeriod = 2 * time.Second

// HousekeeperOptions are what a Housekeeper reads and drives. Every
// interface but Desired, Workers and Statuses may be nil: what it would do
// is then left out.
type HousekeeperOptions struct {
	Desired Desired
	// Sources are the names of the sources that must all have delivered
	// their pods before anything is removed.
	Sources  []string
	Workers  Workers
	Statuses Statuses
	Admitter *Admitter
	Runtime  RuntimePods
	Remover  PodRemover
	// Resources releases pod resources outside the runtime.
	Resources ResourceCleaner
	// Journal's entries of pods no source wants and no worker knows are
	// dropped.
	Journal Journal
	// Mirrors keeps mirror pods in step (cluster mode).
	Mirrors MirrorSyncer
	// Loop is told when each pass starts (the syncloop health check).
	Loop interface{ Enter() }
	// Clock drives the period; the real clock when nil.
	Clock clock.WithTicker
}

// Housekeeper removes what no source wants any more. Every pass, once every
// source has delivered its pods: mirror pods are brought in step, the
// statuses of pods nobody knows are dropped, and, once the runtime has been
// listed successfully, running pods no source wants and no worker knows
// (orphans, e.g. left from before a restart) are handed to the workers to
// stop, stopped ones are removed from the runtime, and the resources of
// pods that no source, no worker and the runtime do not know are released.
type Housekeeper struct {
	opts HousekeeperOptions
	// kinds remembers pod kinds for the pod count metrics; used by the
	// loop's goroutine only.
	kinds podKinds
}

// NewHousekeeper returns a Housekeeper; it has no side effects.
func NewHousekeeper(opts HousekeeperOptions) *Housekeeper {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Housekeeper{opts: opts}
}

// Run does a pass every HousekeepingPeriod until ctx is done.
func (h *Housekeeper) Run(ctx context.Context) error {
	t := h.opts.Clock.NewTicker(HousekeepingPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if h.opts.Loop != nil {
				h.opts.Loop.Enter()
			}
			h.Once(ctx)
			h.recordPodCounts()
		}
	}
}

// Once is one pass. It must not run concurrently with itself.
func (h *Housekeeper) Once(ctx context.Context) {
	// Until every source has delivered its pods, any pod could still be
	// wanted: removing it would restart it needlessly.
	if !h.opts.Desired.SeenAllSources(h.opts.Sources...) {
		return
	}
	logger := klog.FromContext(ctx)
	if h.opts.Mirrors != nil {
		if err := h.opts.Mirrors.SyncMirrors(ctx); err != nil {
			logger.V(2).Info("Mirror pods not in sync yet", "err", err)
		}
	}
	want := map[types.UID]bool{}
	for _, p := range h.opts.Desired.Pods() {
		want[p.UID] = true
	}
	for _, uid := range h.opts.Statuses.UIDs() {
		if !want[uid] && !h.opts.Workers.Known(uid) {
			h.opts.Statuses.RemovePod(uid)
			if h.opts.Admitter != nil {
				h.opts.Admitter.Forget(uid)
			}
		}
	}
	if h.opts.Journal != nil {
		for _, uid := range h.opts.Journal.Pods() {
			if !want[uid] && !h.opts.Workers.Known(uid) {
				h.opts.Journal.Forget(uid)
			}
		}
	}
	// Until a relist succeeded, nothing is known of what runs, and while
	// the runtime fails what is known may be stale: a running pod's
	// directories, volumes and cgroups would look orphaned.
	if h.opts.Runtime == nil {
		return
	}
	pods, ok := h.opts.Runtime.Relisted()
	if !ok {
		logger.V(2).Info("Housekeeping waits for a successful relist of the runtime's pods")
		return
	}
	seen := map[types.UID]bool{}
	for _, rp := range pods {
		seen[rp.UID] = true
		if want[rp.UID] || h.opts.Workers.Known(rp.UID) {
			continue
		}
		if PodRuns(rp) {
			logger.Info("Stopping pod that no source wants", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
			h.kinds.markRuntimeOnly(rp.UID)
			h.opts.Workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: OrphanPod(rp)})
			continue
		}
		if h.opts.Remover == nil {
			continue
		}
		if err := h.opts.Remover.RemovePod(ctx, rp.UID); err != nil {
			logger.Error(err, "Failed to remove pod", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		}
	}
	h.cleanupResources(ctx, want, seen)
}

// cleanupResources releases the resources (directories, volumes, cgroups)
// of pods that neither a source, the runtime nor a worker knows: left
// behind when a pod was deleted while heartlet was down, as upstream cleans
// orphaned pod directories and cgroups.
func (h *Housekeeper) cleanupResources(ctx context.Context, want, seen map[types.UID]bool) {
	if h.opts.Resources == nil {
		return
	}
	logger := klog.FromContext(ctx)
	uids, err := h.opts.Resources.PodsWithResources(ctx)
	if err != nil {
		logger.Error(err, "Failed to list the resources of pods")
	}
	for _, uid := range uids {
		if want[uid] || seen[uid] || h.opts.Workers.Known(uid) {
			continue
		}
		logger.V(2).Info("Removing resources of orphaned pod", "podUID", uid)
		if err := h.opts.Resources.CleanupPod(ctx, uid); err != nil {
			logger.Info("Resources of orphaned pod not removed yet, will retry", "podUID", uid, "err", err)
		}
	}
}

// recordPodCounts sets the desired, active, mirror and working pods
// gauges once every source has delivered its pods.
func (h *Housekeeper) recordPodCounts() {
	if !h.opts.Desired.SeenAllSources(h.opts.Sources...) {
		return
	}
	metrics.SetPodCounts(h.podCounts())
}

// podCounts are the pod gauges' values now.
func (h *Housekeeper) podCounts() metrics.PodCounts {
	mirrors := 0
	if h.opts.Mirrors != nil {
		mirrors = h.opts.Mirrors.MirrorCount()
	}
	var active []*v1.Pod
	if h.opts.Admitter != nil {
		active = h.opts.Admitter.Active("")
	}
	return h.kinds.counts(h.opts.Desired.Pods(), active, h.opts.Workers.Pods(), mirrors)
}

// PodRuns tells whether anything of the pod still runs: a ready sandbox, or
// a running or created container.
func PodRuns(rp *runtime.PodStatus) bool {
	for _, s := range rp.Sandboxes {
		if s.State == runtime.SandboxReady {
			return true
		}
	}
	for _, c := range rp.Containers {
		if c.State == runtime.ContainerRunning || c.State == runtime.ContainerCreated {
			return true
		}
	}
	return false
}

// OrphanPod is the minimal pod object the workers need to stop a pod known
// only from the runtime: its identity from the labels and the termination
// grace period its containers were started with.
func OrphanPod(rp *runtime.PodStatus) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
	for _, c := range rp.Containers {
		if g, err := strconv.ParseInt(c.Annotations[runtime.AnnotationGrace], 10, 64); err == nil && g >= 0 {
			pod.Spec.TerminationGracePeriodSeconds = &g
			break
		}
	}
	return pod
}
