package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/mergepatch"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podspec"
)

// KubeClient is the API group pod statuses are written with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// Default periods of a Syncer.
const (
	// DefaultBatchPeriod is the shortest time between two rounds of status
	// writes started by changes: a change after a quiet period is sent at
	// once, and changes that arrive within the period after a round are
	// sent together at its end. Short, as a pod's Running (a container
	// just started) waits for it when the pod's previous state was written
	// just before; long enough that a burst of pods is written in a few
	// rounds.
	DefaultBatchPeriod = 100 * time.Millisecond
	// retryBase is the wait before the first retry of a failed write,
	// doubled per consecutive failure.
	retryBase = time.Second
	// DefaultResyncPeriod is the period of the full reconcile, which also
	// retries failed writes and checks pods that may be deleted.
	DefaultResyncPeriod = 10 * time.Second
	// maxRetryBackoff bounds the wait before retrying a failed write.
	maxRetryBackoff = time.Minute
)

// SyncerOptions configure a Syncer. Every function field may be nil.
type SyncerOptions struct {
	// CanDelete reports whether the pod's workers have finished
	// terminating it: every container is stopped and nothing runs for it
	// any more. Only then may a pod that the API marked for deletion be
	// removed from the API. nil: pods are never deleted.
	CanDelete func(uid types.UID) bool
	// MirrorPod returns the API's mirror pod of a static pod, if one
	// exists. A static pod's status is written to its mirror pod, which
	// has its own UID. nil or false: static pods' statuses wait.
	MirrorPod func(static *v1.Pod) (*v1.Pod, bool)
	// GetPod returns the API's current pod by namespace and name, usually
	// from an informer cache. It is read before the first write of a pod,
	// to merge with what the API already holds, and during the full
	// reconcile. nil or false: the pod is read with a GET when needed.
	// The pod may be shared with the cache: the Syncer only reads it.
	GetPod func(namespace, name string) (*v1.Pod, bool)
	// BatchPeriod overrides DefaultBatchPeriod when positive.
	BatchPeriod time.Duration
	// ResyncPeriod overrides DefaultResyncPeriod when positive.
	ResyncPeriod time.Duration
	// Journal records the status writes of each pod; nil records none.
	Journal Journal
}

// Syncer is the only writer of pod statuses to the API server. It watches
// a Manager and patches the status subresource of every pod whose status
// version changed since its last successful write, in batches. A patch
// carries the pod's UID as a precondition, so it never lands on another
// pod that took the same name. Once a pod marked for deletion has finished
// terminating, the Syncer sends its final status and deletes it from the
// API.
//
// The Syncer never blocks the Manager: it only reads it, and a slow API
// server only delays later rounds.
type Syncer struct {
	kube   KubeClient
	m      *Manager
	clk    clock.WithTicker
	opts   SyncerOptions
	batch  time.Duration
	resync time.Duration

	// records is only used by the goroutine running the rounds; during a
	// round's writes each record belongs to its pod's goroutine and the
	// map does not change.
	records map[types.UID]*record
	// trigger requests a round outside of Manager changes.
	trigger chan struct{}

	// apiMu guards written and recheck, which Recheck (called from the
	// pod informer) and the rounds share. written is the resourceVersion
	// of the last object each status write returned, by API UID; recheck
	// holds the API UIDs whose object changed otherwise since.
	apiMu   sync.Mutex
	written map[types.UID]string
	recheck map[types.UID]struct{}
	// afterRound, if set, is called at the end of every round (tests).
	afterRound func()
}

// record is what the Syncer knows about one pod (by its local UID) and the
// API object its status goes to.
type record struct {
	// target is the UID of the API object: the pod itself, or the mirror
	// pod of a static pod.
	target types.UID
	// version is the Manager version last written, or found already
	// present in the API.
	version uint64
	// api is the API's status as of the last read or write; nil means it
	// must be read before the next write.
	api *v1.PodStatus
	// gone means the API object with UID target no longer exists.
	gone bool
	// failures counts consecutive failed calls; retryAt is when the next
	// attempt may be made.
	failures int
	retryAt  time.Time
	// unreachable means the last failure was the API server not answering
	// (no API status came back), not an answer about this pod.
	unreachable bool
	// drop means the pod is done with: the record goes at the end of the
	// round.
	drop bool
}

