package podworker

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/metrics"
)

const (
	// defaultGracePeriod applies when a pod sets no
	// terminationGracePeriodSeconds, as the API server defaults it.
	defaultGracePeriod int64 = 30
	// minGracePeriod is the shortest grace period handed to the Syncer:
	// even a forced kill gives the containers a moment to be signalled.
	minGracePeriod int64 = 1

	// Back-off of a failed Syncer call: initialBackoff, doubled on every
	// further failure, at most maxBackoff.
	initialBackoff = time.Second
	maxBackoff     = 10 * time.Second
)

// Workers runs one worker goroutine per pod UID that has work to do and
// tracks every pod's lifecycle State.
//
// Termination semantics: an UpdateKill cancels the context of a SyncPod call
// in flight (its result is then discarded) so that a pod stuck pulling an
// image or waiting on the runtime stops promptly; SyncTerminatingPod follows
// as soon as that call returns. A later UpdateKill with a shorter grace
// period likewise cancels a SyncTerminatingPod in flight, which is then
// called again at once with the shorter grace period.
//
// Static pod exclusivity: at most one UID per namespace/name is syncing or
// terminating at a time. A new UID for the same full name (a static pod
// whose manifest changed) waits in StateWaiting until the previous UID is
// terminated, so that host ports and other node resources are free. The
// rule holds for pods of every source: an API pod re-created under the same
// name likewise starts once the old UID has stopped.
type Workers struct {
	syncer Syncer
	clk    clock.Clock
	resync time.Duration

	mu      sync.Mutex
	pods    map[types.UID]*podState
	byName  map[string]map[types.UID]*podState
	seq     uint64
	timers  uint64
	runCtx  context.Context // set by Run; nil until then
	stopped bool
	wg      sync.WaitGroup

	// activity is told of every worker goroutine and timer callback that
	// starts (+1) or ends (-1); nil unless WithActivity is given.
	activity func(delta int)
}

// Option configures Workers.
type Option func(*Workers)

// WithActivity has Workers call f with +1 when a worker goroutine starts or
// a timer callback fires, and with -1 when it has ended; the sum is 0 when
// the workers are idle. A start that follows from an ending (a fired timer
// starting a worker) is reported before the ending, so the sum drops to 0
// only when nothing is left to run. f is called with Workers' lock held
// or from a clock's callback: it must neither block nor call Workers.
// Tests use it to wait until the workers are idle.
func WithActivity(f func(delta int)) Option {
	return func(w *Workers) { w.activity = f }
}

func (w *Workers) active(delta int) {
	if w.activity != nil {
		w.activity(delta)
	}
}

// podState is the record of one pod UID. All fields are guarded by
// Workers.mu.
type podState struct {
	uid      types.UID
	fullName string
	seq      uint64 // arrival order, for StateWaiting
	state    State
	pod      *v1.Pod // newest desired pod

	// pending means work is to be done in the current state; pendingType is
	// the strongest reason for the next SyncPod (UpdateUpdate over
	// UpdateSync).
	pending     bool
	pendingType UpdateType
	synced      bool // a SyncPod succeeded under this UID
	failures    int  // consecutive failed Syncer calls
	removed     bool // killed: forget once terminated
	restart     bool // re-created with the same UID after a kill
	grace       *int64
	cleaned     bool // SyncTerminatedPod succeeded

	running    bool // a worker goroutine owns the pod
	inflight   jobKind
	inflightGr int64
	cancel     context.CancelFunc
	timer      stopper
	timerGen   uint64
	timerType  UpdateType
}

type jobKind int

const (
	jobNone jobKind = iota
	jobSync
	jobTerminating
	jobTerminated
)

type job struct {
	kind   jobKind
	typ    UpdateType
	pod    *v1.Pod
	grace  int64
	ctx    context.Context
	cancel context.CancelFunc
}

type result struct {
	sync SyncResult
	err  error
}

