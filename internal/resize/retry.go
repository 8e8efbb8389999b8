package resize

import (
	"cmp"
	"context"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/qos"
)

// Triggers of a retry of the deferred resizes: the retry_trigger label of
// kubelet_pod_deferred_accepted_resizes_total, as upstream.
const (
	// TriggerPodResized: another pod's accepted resize lowered its
	// requests.
	TriggerPodResized = "pod_resized"
	// TriggerPodUpdated: the pod's own sync decided it (its spec changed,
	// or its resync came).
	TriggerPodUpdated = "pod_updated"
	// TriggerPodTerminated: another pod stopped and gave back what it was
	// allocated.
	TriggerPodTerminated = "pod_terminated"
	// TriggerPeriodic: the periodic retry.
	TriggerPeriodic = "periodic_retry"
)

// Delays of the periodic retry, as upstream: the first after
// initialRetryDelay, then retryDelay after each retry, whatever
// triggered it.
const (
	initialRetryDelay = 30 * time.Second
	retryDelay        = 3 * time.Minute
)

// Run retries the deferred resizes periodically, and after the pods that
// Forget names stopped, until ctx ends; it returns nil then.
func (m *Manager) Run(ctx context.Context) error {
	delay := initialRetryDelay
	for {
		t := m.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-m.terminated:
			t.Stop()
			m.retry(ctx, TriggerPodTerminated)
		case <-m.retried:
			// Another trigger retried: the period starts again.
			t.Stop()
		case <-t.C():
			m.retry(ctx, TriggerPeriodic)
		}
		delay = retryDelay
	}
}

// RetryPendingResizes decides again every deferred resize, in upstream's
// priority order (resizes that do not increase requests first, then by
// pod priority, Guaranteed before the others, the longest deferred
// first), so that what was freed goes to the first that fits. An
// accepted resize, or a changed PodResizePending condition, asks the
// pod's worker for a sync (Options.Resync) that applies and reports it.
func (m *Manager) RetryPendingResizes(ctx context.Context, trigger string) {
	m.retry(ctx, trigger)
	select {
	case m.retried <- struct{}{}:
	default:
	}
}

// retry is RetryPendingResizes without telling Run.
func (m *Manager) retry(ctx context.Context, trigger string) {
	logger := klog.FromContext(ctx)
	m.allocMu.Lock()
	pods := m.activePods()
	m.sortPending(pods)
	var resync []types.UID
	var still []types.UID
	for _, uid := range m.pending {
		pod, ok := pods[uid]
		if !ok {
			continue
		}
		before := m.pendingCondition(uid)
		out, _, err := m.allocateLocked(ctx, pod, trigger)
		if err != nil {
			logger.Error(err, "Failed to retry a pod resize", "pod", klog.KObj(pod), "podUID", uid)
			still = append(still, uid)
			continue
		}
		if out == Deferred {
			still = append(still, uid)
		}
		if out == Accepted || !sameCondition(before, m.pendingCondition(uid)) {
			resync = append(resync, uid)
		}
	}
	m.pending = still
	m.allocMu.Unlock()

	if m.opts.Resync != nil {
		for _, uid := range resync {
			m.opts.Resync(uid)
		}
	}
}

// pushPending queues a deferred resize; allocMu is held.
func (m *Manager) pushPending(uid types.UID) {
	if !slices.Contains(m.pending, uid) {
		m.pending = append(m.pending, uid)
	}
}

// dropPending removes uid from the deferred resizes; allocMu is held.
func (m *Manager) dropPending(uid types.UID) {
	m.pending = slices.DeleteFunc(m.pending, func(u types.UID) bool { return u == uid })
}

// sortPending orders the deferred resizes by upstream's priority;
// allocMu is held. Pods no longer known are dropped.
func (m *Manager) sortPending(pods map[types.UID]*v1.Pod) {
	m.pending = slices.DeleteFunc(m.pending, func(u types.UID) bool { return pods[u] == nil })
	key := func(uid types.UID) (increasing bool, priority int32, guaranteed bool, since *time.Time) {
		pod := pods[uid]
		if a, ok := m.opts.Store.Get(uid); ok {
			increasing = increasesRequests(pod, a)
		}
		if pod.Spec.Priority != nil {
			priority = *pod.Spec.Priority
		}
		guaranteed = qos.Class(pod) == v1.PodQOSGuaranteed
		if c := m.pendingCondition(uid); c != nil {
			t := c.LastTransitionTime.Time
			since = &t
		}
		return
	}
	slices.SortStableFunc(m.pending, func(a, b types.UID) int {
		ia, pa, ga, sa := key(a)
		ib, pb, gb, sb := key(b)
		if ia != ib {
			if !ia {
				return -1
			}
			return 1
		}
		if pa != pb {
			return cmp.Compare(pb, pa)
		}
		if ga != gb {
			if ga {
				return -1
			}
			return 1
		}
		switch {
		case sa == nil && sb == nil:
			return 0
		case sa == nil:
			return 1
		case sb == nil:
			return -1
		}
		return sa.Compare(*sb)
	})
}

// increasesRequests reports whether the pod's spec asks for more cpu or
// memory than it was allocated (alloc).
func increasesRequests(pod *v1.Pod, alloc Allocation) bool {
	old, _ := qos.PodRequestsAndLimits(WithAllocation(pod, alloc))
	next, _ := qos.PodRequestsAndLimits(pod)
	return next.Cpu().Cmp(*old.Cpu()) > 0 || next.Memory().Cmp(*old.Memory()) > 0
}

// lowersRequests reports whether next asks for less cpu or memory than
// old for some container of pod.
func lowersRequests(pod *v1.Pod, old, next Allocation) bool {
	a, _ := qos.PodRequestsAndLimits(WithAllocation(pod, old))
	b, _ := qos.PodRequestsAndLimits(WithAllocation(pod, next))
	return b.Cpu().Cmp(*a.Cpu()) < 0 || b.Memory().Cmp(*a.Memory()) < 0
}

// activePods are the node's pods that hold what they were allocated, by
// UID: known (Options.Pods), not in a terminal phase, not stopped for
// good (Forget), and admitted (with an allocation).
func (m *Manager) activePods() map[types.UID]*v1.Pod {
	out := map[types.UID]*v1.Pod{}
	if m.opts.Pods == nil {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[types.UID]bool{}
	for _, p := range m.opts.Pods() {
		seen[p.UID] = true
		if m.gone[p.UID] || isTerminal(p) {
			continue
		}
		if _, ok := m.opts.Store.Get(p.UID); !ok {
			continue
		}
		out[p.UID] = p
	}
	for uid := range m.gone {
		if !seen[uid] {
			delete(m.gone, uid)
		}
	}
	return out
}

func isTerminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

func sameCondition(a, b *v1.PodCondition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Reason == b.Reason && a.Message == b.Message
}
