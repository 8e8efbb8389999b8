// Package podstartup measures how long pods take to start, for the
// kubelet_pod_start_duration_seconds, kubelet_pod_start_sli_duration_seconds
// and kubelet_pod_start_total_duration_seconds metrics. It is told when a
// pod is first seen and when its images are pulled, and watches the
// statuses heartlet computes.
package podstartup

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podspec"
)

// Tracker keeps the startup facts of pods that have not finished starting.
// It is safe for concurrent use.
type Tracker struct {
	clk clock.PassiveClock

	mu   sync.Mutex
	pods map[types.UID]*podState
}

type podState struct {
	firstSeen time.Time
	// pulling counts pulls in progress; pullStart is when the current
	// stretch of pulling began and pulled the total of finished stretches,
	// so that overlapping pulls count once.
	pulling   int
	pullStart time.Time
	pulled    time.Duration
	// running: the pod start duration was observed; started: the SLI and
	// total durations were.
	running, started bool
}

// New returns an empty tracker that reads time from clk.
func New(clk clock.PassiveClock) *Tracker {
	return &Tracker{clk: clk, pods: map[types.UID]*podState{}}
}

// Seen records that heartlet saw pod for the first time. Pods that some
// kubelet already started (their status has a start time, or they are
// terminal) are not tracked.
func (t *Tracker) Seen(pod *v1.Pod) {
	if pod.Status.StartTime != nil || podspec.IsTerminalPhase(pod.Status.Phase) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.pods[pod.UID]; !ok {
		t.pods[pod.UID] = &podState{firstSeen: t.clk.Now()}
	}
}

// Forget drops what is known of the pod.
func (t *Tracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// PullStarted records the start of an image pull for the pod.
func (t *Tracker) PullStarted(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.pods[uid]
	if s == nil {
		return
	}
	if s.pulling == 0 {
		s.pullStart = t.clk.Now()
	}
	s.pulling++
}

// PullFinished records the end, successful or not, of an image pull for
// the pod.
func (t *Tracker) PullFinished(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.pods[uid]
	if s == nil || s.pulling == 0 {
		return
	}
	s.pulling--
	if s.pulling == 0 {
		s.pulled += t.clk.Since(s.pullStart)
	}
}

// Observe looks at a status computed for pod. The first time the phase is
// Running it observes the time since the pod was first seen; the first
// time every app container runs it observes the time since the pod's
// creation (its first sighting when it has no creation time), and that
// time less image pulls and init containers for the SLI, which leaves
// out stateful pods as upstream does. Pods whose containers started
// before heartlet first saw them (adopted after a restart) are not
// measured.
func (t *Tracker) Observe(pod *v1.Pod, st *v1.PodStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.pods[pod.UID]
	if s == nil || (s.running && s.started) {
		return
	}
	if podspec.IsTerminalPhase(st.Phase) {
		delete(t.pods, pod.UID)
		return
	}
	now := t.clk.Now()
	if startedBefore(st, s.firstSeen.Truncate(time.Second)) {
		delete(t.pods, pod.UID)
		return
	}
	if !s.running && st.Phase == v1.PodRunning {
		s.running = true
		metrics.PodStartDuration.Observe(now.Sub(s.firstSeen).Seconds())
	}
	if s.started || !allStarted(pod, st) {
		return
	}
	s.started = true
	created := pod.CreationTimestamp.Time
	if created.IsZero() || created.After(s.firstSeen) {
		created = s.firstSeen
	}
	total := now.Sub(created)
	sli := total - s.pulled - initRuntime(st)
	metrics.PodStartTotalDuration.Observe(total.Seconds())
	stateful := isStateful(pod)
	if !stateful {
		metrics.PodStartSLIDuration.Observe(max(sli, 0).Seconds())
	}
	klog.Background().V(2).Info("Observed pod startup duration", "pod", klog.KObj(pod), "podUID", pod.UID,
		"podStartE2EDuration", total, "podStartSLOduration", sli, "imagePullingTime", s.pulled, "stateful", stateful)
}

// allStarted reports whether every app container of the pod runs.
func allStarted(pod *v1.Pod, st *v1.PodStatus) bool {
	if len(st.ContainerStatuses) < len(pod.Spec.Containers) {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// startedBefore reports whether a container of the status started before t.
func startedBefore(st *v1.PodStatus, t time.Time) bool {
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, cs := range list {
			if r := cs.State.Running; r != nil && !r.StartedAt.IsZero() && r.StartedAt.Time.Before(t) {
				return true
			}
			if tm := cs.State.Terminated; tm != nil && !tm.StartedAt.IsZero() && tm.StartedAt.Time.Before(t) {
				return true
			}
		}
	}
	return false
}

// initRuntime is the time the pod's init containers ran to completion.
func initRuntime(st *v1.PodStatus) time.Duration {
	var d time.Duration
	for _, cs := range st.InitContainerStatuses {
		if tm := cs.State.Terminated; tm != nil && !tm.StartedAt.IsZero() && tm.FinishedAt.After(tm.StartedAt.Time) {
			d += tm.FinishedAt.Sub(tm.StartedAt.Time)
		}
	}
	return d
}

// isStateful reports whether the pod mounts a volume other than a secret,
// config map, downward API, emptyDir or projected volume: the SLI leaves
// such pods out.
func isStateful(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil && v.Projected == nil {
			return true
		}
	}
	return false
}

// StatusSink is where computed pod statuses go (the status manager).
type StatusSink interface {
	SetPodStatus(pod *v1.Pod, st v1.PodStatus)
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Sink returns a StatusSink that shows every status to the tracker before
// handing it to next.
func (t *Tracker) Sink(next StatusSink) StatusSink {
	return observingSink{StatusSink: next, t: t}
}

type observingSink struct {
	StatusSink
	t *Tracker
}

func (s observingSink) SetPodStatus(pod *v1.Pod, st v1.PodStatus) {
	s.t.Observe(pod, &st)
	s.StatusSink.SetPodStatus(pod, st)
}