// NewSyncer returns a Syncer that writes m's statuses with kube. It does
// nothing until Run.
func NewSyncer(kube KubeClient, m *Manager, clk clock.WithTicker, opts SyncerOptions) *Syncer {
	s := &Syncer{
		kube:    kube,
		m:       m,
		clk:     clk,
		opts:    opts,
		batch:   DefaultBatchPeriod,
		resync:  DefaultResyncPeriod,
		records: map[types.UID]*record{},
		trigger: make(chan struct{}, 1),
		written: map[types.UID]string{},
		recheck: map[types.UID]struct{}{},
	}
	if opts.BatchPeriod > 0 {
		s.batch = opts.BatchPeriod
	}
	if opts.ResyncPeriod > 0 {
		s.resync = opts.ResyncPeriod
	}
	return s
}

// Trigger asks for a round of writes within the batch period, for example
// when CanDelete may have become true for a pod whose status did not
// change. It never blocks.
func (s *Syncer) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Recheck tells the Syncer that the API's pod changed, as the pod
// informer saw it. Unless the change is the Syncer's own last write (the
// same resourceVersion), the next round compares the pod's status in the
// API with the last one written and sends it again if another writer
// changed it: the node lifecycle controller marks every pod of a node it
// thinks lost not ready, and the pods' real readiness must return as soon
// as the API server is reachable, not at the next full reconcile. pod may
// be the informer's own object: it is only read, and not kept. Recheck
// never blocks.
func (s *Syncer) Recheck(pod *v1.Pod) {
	s.apiMu.Lock()
	if rv := pod.ResourceVersion; rv != "" && s.written[pod.UID] == rv {
		s.apiMu.Unlock()
		return
	}
	s.recheck[pod.UID] = struct{}{}
	s.apiMu.Unlock()
	s.Trigger()
}

// takeRecheck returns the API UIDs Recheck named since the last call.
func (s *Syncer) takeRecheck() map[types.UID]struct{} {
	s.apiMu.Lock()
	defer s.apiMu.Unlock()
	if len(s.recheck) == 0 {
		return nil
	}
	r := s.recheck
	s.recheck = map[types.UID]struct{}{}
	return r
}

