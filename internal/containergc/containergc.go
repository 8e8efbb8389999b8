// Package containergc removes dead containers and sandboxes from the
// container runtime, as the upstream kubelet's container garbage
// collection does: every minute, containers that are not running beyond
// the policy (minimum age, the newest maxPerPodContainer kept per pod and
// container name, at most maxContainers on the node), with their log
// files, every dead container of a pod that no longer exists, and the
// sandboxes that are not ready and hold no container.
//
// Unlike upstream it never removes, while the pod exists, the newest dead
// instance of a container (the pod's status reports its lastState and
// restart count from it) nor a created container that has not started
// yet (its pod worker is about to start it).
//
// Plan decides as a pure function; GC performs the plan through the
// interfaces of types.go.
package containergc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/errdefs"
	hrt "github.com/heartlet/heartlet/internal/runtime"
)

// Upstream's period and event reason.
const (
	// DefaultPeriod is how often container garbage collection runs.
	DefaultPeriod = time.Minute
	// ReasonContainerGCFailed is the event on the node of a failed pass.
	ReasonContainerGCFailed = "ContainerGCFailed"
)

// Policy is upstream's container garbage collection policy.
type Policy struct {
	// MinAge is the age, from its creation, below which a dead container
	// is kept (minimum-container-ttl-duration).
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of one container of
	// an existing pod are kept, newest first; negative means no limit;
	// below 1 means 1 (maximum-dead-containers-per-container).
	MaxPerPodContainer int
	// MaxContainers is how many dead containers the node keeps at most;
	// negative means no limit. The newest dead instance of each container
	// of an existing pod is kept even above it (maximum-dead-containers).
	MaxContainers int
}

// DefaultPolicy is upstream's default: no minimum age, one dead instance
// per container, no node-wide limit.
func DefaultPolicy() Policy {
	return Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
}

// Removal is one pass's plan: containers by pod, then sandboxes.
type Removal struct {
	// Containers are the IDs of the containers to remove, by pod.
	Containers map[types.UID][]string
	// Sandboxes are the IDs of the sandboxes to remove once the
	// containers are gone.
	Sandboxes []string
}

// unit is one container of one pod: its dead instances are counted
// together.
type unit struct {
	uid  types.UID
	name string
}

// Plan decides what one pass removes from pods (as Runtime.ListPods
// returns them): gone tells which pods no longer exist, now is the time
// of the pass.
func Plan(pods []*hrt.PodStatus, p Policy, gone func(types.UID) bool, now time.Time) Removal {
	// Dead containers by unit, newest first (ListPods' order).
	dead := map[unit][]*hrt.ContainerStatus{}
	var units []unit
	for _, pod := range pods {
		podGone := gone(pod.UID)
		for _, c := range pod.Containers {
			if c.State == hrt.ContainerRunning {
				continue
			}
			if c.State == hrt.ContainerCreated && !podGone {
				continue
			}
			if p.MinAge > 0 && now.Sub(c.CreatedAt) < p.MinAge {
				continue
			}
			u := unit{pod.UID, c.Name}
			if dead[u] == nil {
				units = append(units, u)
			}
			dead[u] = append(dead[u], c)
		}
	}
	out := Removal{Containers: map[types.UID][]string{}}
	remove := func(u unit, cs []*hrt.ContainerStatus) {
		for _, c := range cs {
			out.Containers[u.uid] = append(out.Containers[u.uid], c.ID)
		}
	}
	// keep trims every unit to n, at least 1 for an existing pod's.
	keep := func(n int) {
		for _, u := range units {
			k := n
			if gone(u.uid) {
				k = 0
			} else if k < 1 {
				k = 1
			}
			if cs := dead[u]; len(cs) > k {
				remove(u, cs[k:])
				dead[u] = cs[:k]
			}
		}
	}
	if p.MaxPerPodContainer >= 0 {
		keep(p.MaxPerPodContainer)
	} else {
		// No per-container limit: only the gone pods' containers go here.
		for _, u := range units {
			if gone(u.uid) {
				remove(u, dead[u])
				dead[u] = nil
			}
		}
	}
	if p.MaxContainers >= 0 {
		total := 0
		for _, u := range units {
			total += len(dead[u])
		}
		if total > p.MaxContainers {
			live := 0
			for _, u := range units {
				if len(dead[u]) > 0 {
					live++
				}
			}
			keep(p.MaxContainers / max(live, 1))
			// Then the oldest, the newest instance of each unit aside.
			var rest []*hrt.ContainerStatus
			owner := map[string]unit{}
			total = 0
			for _, u := range units {
				total += len(dead[u])
				for _, c := range dead[u][min(1, len(dead[u])):] {
					rest = append(rest, c)
					owner[c.ID] = u
				}
			}
			sort.SliceStable(rest, func(i, j int) bool { return rest[i].CreatedAt.Before(rest[j].CreatedAt) })
			for _, c := range rest {
				if total <= p.MaxContainers {
					break
				}
				remove(owner[c.ID], []*hrt.ContainerStatus{c})
				total--
			}
		}
	}
	removed := map[string]bool{}
	for _, ids := range out.Containers {
		for _, id := range ids {
			removed[id] = true
		}
	}
	for _, pod := range pods {
		left := map[string]int{}
		for _, c := range pod.Containers {
			if !removed[c.ID] {
				left[c.SandboxID]++
			}
		}
		podGone := gone(pod.UID)
		for i, sb := range pod.Sandboxes {
			if sb.State == hrt.SandboxReady || left[sb.ID] > 0 {
				continue
			}
			if i == 0 && !podGone {
				// An existing pod keeps its newest sandbox.
				continue
			}
			out.Sandboxes = append(out.Sandboxes, sb.ID)
		}
	}
	return out
}