// New returns Workers that call s for every pod. resync is the period of the
// safety-net sync of every syncing pod (syncFrequency, default 1m); 0
// disables it. Nothing runs until Run is called; updates given before are
// kept.
func New(s Syncer, clk clock.Clock, resync time.Duration, opts ...Option) *Workers {
	w := &Workers{
		syncer: s,
		clk:    clk,
		resync: resync,
		pods:   map[types.UID]*podState{},
		byName: map[string]map[types.UID]*podState{},
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Run starts the workers for the updates received so far and serves later
// ones until ctx is done. It then cancels the contexts of the Syncer calls
// in flight, waits for every worker goroutine to exit and returns nil. Run
// may be called once.
func (w *Workers) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.runCtx != nil {
		w.mu.Unlock()
		return errors.New("podworker: Run called more than once")
	}
	w.runCtx = ctx
	for _, uid := range w.sortedUIDsLocked() {
		w.dispatchLocked(w.pods[uid])
	}
	w.mu.Unlock()

	<-ctx.Done()

	w.mu.Lock()
	w.stopped = true
	for _, ps := range w.pods {
		w.stopTimerLocked(ps)
		if ps.cancel != nil {
			ps.cancel()
		}
	}
	w.mu.Unlock()
	w.wg.Wait()
	klog.FromContext(ctx).V(2).Info("Pod workers stopped")
	return nil
}

// Update hands a change of one pod to its worker. It never blocks on a
// Syncer call.
//
//   - UpdateCreate, UpdateUpdate: set the desired pod; a busy worker picks
//     up only the newest one. A pod that is terminating or terminated is not
//     restarted, except that an UpdateCreate after an UpdateKill (the source
//     removed the pod, then added it back with the same UID) starts it again
//     once its termination completed.
//   - UpdateSync: same as Sync(u.Pod.UID).
//   - UpdateKill: move the pod to terminating (see Update.GracePeriod) and
//     forget it once terminated; for an unknown UID (an orphan found in the
//     runtime) a worker starts directly in terminating.
func (w *Workers) Update(u Update) {
	if u.Pod == nil {
		klog.Background().Error(nil, "Pod update without a pod ignored", "updateType", u.Type.String())
		return
	}
	if u.Type == UpdateSync {
		w.Sync(u.Pod.UID)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.pods[u.Pod.UID]
	switch u.Type {
	case UpdateCreate, UpdateUpdate:
		if ps == nil {
			ps = w.addLocked(u.Pod)
			w.tryStartLocked(ps)
			return
		}
		ps.pod = u.Pod
		switch ps.state {
		case StateWaiting, StateSyncing:
			w.requestSyncLocked(ps, u.Type)
		case StateTerminating, StateTerminated:
			if u.Type == UpdateCreate && ps.removed {
				ps.removed = false
				ps.restart = true
				w.logger().V(2).Info("Pod re-created with the same UID, will restart once terminated",
					"pod", klog.KObj(u.Pod), "podUID", u.Pod.UID)
			}
		}
	case UpdateKill:
		if ps == nil {
			ps = w.addLocked(u.Pod)
			w.logger().V(2).Info("Terminating unknown pod", "pod", klog.KObj(u.Pod), "podUID", u.Pod.UID)
		} else if ps.state == StateSyncing || ps.state == StateWaiting {
			// The pod object from the kill may carry deletion metadata.
			ps.pod = u.Pod
		}
		if !u.Keep {
			ps.removed = true
		}
		ps.restart = false
		w.terminateLocked(ps, u.GracePeriod)
	default:
		w.logger().Error(nil, "Pod update of unknown type ignored", "pod", klog.KObj(u.Pod),
			"podUID", u.Pod.UID, "updateType", u.Type.String())
	}
}

// Sync requests a sync of a known syncing pod (with UpdateSync), for example
// after a runtime event. It is a no-op for unknown UIDs and for pods that are
// not syncing.
func (w *Workers) Sync(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.pods[uid]
	if ps == nil || ps.state != StateSyncing {
		return
	}
	w.requestSyncLocked(ps, UpdateSync)
}

// Forget is an UpdateKill with the pod's default grace period for a pod that
// left its source when the caller no longer has the pod object. It is a
// no-op for unknown UIDs.
func (w *Workers) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.pods[uid]
	if ps == nil {
		return
	}
	ps.removed = true
	ps.restart = false
	w.terminateLocked(ps, nil)
}

// Cleaned reports whether nothing of the pod is left: it is terminated
// and SyncTerminatedPod released what it held (volumes, cgroups), or its
// UID is unknown.
func (w *Workers) Cleaned(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.pods[uid]
	return ps == nil || (ps.state == StateTerminated && ps.cleaned)
}

// Known reports whether uid has a worker record (in any state).
func (w *Workers) Known(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pods[uid]
	return ok
}

// State returns the lifecycle state of uid, false for unknown UIDs.
func (w *Workers) State(uid types.UID) (State, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps, ok := w.pods[uid]
	if !ok {
		return 0, false
	}
	return ps.state, true
}

// Pods returns the state of every known pod, for diagnostics.
func (w *Workers) Pods() map[types.UID]State {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[types.UID]State, len(w.pods))
	for uid, ps := range w.pods {
		out[uid] = ps.state
	}
	return out
}

