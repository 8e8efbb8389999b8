package probe

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podspec"
)

// worker probes one kind of probe of one container, periodically, until
// it is stopped or the container is gone for good.
type worker struct {
	m         *Manager
	container *v1.Container
	kind      Kind
	spec      *v1.Probe
	stopCh    chan struct{}
	stopOnce  sync.Once
	// trigger asks for a probe round now (one pending at most).
	trigger chan struct{}

	podMu sync.Mutex
	pod   *v1.Pod

	// initial is the result a new container starts with, as upstream:
	// readiness fails, liveness succeeds, startup is unknown until probed.
	initial Result
	// containerID is the container instance the results are about.
	containerID string
	lastResult  Result
	resultRun   int
	// onHold stops probing after a liveness or startup failure until the
	// container is replaced.
	onHold bool
}

func newWorker(m *Manager, pod *v1.Pod, c *v1.Container, kind Kind) *worker {
	w := &worker{
		m:         m,
		pod:       pod,
		container: c,
		kind:      kind,
		spec:      withDefaults(probeOf(c, kind)),
		stopCh:    make(chan struct{}),
		trigger:   make(chan struct{}, 1),
	}
	switch kind {
	case Readiness:
		w.initial = Failure
	case Liveness:
		w.initial = Success
	default:
		w.initial = Unknown
	}
	return w
}

// withDefaults returns a copy of p with the API defaults for fields left
// zero (a static pod's manifest may leave them out).
func withDefaults(p *v1.Probe) *v1.Probe {
	out := p.DeepCopy()
	if out.TimeoutSeconds <= 0 {
		out.TimeoutSeconds = 1
	}
	if out.PeriodSeconds <= 0 {
		out.PeriodSeconds = 10
	}
	if out.SuccessThreshold <= 0 {
		out.SuccessThreshold = 1
	}
	if out.FailureThreshold <= 0 {
		out.FailureThreshold = 3
	}
	return out
}

func (w *worker) stop() {
	w.stopOnce.Do(func() { close(w.stopCh) })
}

// triggerProbe asks for a probe round now; it never blocks.
func (w *worker) triggerProbe() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

func (w *worker) setPod(pod *v1.Pod) {
	w.podMu.Lock()
	defer w.podMu.Unlock()
	w.pod = pod
}

func (w *worker) getPod() *v1.Pod {
	w.podMu.Lock()
	defer w.podMu.Unlock()
	return w.pod
}

func (w *worker) logger(ctx context.Context) klog.Logger {
	pod := w.getPod()
	return klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID, "container", w.container.Name, "probeType", w.kind)
}

// run probes at once (after a random part of the period when heartlet
// started less than a period ago, as upstream, so that the workers of a
// restarted heartlet do not all probe together), then every period and
// when triggered, until stopped or the container is gone for good. Its
// results and metric series go with it.
func (w *worker) run(ctx context.Context) {
	defer w.m.wg.Done()
	ctx = klog.NewContext(ctx, w.logger(ctx))
	period := time.Duration(w.spec.PeriodSeconds) * time.Second
	var t clock.Ticker
	defer func() {
		if t != nil {
			t.Stop()
		}
		if w.containerID != "" {
			w.m.remove(w.containerID, w.kind)
		}
		w.deleteMetrics()
		w.m.workerDone(w)
	}()
	if period > w.m.clock.Since(w.m.started) {
		if d := time.Duration(w.m.opts.Rand() * float64(period)); d > 0 {
			jitter := w.m.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				jitter.Stop()
				return
			case <-w.stopCh:
				jitter.Stop()
				return
			case <-w.trigger:
				jitter.Stop()
			case <-jitter.C():
			}
		}
	}
	t = w.m.clock.NewTicker(period)
	for {
		// Changes that waited for room in the updates channel go first.
		w.m.updates.Flush()
		keep := w.doProbe(ctx)
		if f := w.m.opts.AfterRound; f != nil {
			f(w.getPod().UID, w.container.Name, w.kind)
		}
		if !keep {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-w.stopCh:
			return
		case <-w.trigger:
		case <-t.C():
		}
	}
}