// Run writes statuses until ctx is done: one round right away; after the
// Manager reports a change, a round at once if none ran in the last batch
// period, else at the end of it; and a full reconcile every resync period.
// It returns nil when ctx is done.
func (s *Syncer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("status-syncer")
	ctx = klog.NewContext(ctx, logger)
	changed, cancel := s.m.Subscribe()
	defer cancel()
	resync := s.clk.NewTicker(s.resync)
	defer resync.Stop()

	var (
		timer  clock.Timer
		timerC <-chan time.Time
		due    time.Time
	)
	// arm makes sure a round happens no later than at.
	arm := func(at time.Time) {
		if timerC != nil && !due.After(at) {
			return
		}
		if timer != nil {
			timer.Stop()
		}
		timer = s.clk.NewTimer(at.Sub(s.clk.Now()))
		timerC, due = timer.C(), at
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// round runs one round and schedules the retries it asks for, never
	// sooner than one batch period from now.
	var last time.Time // start of the last round
	round := func(full bool) {
		last = s.clk.Now()
		retry := s.syncRound(ctx, full)
		if !retry.IsZero() {
			if earliest := s.clk.Now().Add(s.batch); retry.Before(earliest) {
				retry = earliest
			}
			arm(retry)
		}
	}

	// soon runs a round for a change: at once when the last round is at
	// least a batch period old, so that a lone change (a pod just started)
	// is written without waiting; else one batch period after the last
	// round, so that a burst of changes is written in rounds at most once
	// per batch period.
	soon := func() {
		next := last.Add(s.batch)
		if s.clk.Now().Before(next) {
			arm(next)
			return
		}
		round(false)
	}

	logger.V(2).Info("Starting pod status syncer", "batchPeriod", s.batch, "resyncPeriod", s.resync)
	round(false)
	for {
		select {
		case <-ctx.Done():
			logger.V(2).Info("Stopping pod status syncer")
			return nil
		case <-changed:
			soon()
		case <-s.trigger:
			soon()
		case <-timerC:
			timerC = nil
			round(false)
		case <-resync.C():
			round(true)
		}
	}
}

// maxParallelWrites bounds how many pods one round writes at once: a round
// after a burst of starts or deletions has a call or two per pod, and the
// API server answers them in parallel. The client's rate limit still
// applies.
const maxParallelWrites = 8

// syncRound writes every pod that needs it, up to maxParallelWrites pods
// at once. full also reconciles pods whose version did not change against
// the API's current status. It returns the earliest time a failed pod may
// be retried, zero if none.
//
// Each pod's calls and its record are handled by one goroutine; the
// records map changes only here, before and after the writes.
func (s *Syncer) syncRound(ctx context.Context, full bool) time.Time {
	if s.afterRound != nil {
		defer s.afterRound()
	}
	seen := map[types.UID]bool{}
	type job struct {
		pod, target *v1.Pod
		st          v1.PodStatus
		version     uint64
		rec         *record
		full        bool
	}
	var jobs []job
	recheck := s.takeRecheck()
	for _, ref := range s.m.refs() {
		seen[ref.uid] = true
		// A pod the API changed is reconciled like in a full round; its
		// record names the API object (a static pod's is its mirror pod).
		_, changed := recheck[ref.uid]
		if rec := s.records[ref.uid]; rec != nil {
			_, changed = recheck[rec.target]
		}
		if !full && !changed && !s.mayHaveWork(ref) {
			continue
		}
		pod, st, version, ok := s.m.podWithStatus(ref.uid)
		if !ok {
			continue
		}
		target, rec := s.recordFor(ctx, pod)
		if rec == nil {
			continue
		}
		jobs = append(jobs, job{pod: pod, target: target, st: st, version: version, rec: rec, full: full || changed})
	}
	var (
		wg        sync.WaitGroup
		answered  atomic.Bool
		slots     = make(chan struct{}, maxParallelWrites)
		cancelled bool
	)
	for _, j := range jobs {
		if ctx.Err() != nil {
			cancelled = true
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if s.syncPod(ctx, j.pod, j.target, j.st, j.version, j.rec, j.full) {
				answered.Store(true)
			}
		}()
	}
	wg.Wait()
	if answered.Load() {
		s.reachable()
	}
	var retry time.Time
	for uid, rec := range s.records {
		if !seen[uid] || rec.drop {
			delete(s.records, uid)
			s.apiMu.Lock()
			delete(s.written, rec.target)
			s.apiMu.Unlock()
			continue
		}
		if rec.failures > 0 && (retry.IsZero() || rec.retryAt.Before(retry)) {
			retry = rec.retryAt
		}
	}
	if cancelled {
		return time.Time{}
	}
	return retry
}

// mayHaveWork tells, from what a round reads of every pod, whether
// syncPod may have something to do for it outside a full round: a status
// not yet written (or a pod without a record), a retry, or a deletion its
// workers allow; static pods always, as their mirror pod may have been
// replaced. It reads no copy of the pod, so that a round started by one
// pod's change costs little for the others.
func (s *Syncer) mayHaveWork(ref podRef) bool {
	rec := s.records[ref.uid]
	if rec == nil || ref.version > rec.version || rec.failures > 0 || ref.static {
		return true
	}
	if s.opts.CanDelete == nil {
		return false
	}
	deleting := ref.deleting
	if !deleting && s.opts.GetPod != nil {
		if p, ok := s.opts.GetPod(ref.namespace, ref.name); ok && p.UID == ref.uid && p.DeletionTimestamp != nil {
			deleting = true
		}
	}
	// A pod being deleted whose workers have not finished has nothing to
	// do either: syncPod deletes it only once they have. In a burst of
	// deletions every round would otherwise copy every such pod.
	return deleting && s.opts.CanDelete(ref.uid)
}

// recordFor returns the API object the pod's status goes to (its mirror
// pod for a static pod) and the pod's record, created or replaced when the
// target changed; nil when there is no target yet.
func (s *Syncer) recordFor(ctx context.Context, pod *v1.Pod) (*v1.Pod, *record) {
	target := pod
	if podconfig.IsStatic(pod) {
		if s.opts.MirrorPod == nil {
			return nil, nil
		}
		mp, ok := s.opts.MirrorPod(pod)
		if !ok || mp == nil {
			klog.FromContext(ctx).V(5).Info("Static pod has no mirror pod yet, status not sent", "pod", klog.KObj(pod), "podUID", pod.UID)
			return nil, nil
		}
		target = mp
	}
	rec := s.records[pod.UID]
	if rec == nil || rec.target != target.UID {
		if rec != nil {
			s.apiMu.Lock()
			delete(s.written, rec.target)
			s.apiMu.Unlock()
		}
		rec = &record{target: target.UID}
		s.records[pod.UID] = rec
	}
	return target, rec
}

// syncPod writes one pod's status to target if its version changed (or,
// when full, if the API's status differs), and deletes the pod from the
// API once it may be. It touches no record but rec and reports whether
// the API server answered a call successfully.
func (s *Syncer) syncPod(ctx context.Context, pod, target *v1.Pod, st v1.PodStatus, version uint64, rec *record, full bool) bool {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	static := podconfig.IsStatic(pod)
	if rec.gone {
		return false
	}
	if rec.failures > 0 && s.clk.Now().Before(rec.retryAt) {
		return false
	}

	var cached *v1.Pod
	if s.opts.GetPod != nil {
		if p, ok := s.opts.GetPod(target.Namespace, target.Name); ok && p.UID == target.UID {
			cached = p
		}
	}
	deleting := !static && !isMirror(pod) && s.opts.CanDelete != nil &&
		(pod.DeletionTimestamp != nil || (cached != nil && cached.DeletionTimestamp != nil)) &&
		s.opts.CanDelete(pod.UID)
	if deleting {
		// The workers set a pod's final status before they finish it, and
		// may have finished it after the round read its status: read it
		// again, so that the status written before the delete is the
		// final one.
		if _, latest, v, ok := s.m.podWithStatus(pod.UID); ok {
			st, version = latest, v
		}
	}
	if full && cached != nil && rec.api != nil && version <= rec.version {
		if !statusEqual(&cached.Status, rec.api) {
			logger.V(3).Info("Pod status in the API differs from the last one written, resending")
			rec.api = nil
			rec.version = 0
		}
	}
	if version <= rec.version && !deleting {
		return false
	}

	if rec.api == nil {
		base := cached
		if base == nil {
			got, err := s.kube.CoreV1().Pods(target.Namespace).Get(ctx, target.Name, metav1.GetOptions{})
			if err != nil {
				s.failed(ctx, pod, rec, deleting, "get", err)
				return false
			}
			if got.UID != target.UID {
				logger.V(2).Info("Pod in the API was replaced, status not sent", "apiUID", got.UID)
				s.forget(pod, rec, deleting)
				return false
			}
			base = got
		}
		rec.api = base.Status.DeepCopy()
	}

	merged := mergeStatus(rec.api, &st)
	if !statusEqual(rec.api, &merged) {
		patch, err := statusPatch(target.UID, rec.api, &merged)
		if err != nil {
			logger.Error(err, "Cannot compute pod status patch")
			s.backoff(rec)
			return false
		}
		res, err := s.kube.CoreV1().Pods(target.Namespace).Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil {
			s.note(pod, journal.Entry{Kind: journal.KindStatus, Reason: "WriteFailed", Message: "status not written: " + err.Error()})
			s.failed(ctx, pod, rec, deleting, "patch", err)
			return false
		}
		if res != nil && res.UID == target.UID {
			rec.api = res.Status.DeepCopy()
			s.apiMu.Lock()
			s.written[target.UID] = res.ResourceVersion
			s.apiMu.Unlock()
		} else {
			rec.api = &merged
		}
		logger.V(3).Info("Pod status patched", "apiUID", target.UID, "version", version, "phase", merged.Phase, "patch", string(patch))
		s.note(pod, journal.Entry{Kind: journal.KindStatus, Message: "status written: " + Summary(&merged)})
		if since := s.m.markWritten(pod.UID, version); !since.IsZero() {
			metrics.PodStatusSyncDuration.Observe(s.clk.Since(since).Seconds())
		}
	} else {
		s.m.markWritten(pod.UID, version)
	}
	rec.version = version
	rec.failures = 0
	rec.unreachable = false
	if deleting {
		s.delete(ctx, pod, rec)
	}
	return true
}

// reachable is called after a round with a successful call: the API
// server answers again, so pods whose writes failed only because it did
// not are retried in the next round instead of waiting out their backoff. A status that
// changed during an outage reaches the API within a round of its return.
func (s *Syncer) reachable() {
	now := s.clk.Now()
	for _, rec := range s.records {
		if rec.failures > 0 && rec.unreachable && rec.retryAt.After(now) {
			rec.retryAt = now
		}
	}
}

// delete removes a terminated pod from the API with a zero grace period
// and a UID precondition, then forgets it.
func (s *Syncer) delete(ctx context.Context, pod *v1.Pod, rec *record) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	uid := pod.UID
	err := s.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.failed(ctx, pod, rec, false, "delete", err)
		return
	}
	logger.V(2).Info("Pod fully terminated and removed from the API server")
	rec.drop = true
	s.m.RemovePod(pod.UID)
}