// logger returns the logger of Run's context, or the global one before Run.
func (w *Workers) logger() klog.Logger {
	if w.runCtx != nil {
		return klog.FromContext(w.runCtx)
	}
	return klog.Background()
}

func fullName(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

func (w *Workers) addLocked(pod *v1.Pod) *podState {
	w.seq++
	ps := &podState{
		uid:         pod.UID,
		fullName:    fullName(pod),
		seq:         w.seq,
		state:       StateWaiting,
		pod:         pod,
		pending:     true,
		pendingType: UpdateSync,
	}
	w.pods[ps.uid] = ps
	if w.byName[ps.fullName] == nil {
		w.byName[ps.fullName] = map[types.UID]*podState{}
	}
	w.byName[ps.fullName][ps.uid] = ps
	return ps
}

func (w *Workers) forgetLocked(ps *podState) {
	w.stopTimerLocked(ps)
	if w.pods[ps.uid] == ps {
		delete(w.pods, ps.uid)
	}
	if m := w.byName[ps.fullName]; m != nil && m[ps.uid] == ps {
		delete(m, ps.uid)
		if len(m) == 0 {
			delete(w.byName, ps.fullName)
		}
	}
	w.logger().V(2).Info("Pod forgotten", "pod", klog.KObj(ps.pod), "podUID", ps.uid)
	w.startNextWaitingLocked(ps.fullName)
}

// tryStartLocked moves a waiting pod to syncing unless another UID with the
// same full name is syncing or terminating.
func (w *Workers) tryStartLocked(ps *podState) {
	if ps.state != StateWaiting {
		return
	}
	for uid, other := range w.byName[ps.fullName] {
		if uid != ps.uid && (other.state == StateSyncing || other.state == StateTerminating) {
			w.logger().V(2).Info("Pod waits for the previous pod with the same name to terminate",
				"pod", klog.KObj(ps.pod), "podUID", ps.uid, "previousPodUID", uid)
			return
		}
	}
	ps.state = StateSyncing
	ps.pending = true
	w.dispatchLocked(ps)
}

// startNextWaitingLocked starts the oldest waiting pod named name, if any
// may start.
func (w *Workers) startNextWaitingLocked(name string) {
	var next *podState
	for _, ps := range w.byName[name] {
		if ps.state == StateWaiting && (next == nil || ps.seq < next.seq) {
			next = ps
		}
	}
	if next != nil {
		w.tryStartLocked(next)
	}
}

func (w *Workers) requestSyncLocked(ps *podState, t UpdateType) {
	ps.pendingType = strongerSync(ps.pendingType, t)
	if ps.state != StateSyncing {
		return
	}
	ps.pending = true
	w.stopTimerLocked(ps)
	w.dispatchLocked(ps)
}

// strongerSync merges two reasons for a SyncPod: an update beats a sync.
func strongerSync(a, b UpdateType) UpdateType {
	if a == UpdateCreate || b == UpdateCreate {
		return UpdateCreate
	}
	if a == UpdateUpdate || b == UpdateUpdate {
		return UpdateUpdate
	}
	return UpdateSync
}

// terminateLocked moves ps to terminating, or shortens the grace period of
// a pod already terminating.
func (w *Workers) terminateLocked(ps *podState, override *int64) {
	switch ps.state {
	case StateWaiting, StateSyncing:
		g := effectiveGracePeriod(ps.grace, ps.pod, override)
		ps.grace = &g
		ps.state = StateTerminating
		ps.pending = true
		ps.failures = 0
		w.stopTimerLocked(ps)
		if ps.inflight == jobSync && ps.cancel != nil {
			ps.cancel()
		}
		w.logger().V(2).Info("Pod is terminating", "pod", klog.KObj(ps.pod), "podUID", ps.uid, "gracePeriod", g)
		w.dispatchLocked(ps)
	case StateTerminating:
		g := effectiveGracePeriod(ps.grace, ps.pod, override)
		if ps.grace != nil && g >= *ps.grace {
			return
		}
		ps.grace = &g
		ps.pending = true
		w.stopTimerLocked(ps)
		if ps.inflight == jobTerminating && ps.inflightGr > g && ps.cancel != nil {
			ps.cancel()
		}
		w.logger().V(2).Info("Pod termination grace period shortened", "pod", klog.KObj(ps.pod),
			"podUID", ps.uid, "gracePeriod", g)
		w.dispatchLocked(ps)
	case StateTerminated:
		if ps.cleaned && ps.removed {
			w.forgetLocked(ps)
		}
	}
}

// effectiveGracePeriod returns the grace period in seconds for a kill of pod
// given the one already in effect (nil if none) and the kill's override:
// deletionGracePeriodSeconds and the override replace the current value only
// when shorter; without any of the three the pod's
// terminationGracePeriodSeconds (default 30) applies. The result is at least
// minGracePeriod.
func effectiveGracePeriod(current *int64, pod *v1.Pod, override *int64) int64 {
	var g int64
	set := false
	if current != nil {
		g, set = *current, true
	}
	for _, o := range []*int64{pod.DeletionGracePeriodSeconds, override} {
		if o != nil && (!set || *o < g) {
			g, set = *o, true
		}
	}
	if !set {
		g = defaultGracePeriod
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			g = *pod.Spec.TerminationGracePeriodSeconds
		}
	}
	return max(g, minGracePeriod)
}

