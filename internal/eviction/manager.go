package eviction

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/qos"
)

// Upstream's reasons, messages and timings.
const (
	// Reason is the evicted pod's status reason, the reason of the event
	// on it, and the reason of a pod refused under pressure.
	Reason = "Evicted"
	// ReasonThresholdMet is the reason of the event on the node when a
	// threshold makes heartlet evict.
	ReasonThresholdMet = "EvictionThresholdMet"
	// DefaultInterval is how often the signals are read (upstream's
	// housekeeping interval).
	DefaultInterval = 10 * time.Second
	// DefaultCleanupTimeout is how long a pass waits at most for the last
	// evicted pod to stop before it evicts another one.
	DefaultCleanupTimeout = 30 * time.Second
	// waitInterval is how often the signals are read while an evicted pod
	// stops.
	waitInterval = time.Second
	// settlePeriod is how long after an evicted pod is cleaned up no other
	// is evicted, so that the next decision reads stats collected after
	// its memory and disk were released (the stats are cached for 1 s).
	settlePeriod = 2 * time.Second
	// hardGracePeriod is the grace period of a pod evicted for a hard
	// threshold, in seconds.
	hardGracePeriod int64 = 1
	// systemCriticalPriority is the priority from which a pod is
	// critical, as upstream's scheduling API defines it.
	systemCriticalPriority int32 = 2000000000
	// reasonTerminationByKubelet is the DisruptionTarget condition's
	// reason on an evicted pod.
	reasonTerminationByKubelet = "TerminationByKubelet"
	// memoryPressureTaint is the taint the node lifecycle controller puts
	// on a node under memory pressure; a BestEffort pod that tolerates it
	// is admitted under memory pressure.
	memoryPressureTaint = "node.kubernetes.io/memory-pressure"
)

// Options configure a Manager.
type Options struct {
	// Thresholds are from ParseThresholds.
	Thresholds []Threshold
	// TransitionPeriod is how long a pressure condition is held after its
	// signal recovered (evictionPressureTransitionPeriod).
	TransitionPeriod time.Duration
	// MaxPodGracePeriod is the longest grace period in seconds of a pod
	// evicted for a soft threshold (evictionMaxPodGracePeriod); the pod's
	// own is used when shorter or when MaxPodGracePeriod is negative.
	MaxPodGracePeriod int32
	// Interval is how often the signals are read; default DefaultInterval.
	Interval time.Duration
	// CleanupTimeout is how long to wait for an evicted pod to stop before
	// the next eviction; default DefaultCleanupTimeout.
	CleanupTimeout time.Duration

	Summary  SummaryProvider
	Pods     Pods
	Workers  WorkerKiller
	Statuses Statuses
	// Recorder and Node (the node's reference for its events) may be nil.
	Recorder Recorder
	Node     *v1.ObjectReference
	Clock    clock.WithTicker
	// LocalStorageCapacityIsolation evicts the pods exceeding their
	// local storage limits (LocalStorageViolations) before any threshold
	// is acted on, as upstream (localStorageCapacityIsolation).
	LocalStorageCapacityIsolation bool
	// Reclaimable, when set, makes memory.available count the node's
	// reclaimable memory too (see ReclaimableMemory); nil keeps upstream's
	// signal.
	Reclaimable ReclaimableReader
	// PSIBound is ReclaimableMemory's pressure bound; default
	// DefaultPSIBound.
	PSIBound float64
	// MemoryNotifier, when set, is armed after every pass at the usage
	// where a memory.available threshold would be crossed, and a pass
	// runs as soon as it fires (kernelMemcgNotification). Run closes it.
	MemoryNotifier MemoryNotifier
	// AllocatableNotifier, likewise, is armed on the kubepods cgroup at
	// the usage where an allocatableMemory.available threshold would be
	// crossed.
	AllocatableNotifier MemoryNotifier
	// Reclaimer, when set, frees disk (dead containers, unused images)
	// before a pod is evicted for a disk signal (reclaim.go).
	Reclaimer NodeReclaimer
}