// initialFor is the result a container starts with: the kind's initial
// result, except for a container that has been running since before this
// heartlet started (adopted after a restart) whose pod status, as the API
// last had it (Options.PreviousStatus: the mirror pod's for a static pod),
// reports this very container ready (readiness) or started
// (startup). That state stands until the next probe says otherwise, so a
// restart of heartlet does not flip ready pods to not ready until their
// next probe (upstream kubernetes#100277).
func (w *worker) initialFor(pod *v1.Pod, id string, c v1.ContainerStatus) Result {
	if c.State.Running == nil || !c.State.Running.StartedAt.Time.Before(w.m.started) {
		return w.initial
	}
	if prev, ok := w.adoptedSuccess(pod); ok && prev == id {
		return Success
	}
	return w.initial
}

// adoptedSuccess returns the ID of the container that the pod's API status
// reports running since before this heartlet started and ready (for a
// readiness worker) or started (for a startup worker); false otherwise,
// and always for liveness.
func (w *worker) adoptedSuccess(pod *v1.Pod) (string, bool) {
	if w.kind == Liveness {
		return "", false
	}
	st := w.m.previousStatus(pod)
	for _, list := range [][]v1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for _, prev := range list {
			if prev.Name != w.container.Name || prev.ContainerID == "" || prev.State.Running == nil ||
				!prev.State.Running.StartedAt.Time.Before(w.m.started) {
				continue
			}
			if (w.kind == Readiness && prev.Ready) || (w.kind == Startup && prev.Started != nil && *prev.Started) {
				return bareID(prev.ContainerID), true
			}
		}
	}
	return "", false
}

// doProbe runs one round and reports whether the worker should go on.
func (w *worker) doProbe(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	pod := w.getPod()
	status, ok := w.m.opts.Status.GetPodStatus(pod.UID)
	if !ok {
		return true // not reported yet
	}
	if podspec.IsTerminalPhase(status.Phase) {
		logger.V(3).Info("Pod has finished; stopping its probe", "phase", status.Phase)
		return false
	}
	c, ok := findStatus(status, w.container.Name)
	if !ok || c.ContainerID == "" {
		return true // not created yet
	}
	if id := bareID(c.ContainerID); id != w.containerID {
		if w.containerID != "" {
			w.m.remove(w.containerID, w.kind)
		}
		w.containerID = id
		w.lastResult, w.resultRun, w.onHold = Unknown, 0, false
		w.m.set(ctx, w, id, w.initialFor(pod, id, c))
	}
	if w.onHold {
		return true
	}
	if c.State.Running == nil {
		// A container that stopped fails; one that is created and not
		// yet started keeps its result, so it is not killed for a
		// liveness failure it never had.
		if c.State.Terminated != nil || w.kind == Readiness {
			w.m.set(ctx, w, w.containerID, Failure)
		}
		// Nothing more to probe when the container will not run again:
		// by its own restart rules and policy, else the pod's.
		return c.State.Terminated == nil || podspec.RestartsOnExit(w.container, &pod.Spec, c.State.Terminated.ExitCode)
	}
	if pod.DeletionTimestamp != nil && (w.kind == Liveness || w.kind == Startup) {
		// The pod is going away: no restart may interfere with its
		// graceful termination.
		w.m.set(ctx, w, w.containerID, Success)
		return false
	}
	if w.m.clock.Since(c.State.Running.StartedAt.Time) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	started := true
	if w.container.StartupProbe != nil {
		r, _ := w.m.Result(w.containerID, Startup)
		started = r == Success
	}
	if w.kind == Startup && started {
		return true // done with this container
	}
	if w.kind != Startup && !started {
		return true // held until the startup probe succeeds
	}

	begin := w.m.clock.Now()
	out, output, err := w.m.prober.run(ctx, w.spec, target{pod: pod, container: w.container, containerID: w.containerID, podIP: status.PodIP})
	duration := w.m.clock.Since(begin).Seconds()
	if err != nil {
		// The probe could not run; its result says nothing about the
		// container and changes no state.
		logger.V(1).Info("Probe errored", "err", err)
		w.event(pod, ReasonUnhealthy, "%s probe errored and resulted in unknown state: %v", w.kind, err)
		w.note(pod, journal.Entry{Kind: journal.KindProbe, Container: w.container.Name, Reason: ReasonUnhealthy, Message: fmt.Sprintf("%s probe errored: %v", w.kind, err)})
		metrics.ProbeResults.WithLabelValues(w.resultLabels(metrics.ProbeResultUnknown)...).Inc()
		metrics.ProbeDuration.WithLabelValues(w.durationLabels()...).Observe(duration)
		return true
	}
	result := Success
	switch out {
	case outcomeSuccess:
		logger.V(3).Info("Probe succeeded")
	case outcomeWarning:
		logger.V(3).Info("Probe succeeded with a warning", "output", output)
		w.event(pod, ReasonProbeWarning, "%s probe warning: %s", w.kind, output)
	default:
		result = Failure
		logger.V(1).Info("Probe failed", "output", output)
		w.event(pod, ReasonUnhealthy, "%s probe failed: %s", w.kind, output)
		w.note(pod, journal.Entry{Kind: journal.KindProbe, Container: w.container.Name, Reason: ReasonUnhealthy, Message: fmt.Sprintf("%s probe failed: %s", w.kind, output)})
	}
	if result == Success {
		metrics.ProbeResults.WithLabelValues(w.resultLabels(metrics.ProbeResultSuccessful)...).Inc()
		metrics.ProbeDuration.WithLabelValues(w.durationLabels()...).Observe(duration)
	} else {
		metrics.ProbeResults.WithLabelValues(w.resultLabels(metrics.ProbeResultFailed)...).Inc()
	}

	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < int(w.spec.FailureThreshold)) ||
		(result == Success && w.resultRun < int(w.spec.SuccessThreshold)) {
		return true // below the threshold: no change yet
	}
	w.m.set(ctx, w, w.containerID, result)
	if result == Failure && (w.kind == Liveness || w.kind == Startup) {
		// The container will be restarted: probing it more is pointless
		// until it is replaced.
		w.onHold = true
		w.resultRun = 0
	}
	return true
}