// dispatchLocked starts a worker goroutine for ps when it has work and none
// runs yet.
func (w *Workers) dispatchLocked(ps *podState) {
	if w.runCtx == nil || w.stopped || ps.running || !ps.pending || ps.state == StateWaiting {
		return
	}
	ps.running = true
	w.active(1)
	w.wg.Add(1)
	go w.work(ps)
}

// work is the worker goroutine of one pod: it runs jobs until none is left.
func (w *Workers) work(ps *podState) {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		j, ok := w.nextJobLocked(ps)
		if !ok {
			ps.running = false
			w.active(-1)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()

		res := w.runJob(j)
		j.cancel()

		w.mu.Lock()
		w.finishJobLocked(ps, j, res)
		w.mu.Unlock()
	}
}

func (w *Workers) nextJobLocked(ps *podState) (job, bool) {
	if w.stopped || !ps.pending || w.pods[ps.uid] != ps {
		return job{}, false
	}
	j := job{pod: ps.pod}
	switch ps.state {
	case StateSyncing:
		j.kind = jobSync
		j.typ = ps.pendingType
		if !ps.synced {
			j.typ = UpdateCreate
		}
		ps.pendingType = UpdateSync
	case StateTerminating:
		j.kind = jobTerminating
		j.grace = *ps.grace
	case StateTerminated:
		if ps.cleaned {
			ps.pending = false
			return job{}, false
		}
		j.kind = jobTerminated
	default:
		return job{}, false
	}
	ps.pending = false
	w.stopTimerLocked(ps)
	j.ctx, j.cancel = context.WithCancel(w.runCtx)
	ps.cancel = j.cancel
	ps.inflight = j.kind
	ps.inflightGr = j.grace
	return j, true
}

func (w *Workers) runJob(j job) result {
	logger := klog.FromContext(j.ctx).WithValues("pod", klog.KObj(j.pod), "podUID", j.pod.UID)
	ctx := klog.NewContext(j.ctx, logger)
	start := w.clk.Now()
	var r result
	switch j.kind {
	case jobSync:
		r.sync, r.err = w.syncer.SyncPod(ctx, j.typ, j.pod)
		metrics.PodWorkerDuration.WithLabelValues(operation(j.typ)).Observe(w.clk.Since(start).Seconds())
	case jobTerminating:
		r.err = w.syncer.SyncTerminatingPod(ctx, j.pod, j.grace)
		metrics.PodWorkerDuration.WithLabelValues(metrics.OpKill).Observe(w.clk.Since(start).Seconds())
	case jobTerminated:
		r.err = w.syncer.SyncTerminatedPod(ctx, j.pod)
	}
	return r
}

func operation(t UpdateType) string {
	switch t {
	case UpdateCreate:
		return metrics.OpCreate
	case UpdateUpdate:
		return metrics.OpUpdate
	}
	return metrics.OpSync
}