// Options configure a GC.
type Options struct {
	Policy Policy
	// LogsDir is the pod logs directory (podLogsDir): a removed
	// container's log files are removed only below it.
	LogsDir string
	// Period is how often Run collects; default DefaultPeriod.
	Period   time.Duration
	Clock    clock.WithTicker
	Recorder Recorder
	Node     *v1.ObjectReference
}

// Result counts what a pass removed.
type Result struct {
	Containers int
	Sandboxes  int
}

// GC is container garbage collection. Passes are serialized.
type GC struct {
	rt   Runtime
	pods Pods
	opts Options
	mu   sync.Mutex
}

// New returns a GC; it starts nothing.
func New(rt Runtime, pods Pods, opts Options) *GC {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Period <= 0 {
		opts.Period = DefaultPeriod
	}
	return &GC{rt: rt, pods: pods, opts: opts}
}

// Run collects every Period until ctx is done, the first time one Period
// after the start. A failed pass records ContainerGCFailed on the node.
func (g *GC) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	t := g.opts.Clock.NewTicker(g.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		res, err := g.GarbageCollect(ctx)
		if err != nil {
			logger.Error(err, "Container garbage collection failed")
			if g.opts.Recorder != nil && g.opts.Node != nil {
				g.opts.Recorder.Eventf(g.opts.Node, v1.EventTypeWarning, ReasonContainerGCFailed, "%s", err.Error())
			}
			continue
		}
		logger.V(4).Info("Container garbage collection succeeded", "containers", res.Containers, "sandboxes", res.Sandboxes)
	}
}

// GarbageCollect is one pass with the policy.
func (g *GC) GarbageCollect(ctx context.Context) (Result, error) {
	return g.collect(ctx, g.opts.Policy)
}

// DeleteAllUnusedContainers is node-level reclaim under disk pressure:
// one pass that removes every dead container but the newest instance of
// each container of an existing pod, whatever its age, and the sandboxes
// left empty.
func (g *GC) DeleteAllUnusedContainers(ctx context.Context) (Result, error) {
	return g.collect(ctx, Policy{MaxPerPodContainer: 1, MaxContainers: -1})
}

func (g *GC) collect(ctx context.Context, p Policy) (Result, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pods, err := g.rt.ListPods(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("container garbage collection: %w", err)
	}
	ready := g.pods.SourcesReady()
	seen := map[types.UID]bool{}
	gone := func(uid types.UID) bool {
		v, ok := seen[uid]
		if !ok {
			v = ready && !g.pods.Desired(uid) && !g.pods.Known(uid)
			seen[uid] = v
		}
		return v
	}
	plan := Plan(pods, p, gone, g.opts.Clock.Now())
	var res Result
	var errs []error
	uids := make([]types.UID, 0, len(plan.Containers))
	for uid := range plan.Containers {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, uid := range uids {
		n, err := g.removeContainers(ctx, uid, plan.Containers[uid])
		res.Containers += n
		errs = append(errs, err)
	}
	for _, id := range plan.Sandboxes {
		if err := g.rt.RemovePodSandbox(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", id, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("Removed dead sandbox", "sandbox", id)
		res.Sandboxes++
	}
	return res, errors.Join(errs...)
}

// removeContainers removes the containers ids of pod uid and their log
// files.
func (g *GC) removeContainers(ctx context.Context, uid types.UID, ids []string) (int, error) {
	logger := klog.FromContext(ctx)
	logs := map[string]string{}
	if st, err := g.rt.GetPodStatus(ctx, uid); err != nil {
		logger.V(2).Info("Log paths of dead containers unknown; their logs stay", "podUID", uid, "err", err)
	} else {
		for _, c := range st.Containers {
			logs[c.ID] = c.LogPath
		}
	}
	n := 0
	var errs []error
	for _, id := range ids {
		if err := g.rt.RemoveContainer(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove container %s of pod %s: %w", id, uid, err))
			continue
		}
		n++
		logger.V(2).Info("Removed dead container", "podUID", uid, "containerID", id)
		if err := RemoveLogs(g.opts.LogsDir, logs[id]); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// RemoveLogs removes a removed container's log file (path, as the runtime
// reports it) and its rotated files, only when they are below logsDir
// (podLogsDir); a path elsewhere is left alone.
func RemoveLogs(logsDir, path string) error {
	if path == "" || !within(logsDir, path) {
		return nil
	}
	rotated, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return fmt.Errorf("container log %s: %w", path, err)
	}
	var errs []error
	for _, p := range append([]string{path}, rotated...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove container log: %w", err))
		}
	}
	return errors.Join(errs...)
}

// within tells whether path is strictly below dir, both absolute.
func within(dir, path string) bool {
	if dir == "" || !filepath.IsAbs(dir) || !filepath.IsAbs(path) {
		return false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(path))
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(p)
}