// Manager is the eviction manager. Its pressure conditions and Admit are
// safe for concurrent use; passes run in Run's goroutine.
type Manager struct {
	opts Options

	// Pass state, used by one goroutine at a time.
	met           []Threshold          // thresholds met past their grace period in the last pass
	firstObserved map[string]time.Time // by Threshold.key
	victim        types.UID            // the last evicted pod until it is cleaned up
	victimUntil   time.Time
	settleUntil   time.Time         // no eviction before, after the victim's clean-up
	last          *statsapi.Summary // of the last pass
	reclaim       reclaimState

	mu         sync.Mutex
	conditions map[v1.NodeConditionType]time.Time // last observed, within the transition period
}

// New returns a Manager; it has no side effects.
func New(opts Options) *Manager {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.CleanupTimeout <= 0 {
		opts.CleanupTimeout = DefaultCleanupTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{opts: opts, firstObserved: map[string]time.Time{}, conditions: map[v1.NodeConditionType]time.Time{}}
}

// Run reads the signals every Interval (every second while an evicted pod
// stops) and acts on them until ctx is done. Without thresholds, and
// without LocalStorageCapacityIsolation, it only waits for ctx. The first
// pass comes one Interval after the start, so that the pods a restarted
// heartlet adopts pass admission before any pressure is reported.
func (m *Manager) Run(ctx context.Context) error {
	if len(m.opts.Thresholds) == 0 && !m.opts.LocalStorageCapacityIsolation {
		<-ctx.Done()
		return nil
	}
	logger := klog.FromContext(ctx)
	var notified, allocNotified <-chan struct{}
	if n := m.opts.MemoryNotifier; n != nil {
		notified = n.C()
		defer closeNotifier(logger, n)
	}
	if n := m.opts.AllocatableNotifier; n != nil {
		allocNotified = n.C()
		defer closeNotifier(logger, n)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-m.opts.Clock.After(m.opts.Interval):
	}
	// followUp: the pass after a notification reads stats that may
	// predate the crossing (the summary is cached up to a second), and the
	// kernel notifies once per crossing: one more pass follows a second
	// later.
	followUp := false
	for {
		if err := m.Synchronize(ctx); err != nil {
			logger.Error(err, "Eviction manager: pass failed")
		}
		armNotifier(ctx, m.opts.MemoryNotifier, MemoryUsageThreshold, m.opts.Thresholds, m.last)
		armNotifier(ctx, m.opts.AllocatableNotifier, AllocatableUsageThreshold, m.opts.Thresholds, m.last)
		d := m.opts.Interval
		if m.victim != "" || m.opts.Clock.Now().Before(m.settleUntil) || followUp {
			d = waitInterval
		}
		followUp = false
		// A timer stopped when a notification wins: no stale timer lingers
		// until its interval ends.
		t := m.opts.Clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-notified:
			logger.V(2).Info("Eviction manager: memory threshold crossed")
			followUp = true
		case <-allocNotified:
			logger.V(2).Info("Eviction manager: allocatable memory threshold crossed")
			followUp = true
		case <-t.C():
		}
		t.Stop()
	}
}

// armNotifier arms n, when set, at the usage threshold computes from the
// last pass's summary.
func armNotifier(ctx context.Context, n MemoryNotifier, threshold func([]Threshold, *statsapi.Summary) (uint64, bool), ts []Threshold, s *statsapi.Summary) {
	if n == nil {
		return
	}
	if usage, ok := threshold(ts, s); ok {
		if err := n.Arm(ctx, usage); err != nil {
			klog.FromContext(ctx).Error(err, "Eviction manager: memory threshold notification not armed")
		}
	}
}

func closeNotifier(logger klog.Logger, n MemoryNotifier) {
	if err := n.Close(); err != nil {
		logger.Error(err, "Eviction manager: closing the memory notification failed")
	}
}