// failed handles an API error: a missing or replaced object is forgotten,
// anything else is retried later with backoff.
func (s *Syncer) failed(ctx context.Context, pod *v1.Pod, rec *record, deleting bool, verb string, err error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	// The Node authorizer answers Forbidden, not NotFound, for a pod that
	// is no longer bound to this node, such as one deleted meanwhile.
	goneForNode := verb == "get" && apierrors.IsForbidden(err) && s.opts.GetPod != nil
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || goneForNode {
		logger.V(2).Info("Pod is gone from the API server, status not sent", "verb", verb, "apiUID", rec.target, "reason", apierrors.ReasonForError(err))
		s.forget(pod, rec, deleting)
		return
	}
	rec.api = nil
	var st apierrors.APIStatus
	rec.unreachable = !errors.As(err, &st)
	d := s.backoff(rec)
	logger.Error(fmt.Errorf("%s status of pod %s/%s: %w", verb, pod.Namespace, pod.Name, err), "Failed to update pod status", "retryIn", d)
}

// forget stops writing to the record's API object. A pod that was waiting
// to be deleted has nothing left to wait for and is removed from the
// Manager.
func (s *Syncer) forget(pod *v1.Pod, rec *record, deleting bool) {
	rec.gone = true
	rec.api = nil
	rec.failures = 0
	if deleting {
		rec.drop = true
		s.m.RemovePod(pod.UID)
	}
}