func (w *Workers) finishJobLocked(ps *podState, j job, r result) {
	ps.cancel = nil
	ps.inflight = jobNone
	if w.stopped {
		return
	}
	logger := w.logger().WithValues("pod", klog.KObj(j.pod), "podUID", ps.uid)
	switch j.kind {
	case jobSync:
		if ps.state != StateSyncing {
			// Killed while syncing: the outcome no longer matters.
			logger.V(4).Info("Pod sync ended after the pod started terminating", "err", r.err)
			return
		}
		if r.err != nil {
			ps.pendingType = strongerSync(ps.pendingType, j.typ)
			d := w.failLocked(ps)
			logger.Error(r.err, "Error syncing pod, will retry", "updateType", j.typ.String(), "retryAfter", d)
			return
		}
		ps.failures = 0
		ps.synced = true
		if r.sync.Terminal {
			logger.V(2).Info("Pod finished, terminating it")
			w.terminateLocked(ps, nil)
			return
		}
		if ps.pending {
			return
		}
		d := w.resync
		if r.sync.RequeueAfter > 0 && (d <= 0 || r.sync.RequeueAfter < d) {
			d = r.sync.RequeueAfter
		}
		if d > 0 {
			w.armLocked(ps, d, UpdateSync)
		}
	case jobTerminating:
		if r.err != nil {
			if ps.pending {
				// Cancelled for a shorter grace period: go again at once.
				logger.V(4).Info("Pod termination restarted", "err", r.err)
				return
			}
			d := w.failLocked(ps)
			logger.Error(r.err, "Error terminating pod, will retry", "retryAfter", d)
			return
		}
		ps.failures = 0
		ps.state = StateTerminated
		ps.pending = true
		logger.V(2).Info("Pod terminated")
		w.startNextWaitingLocked(ps.fullName)
	case jobTerminated:
		if r.err != nil {
			d := w.failLocked(ps)
			logger.Error(r.err, "Error cleaning up terminated pod, will retry", "retryAfter", d)
			return
		}
		ps.failures = 0
		ps.cleaned = true
		switch {
		case ps.restart:
			w.resetLocked(ps)
			logger.V(2).Info("Pod restarting after re-creation")
			w.tryStartLocked(ps)
		case ps.removed:
			w.forgetLocked(ps)
		}
	}
}

// failLocked records a failed Syncer call and schedules its retry after the
// back-off, unless newer work is already pending. It returns the back-off.
func (w *Workers) failLocked(ps *podState) time.Duration {
	ps.failures++
	d := initialBackoff << min(ps.failures-1, 10)
	d = min(d, maxBackoff)
	if !ps.pending {
		w.armLocked(ps, d, ps.pendingType)
	}
	return d
}

// resetLocked turns a terminated pod re-created with the same UID back into
// a new, waiting pod.
func (w *Workers) resetLocked(ps *podState) {
	w.seq++
	ps.seq = w.seq
	ps.state = StateWaiting
	ps.pending = true
	ps.pendingType = UpdateSync
	ps.synced = false
	ps.failures = 0
	ps.removed = false
	ps.restart = false
	ps.grace = nil
	ps.cleaned = false
}

// armLocked schedules work for ps after d, replacing any earlier timer.
func (w *Workers) armLocked(ps *podState, d time.Duration, t UpdateType) {
	w.stopTimerLocked(ps)
	w.timers++
	gen := w.timers
	ps.timerGen = gen
	ps.timerType = t
	ps.timer = w.afterFunc(d, func() {
		// Never take w.mu here: a fake clock runs this while holding its own
		// lock, which the holder of w.mu may be waiting for.
		w.active(1)
		go w.fire(ps, gen)
	})
}

func (w *Workers) stopTimerLocked(ps *podState) {
	if ps.timer != nil {
		ps.timer.Stop()
		ps.timer = nil
	}
}

func (w *Workers) fire(ps *podState, gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.active(-1)
	if w.pods[ps.uid] != ps || ps.timer == nil || ps.timerGen != gen {
		return
	}
	ps.timer = nil
	ps.pending = true
	if ps.state == StateSyncing {
		ps.pendingType = strongerSync(ps.pendingType, ps.timerType)
	}
	w.dispatchLocked(ps)
}

func (w *Workers) sortedUIDsLocked() []types.UID {
	uids := make([]types.UID, 0, len(w.pods))
	for uid := range w.pods {
		uids = append(uids, uid)
	}
	slices.SortFunc(uids, func(a, b types.UID) int { return cmp.Compare(w.pods[a].seq, w.pods[b].seq) })
	return uids
}

// stopper is the part of a timer Workers needs.
type stopper interface {
	Stop() bool
}

// afterFunc calls f in its own goroutine after d on w's clock.
func (w *Workers) afterFunc(d time.Duration, f func()) stopper {
	if dc, ok := w.clk.(clock.WithDelayedExecution); ok {
		return dc.AfterFunc(d, f)
	}
	t := w.clk.NewTimer(d)
	c := &chanTimer{t: t, stop: make(chan struct{})}
	go func() {
		select {
		case <-t.C():
			f()
		case <-c.stop:
		}
	}()
	return c
}

// chanTimer runs an afterFunc on clocks without AfterFunc.
type chanTimer struct {
	t    clock.Timer
	once sync.Once
	stop chan struct{}
}

func (c *chanTimer) Stop() bool {
	stopped := c.t.Stop()
	c.once.Do(func() { close(c.stop) })
	return stopped
}