// Synchronize is one pass: read the signals, update the thresholds met
// and the pressure conditions, and evict at most one pod for the first
// threshold met past its grace period, unless the pod evicted before is
// not cleaned up yet (waited for at most CleanupTimeout) or was cleaned
// up less than settlePeriod ago.
func (m *Manager) Synchronize(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	now := m.opts.Clock.Now()
	// The node's signals, and the usage of the pods a local storage limit
	// applies to: not every pod's, which only ranking needs.
	limited := map[types.UID]bool{}
	if m.opts.LocalStorageCapacityIsolation {
		for _, p := range m.candidates() {
			limited[p.UID] = HasLocalStorageLimit(p)
		}
	}
	summary, err := m.opts.Summary.SummaryOf(ctx, func(uid types.UID) bool { return limited[uid] })
	if err != nil {
		return fmt.Errorf("eviction: read the node's stats: %w", err)
	}
	m.last = summary
	obs := m.reclaimable(ctx, Observe(summary))
	met := ThresholdsMet(m.opts.Thresholds, obs, false)
	if len(m.met) > 0 {
		// A threshold that caused evictions is met until its signal is
		// back above it by the minimum reclaim.
		met = mergeThresholds(met, ThresholdsMet(m.met, obs, true))
	}
	m.firstObserved = FirstObserved(met, m.firstObserved, now)
	m.mu.Lock()
	m.conditions = Conditions(met, m.conditions, m.opts.TransitionPeriod, now)
	m.mu.Unlock()
	active := PastGracePeriod(met, m.firstObserved, now)
	m.met = active
	if m.victim != "" {
		switch {
		case m.opts.Workers.Cleaned(m.victim):
			m.victim, m.settleUntil = "", now.Add(settlePeriod)
		case !now.Before(m.victimUntil):
			m.victim = ""
		}
	}
	if len(active) == 0 && !m.opts.LocalStorageCapacityIsolation {
		return nil
	}
	if m.victim != "" || now.Before(m.settleUntil) {
		if m.victim != "" {
			logger.V(2).Info("Eviction manager: waiting for the evicted pod to be cleaned up", "podUID", m.victim)
		} else {
			logger.V(2).Info("Eviction manager: waiting for fresh stats after an eviction")
		}
		return nil
	}
	if m.opts.LocalStorageCapacityIsolation && m.evictLocalStorage(ctx, summary, now) {
		return nil
	}
	if len(active) == 0 {
		return nil
	}
	slices.SortStableFunc(active, func(a, b Threshold) int {
		return slices.Index(Signals, a.Signal) - slices.Index(Signals, b.Signal)
	})
	t := active[0]
	o := obs[t.Signal]
	logger.Info("Eviction manager: threshold met, attempting to reclaim", "signal", t.Signal,
		"threshold", t.Value.String(), "available", o.Available.String(), "hard", t.Hard)
	if m.opts.Recorder != nil && m.opts.Node != nil {
		m.opts.Recorder.Eventf(m.opts.Node, v1.EventTypeWarning, ReasonThresholdMet, "Attempting to reclaim %s", ResourceOf(t.Signal))
	}
	if m.reclaimNodeLevel(ctx, t.Signal) {
		return nil
	}
	all, err := m.opts.Summary.Summary(ctx, false)
	if err != nil {
		return fmt.Errorf("eviction: read the pods' stats: %w", err)
	}
	stats := PodStatsOf(all)
	candidates := m.candidates()
	for _, pod := range Rank(t.Signal, candidates, m.reclaimablePodStats(ctx, t.Signal, candidates, stats)) {
		if IsCritical(pod) {
			continue
		}
		m.evict(ctx, t, o, pod, stats, now)
		return nil
	}
	logger.Info("Eviction manager: no pod to evict", "signal", t.Signal)
	return nil
}

// candidates are the desired pods that run: their worker is syncing.
func (m *Manager) candidates() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range m.opts.Pods.Pods() {
		if st, ok := m.opts.Workers.State(p.UID); ok && st == podworker.StateSyncing {
			out = append(out, p)
		}
	}
	return out
}

// evict reports the pod Failed with reason Evicted, records the event and
// the metric, and kills it through the workers.
func (m *Manager) evict(ctx context.Context, t Threshold, o Observation, pod *v1.Pod, stats PodStats, now time.Time) {
	m.evictPod(ctx, pod, t.Signal, Message(t, o, pod, stats), m.gracePeriod(t, pod), true, now)
}