// backoff counts a failure and returns the wait before the next attempt:
// retryBase, doubled per consecutive failure, at most a minute; at
// most the resync period while the API server is unreachable, as that is
// no answer about the pod and the first success retries every pod.
func (s *Syncer) backoff(rec *record) time.Duration {
	rec.failures++
	d := retryBase
	for i := 1; i < rec.failures && d < maxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, maxRetryBackoff)
	if rec.unreachable {
		d = min(d, s.resync)
	}
	rec.retryAt = s.clk.Now().Add(d)
	return d
}

// kubeletShared are conditions other components own but the node agent
// may set too; the agent's value replaces the API's.
var kubeletShared = map[v1.PodConditionType]bool{
	v1.DisruptionTarget: true,
}

// mergeStatus returns the status to write over api, the API's current
// status, given cur, the Manager's status:
//   - conditions the node agent does not own stay as the API has them, in
//     the API's order; the agent's own conditions replace the API's, keeping
//     the API's transition time when the condition's status is unchanged;
//   - a terminal phase in the API is never replaced by another phase;
//   - the API's start time is kept;
//   - fields other components set (nominated node, resource claims,
//     observed generation, QoS class) are kept when cur leaves them empty.
func mergeStatus(api, cur *v1.PodStatus) v1.PodStatus {
	out := *cur.DeepCopy()

	owned := func(t v1.PodConditionType) bool { return kubeletConditions[t] || kubeletShared[t] }
	conds := make([]v1.PodCondition, 0, len(api.Conditions)+len(cur.Conditions))
	placed := map[v1.PodConditionType]bool{}
	for _, ac := range api.Conditions {
		if !owned(ac.Type) {
			conds = append(conds, *ac.DeepCopy())
			continue
		}
		if c := findCondition(cur.Conditions, ac.Type); c != nil && !placed[ac.Type] {
			conds = append(conds, mergedCondition(&ac, c))
			placed[ac.Type] = true
		} else if kubeletShared[ac.Type] {
			conds = append(conds, *ac.DeepCopy())
		}
	}
	for i := range cur.Conditions {
		c := &cur.Conditions[i]
		if owned(c.Type) && !placed[c.Type] {
			conds = append(conds, *c.DeepCopy())
			placed[c.Type] = true
		}
	}
	out.Conditions = conds
	if len(out.Conditions) == 0 {
		out.Conditions = nil
	}

	if podspec.IsTerminalPhase(api.Phase) && out.Phase != api.Phase {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}
	if api.StartTime != nil && !api.StartTime.IsZero() {
		t := *api.StartTime
		out.StartTime = &t
	}
	if out.NominatedNodeName == "" {
		out.NominatedNodeName = api.NominatedNodeName
	}
	if out.ObservedGeneration == 0 {
		out.ObservedGeneration = api.ObservedGeneration
	}
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	if len(out.ResourceClaimStatuses) == 0 {
		out.ResourceClaimStatuses = api.ResourceClaimStatuses
	}
	if out.ExtendedResourceClaimStatus == nil {
		out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	}
	if len(out.NodeAllocatableResourceClaimStatuses) == 0 {
		out.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
	}
	return out
}