// note records e in the pod's journal when there is one.
func (w *worker) note(pod *v1.Pod, e journal.Entry) {
	if w.m.opts.Journal != nil {
		w.m.opts.Journal.Record(pod.UID, e)
	}
}

// event records a warning about the probed container, on the pod with the
// container's field path, as upstream.
func (w *worker) event(pod *v1.Pod, reason, format string, args ...any) {
	if w.m.opts.Recorder != nil {
		w.m.opts.Recorder.Eventf(podspec.EventObject(pod, w.container.Name), v1.EventTypeWarning, reason, format, args...)
	}
}

func (w *worker) resultLabels(result string) []string {
	pod := w.getPod()
	return []string{w.kind.String(), result, w.container.Name, pod.Name, pod.Namespace, string(pod.UID)}
}

func (w *worker) durationLabels() []string {
	pod := w.getPod()
	return []string{w.kind.String(), w.container.Name, pod.Name, pod.Namespace}
}

// deleteMetrics drops the worker's series, as upstream does when a
// worker ends.
func (w *worker) deleteMetrics() {
	for _, r := range []string{metrics.ProbeResultSuccessful, metrics.ProbeResultFailed, metrics.ProbeResultUnknown} {
		metrics.ProbeResults.DeleteLabelValues(w.resultLabels(r)...)
	}
	metrics.ProbeDuration.DeleteLabelValues(w.durationLabels()...)
}

// findStatus finds a container's status among the app containers, then
// the init containers.
func findStatus(s v1.PodStatus, name string) (v1.ContainerStatus, bool) {
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c, true
		}
	}
	for _, c := range s.InitContainerStatuses {
		if c.Name == name {
			return c, true
		}
	}
	return v1.ContainerStatus{}, false
}