// evictPod reports the pod Failed with reason Evicted and message msg
// (with the DisruptionTarget condition when disruption is set), records
// the event and counts the eviction under signal, and kills it through
// the workers within grace (nil: the pod's own).
func (m *Manager) evictPod(ctx context.Context, pod *v1.Pod, signal Signal, msg string, grace *int64, disruption bool, now time.Time) {
	klog.FromContext(ctx).Info("Eviction manager: evicting pod", "pod", klog.KObj(pod), "podUID", pod.UID, "signal", signal, "message", msg)
	st, ok := m.opts.Statuses.GetPodStatus(pod.UID)
	if !ok {
		st = *pod.Status.DeepCopy()
	}
	st.Phase, st.Reason, st.Message = v1.PodFailed, Reason, msg
	if disruption {
		cond := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: reasonTerminationByKubelet, Message: msg}
		if i := slices.IndexFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget }); i >= 0 {
			st.Conditions[i] = cond
		} else {
			st.Conditions = append(st.Conditions, cond)
		}
	}
	m.opts.Statuses.SetPodStatus(pod, st)
	if m.opts.Recorder != nil {
		m.opts.Recorder.Eventf(pod, v1.EventTypeWarning, Reason, "%s", msg)
	}
	m.opts.Workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: pod, GracePeriod: grace, Keep: true})
	metrics.Evictions.WithLabelValues(string(signal)).Inc()
	m.victim, m.victimUntil = pod.UID, now.Add(m.opts.CleanupTimeout)
}

// gracePeriod is the evicted pod's grace period: hardGracePeriod for a
// hard threshold; for a soft one MaxPodGracePeriod or the pod's own when
// shorter (nil: the pod's own).
func (m *Manager) gracePeriod(t Threshold, pod *v1.Pod) *int64 {
	if t.Hard {
		g := hardGracePeriod
		return &g
	}
	if m.opts.MaxPodGracePeriod < 0 {
		return nil
	}
	g := int64(m.opts.MaxPodGracePeriod)
	if p := pod.Spec.TerminationGracePeriodSeconds; p != nil && *p < g {
		g = *p
	}
	return &g
}

// IsCritical tells whether a pod is never evicted nor refused under
// pressure: a static pod, a mirror pod, or a pod of system-critical
// priority.
func IsCritical(pod *v1.Pod) bool {
	if podconfig.IsStatic(pod) {
		return true
	}
	if _, ok := pod.Annotations[podconfig.AnnotationConfigMirror]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

func (m *Manager) hasCondition(c v1.NodeConditionType) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.conditions[c]
	return ok
}

// MemoryPressure tells whether the node reports MemoryPressure.
func (m *Manager) MemoryPressure() bool { return m.hasCondition(v1.NodeMemoryPressure) }

// DiskPressure tells whether the node reports DiskPressure.
func (m *Manager) DiskPressure() bool { return m.hasCondition(v1.NodeDiskPressure) }

// PIDPressure tells whether the node reports PIDPressure.
func (m *Manager) PIDPressure() bool { return m.hasCondition(v1.NodePIDPressure) }

// Admit decides on a new pod under pressure, as upstream: without
// pressure, or for a critical pod, it admits; under memory pressure alone
// it admits every pod but a BestEffort one that does not tolerate the
// memory-pressure taint; under any other pressure it refuses every pod,
// with reason Evicted.
func (m *Manager) Admit(pod *v1.Pod) admission.Result {
	m.mu.Lock()
	conds := make([]v1.NodeConditionType, 0, len(m.conditions))
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if _, ok := m.conditions[c]; ok {
			conds = append(conds, c)
		}
	}
	m.mu.Unlock()
	return AdmitUnder(conds, pod)
}

// AdmitUnder is Admit's decision for the node's pressure conditions.
func AdmitUnder(conds []v1.NodeConditionType, pod *v1.Pod) admission.Result {
	if len(conds) == 0 || IsCritical(pod) {
		return admission.Result{Admit: true}
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if qos.Class(pod) != v1.PodQOSBestEffort || toleratesMemoryPressure(pod) {
			return admission.Result{Admit: true}
		}
	}
	return admission.Result{Reason: Reason, Message: fmt.Sprintf("The node had condition: %v. ", conds)}
}

func toleratesMemoryPressure(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: memoryPressureTaint, Effect: v1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}