// mergedCondition is cur, with the API's transition time when the status
// did not change.
func mergedCondition(api, cur *v1.PodCondition) v1.PodCondition {
	c := *cur.DeepCopy()
	if api.Status == c.Status && !api.LastTransitionTime.IsZero() {
		c.LastTransitionTime = api.LastTransitionTime
	}
	return c
}

// statusEqual compares two statuses as the API would store them.
func statusEqual(a, b *v1.PodStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// statusPatch returns the strategic merge patch from old to cur for a pod
// whose UID is uid. The UID appears only on the new side, so the patch
// always carries metadata.uid and the API server refuses it (conflict)
// for any other pod of the same name.
func statusPatch(uid types.UID, old, cur *v1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(v1.Pod{Status: *old})
	if err != nil {
		return nil, fmt.Errorf("encode old status of pod %s: %w", uid, err)
	}
	newJSON, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *cur})
	if err != nil {
		return nil, fmt.Errorf("encode new status of pod %s: %w", uid, err)
	}
	patch, err := mergepatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("create status patch of pod %s: %w", uid, err)
	}
	return patch, nil
}

// isMirror reports whether pod is a mirror pod.
func isMirror(pod *v1.Pod) bool {
	_, ok := pod.Annotations[podconfig.AnnotationConfigMirror]
	return ok
}
