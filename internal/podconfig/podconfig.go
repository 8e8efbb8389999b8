// Package podconfig merges the pods wanted by every pod source (static pod
// files today; the API server and an HTTP URL later) into one desired set and
// turns each source's successive snapshots into an ordered stream of typed
// changes (add, update, remove) keyed by pod UID.
//
// A source always delivers its full current set with Set; Config computes the
// difference to what that source delivered before. Updates wait in a
// queue, coalesced per pod UID, and are handed to the Updates channel by a
// single short-lived goroutine, so Set never blocks on a slow consumer. A
// change to a pod whose previous change is still waiting folds into it: an
// update replaces the waiting add's or update's pod, a removal replaces a
// waiting update and cancels a waiting add (the consumer never saw the
// pod). So at most two changes per UID wait (a removal, then the add of a
// pod that comes back with that UID), the queue is bounded by the number
// of pods, and the consumer still sees, per UID, a valid sequence that
// ends in the current state. The consumer must keep draining Updates.
// Delivery ends with the context given to New: afterwards nothing more is
// delivered and no goroutine is left waiting for a consumer.
package podconfig

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Pod annotations that record where a pod came from, shared by every source.
const (
	// AnnotationConfigHash holds the hash a file or HTTP source derived the
	// pod's UID from.
	AnnotationConfigHash = "kubernetes.io/config.hash"
	// AnnotationConfigSource names the source that delivered the pod
	// (SourceFile, SourceHTTP or SourceAPIServer).
	AnnotationConfigSource = "kubernetes.io/config.source"
	// AnnotationConfigSeen is the RFC 3339 (nanoseconds) time the pod was
	// first seen. It is not part of the pod's identity: a change of this
	// annotation alone is not an update.
	AnnotationConfigSeen = "kubernetes.io/config.seen"
	// AnnotationConfigMirror marks a mirror pod (the API copy of a static pod).
	AnnotationConfigMirror = "kubernetes.io/config.mirror"
)

// Source names, also the values of AnnotationConfigSource.
const (
	SourceFile      = "file"
	SourceHTTP      = "http"
	SourceAPIServer = "api"
)

// Op is the kind of change an Update describes.
type Op int

const (
	// OpAdd reports a pod UID that was not desired before.
	OpAdd Op = iota + 1
	// OpUpdate reports a desired pod whose spec, labels or annotations
	// (other than AnnotationConfigSeen), deletion timestamp, deletion
	// grace period or readiness gate conditions changed, with the same
	// UID.
	OpUpdate
	// OpRemove reports a pod UID that is no longer desired; Pod is the last
	// version that was desired.
	OpRemove
)

// String returns the operation's name.
func (o Op) String() string {
	switch o {
	case OpAdd:
		return "add"
	case OpUpdate:
		return "update"
	case OpRemove:
		return "remove"
	default:
		return "unknown"
	}
}

// Update is one change to the desired pod set. Pod is a private copy the
// receiver may keep and modify.
type Update struct {
	Op  Op
	Pod *v1.Pod
}

// Config is the merged desired pod set of all sources. It is safe for
// concurrent use.
type Config struct {
	clock clock.PassiveClock
	// ctx ends delivery.
	ctx context.Context

	mu sync.Mutex
	// pods holds each source's current pods by UID.
	pods map[string]map[types.UID]*v1.Pod
	// owner records which source a UID belongs to.
	owner map[types.UID]string
	// seen records the sources that have called Set at least once.
	seen map[string]bool
	// queue holds changes not yet handed to out, coalesced per UID (the
	// one being handed over has left it); pumping is true while the
	// delivery goroutine runs.
	queue   []Update
	pumping bool
	out     chan Update
	// queued counts the updates that were or will be delivered: every
	// change queued, less those coalesced away.
	queued int
}

// New returns an empty Config. It starts no goroutine: delivery runs only
// while changes are queued and ctx is not done.
func New(ctx context.Context) *Config {
	return &Config{
		ctx:   ctx,
		clock: clock.RealClock{},
		pods:  map[string]map[types.UID]*v1.Pod{},
		owner: map[types.UID]string{},
		seen:  map[string]bool{},
		out:   make(chan Update),
	}
}

// Updates returns the channel on which every change is delivered, in order.
// There is one channel per Config; it is never closed.
func (c *Config) Updates() <-chan Update {
	return c.out
}

// Set replaces the full set of pods wanted by source and queues the changes
// against what source delivered before: OpRemove for UIDs that disappeared
// (first, so a replaced pod is released before its successor arrives), then
// OpAdd and OpUpdate in the order of pods. Pods are copied; the caller keeps
// ownership of its slice. A pod without a UID is ignored, as is a UID
// already owned by another source (UIDs are expected to be unique across
// sources). Set never blocks on the consumer of Updates. It compares every
// pod of the set with what source delivered before; a source that knows
// what changed calls Apply instead.
func (c *Config) Set(source string, pods []*v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.seen[source] = true
	old := c.pods[source]
	next := make(map[types.UID]*v1.Pod, len(pods))
	now := c.clock.Now()
	var adds []Update
	for _, p := range pods {
		if !c.acceptable(source, p, next) {
			continue
		}
		if u, ok := c.upsertLocked(source, old[p.UID], p, now); ok {
			next[p.UID] = u.Pod
			adds = append(adds, u)
		} else {
			next[p.UID] = old[p.UID]
		}
	}
	var removes []*v1.Pod
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, p)
		}
	}
	c.pods[source] = next
	c.queueLocked(source, removes, adds)
}

// Apply changes the pods wanted by source by a delta and queues the
// changes, as Set does for a full set: the pods of changed are added, or
// replace the pod of their UID (an OpUpdate only when the pod changed in
// what a worker acts on), and the UIDs of removed are no longer wanted
// (removed UIDs go first, then changed pods, so a pod both removed and in
// changed is wanted afterwards). Its cost is that of the pods named, not of
// every pod source wants. The same rules as Set hold for pods without a
// UID, UIDs of other sources and copying. Apply is not a full set: it does
// not count as source's delivery for SeenAllSources.
func (c *Config) Apply(source string, changed []*v1.Pod, removed []types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()

	cur := c.pods[source]
	if cur == nil {
		cur = map[types.UID]*v1.Pod{}
		c.pods[source] = cur
	}
	gone := make(map[types.UID]*v1.Pod, len(removed))
	for _, uid := range removed {
		if p, ok := cur[uid]; ok {
			gone[uid] = p
			delete(cur, uid)
		}
	}
	now := c.clock.Now()
	seen := make(map[types.UID]*v1.Pod, len(changed))
	var adds []Update
	for _, p := range changed {
		if !c.acceptable(source, p, seen) {
			continue
		}
		seen[p.UID] = p
		// A UID removed and wanted again in the same delta is an update
		// (or nothing) to the consumer, not a removal and an add.
		prev, ok := cur[p.UID]
		if !ok {
			prev = gone[p.UID]
		}
		if u, ok := c.upsertLocked(source, prev, p, now); ok {
			cur[p.UID] = u.Pod
			adds = append(adds, u)
		} else {
			cur[p.UID] = prev
		}
	}
	var removes []*v1.Pod
	for uid, p := range gone {
		if _, back := cur[uid]; !back {
			removes = append(removes, p)
		}
	}
	c.queueLocked(source, removes, adds)
}

// acceptable reports whether source may deliver p: it has a UID not
// already in this delivery (dup) and not owned by another source. Callers
// hold c.mu.
func (c *Config) acceptable(source string, p *v1.Pod, dup map[types.UID]*v1.Pod) bool {
	if p == nil {
		return false
	}
	uid := p.UID
	if uid == "" {
		klog.InfoS("Ignoring pod without UID", "source", source, "pod", klog.KObj(p))
		return false
	}
	if _, ok := dup[uid]; ok {
		klog.InfoS("Ignoring pod with duplicate UID", "source", source, "pod", klog.KObj(p), "podUID", uid)
		return false
	}
	if o, ok := c.owner[uid]; ok && o != source {
		klog.InfoS("Ignoring pod whose UID belongs to another source", "source", source, "owner", o, "pod", klog.KObj(p), "podUID", uid)
		return false
	}
	return true
}

// upsertLocked returns the change that p, delivered by source, makes to
// prev (nil: not wanted before): an OpAdd or OpUpdate with a private copy
// of p carrying the source and first-seen annotations, and false when p
// changed nothing a worker acts on. Callers hold c.mu.
func (c *Config) upsertLocked(source string, prev, p *v1.Pod, now time.Time) (Update, bool) {
	if prev != nil && !changed(prev, p) {
		return Update{}, false
	}
	cp := p.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	if cp.Annotations[AnnotationConfigSource] == "" {
		cp.Annotations[AnnotationConfigSource] = source
	}
	switch {
	case prev != nil && prev.Annotations[AnnotationConfigSeen] != "":
		// The first-seen time survives updates.
		cp.Annotations[AnnotationConfigSeen] = prev.Annotations[AnnotationConfigSeen]
	case cp.Annotations[AnnotationConfigSeen] == "":
		cp.Annotations[AnnotationConfigSeen] = now.Format(time.RFC3339Nano)
	}
	if prev != nil {
		return Update{Op: OpUpdate, Pod: cp}, true
	}
	return Update{Op: OpAdd, Pod: cp}, true
}

// queueLocked queues the removals (sorted by namespace and name, their
// UIDs released) and then the adds and updates, new pods oldest first.
// Callers hold c.mu.
func (c *Config) queueLocked(source string, removes []*v1.Pod, adds []Update) {
	for _, p := range removes {
		delete(c.owner, p.UID)
	}
	sortPods(removes)
	for _, p := range removes {
		c.enqueue(Update{Op: OpRemove, Pod: p.DeepCopy()})
	}
	// New pods are handed on oldest first, so admission (which counts the
	// pods admitted before) decides in creation order, as upstream.
	sort.SliceStable(adds, func(i, j int) bool {
		return adds[i].Pod.CreationTimestamp.Before(&adds[j].Pod.CreationTimestamp)
	})
	for _, u := range adds {
		c.owner[u.Pod.UID] = source
		c.enqueue(Update{Op: u.Op, Pod: u.Pod.DeepCopy()})
	}
}

// SeenAllSources reports whether every expected source has delivered its
// set at least once.
func (c *Config) SeenAllSources(expected ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range expected {
		if !c.seen[s] {
			return false
		}
	}
	return true
}

// Pods returns copies of all desired pods of all sources, sorted by
// namespace and name.
func (c *Config) Pods() []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*v1.Pod
	for _, set := range c.pods {
		for _, p := range set {
			out = append(out, p.DeepCopy())
		}
	}
	sortPods(out)
	return out
}

// SharedPods returns the desired pods of all sources themselves, sorted by
// namespace and name, without copying them: the caller must not modify
// them. A pod returned never changes either (a change replaces the pod
// kept), so it can be read without a lock. It costs one slice where Pods
// copies every pod.
func (c *Config) SharedPods() []*v1.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*v1.Pod
	for _, set := range c.pods {
		for _, p := range set {
			out = append(out, p)
		}
	}
	sortPods(out)
	return out
}

// enqueue queues u, folded into the change of the same UID still waiting
// when there is one, and starts delivery if it is idle. Callers hold c.mu.
func (c *Config) enqueue(u Update) {
	if !c.coalesce(u) {
		c.queue = append(c.queue, u)
		c.queued++
	}
	if !c.pumping && c.ctx.Err() == nil {
		c.pumping = true
		go c.pump()
	}
}

// coalesce folds u into the last waiting change of its UID and reports
// whether it did. Callers hold c.mu.
func (c *Config) coalesce(u Update) bool {
	i := len(c.queue) - 1
	for ; i >= 0 && c.queue[i].Pod.UID != u.Pod.UID; i-- {
	}
	if i < 0 {
		return false
	}
	last := &c.queue[i]
	switch {
	case u.Op == OpUpdate && (last.Op == OpAdd || last.Op == OpUpdate):
		last.Pod = u.Pod
	case u.Op == OpRemove && last.Op == OpUpdate:
		*last = u
	case u.Op == OpRemove && last.Op == OpAdd:
		c.queue = append(c.queue[:i], c.queue[i+1:]...)
		c.queued--
	default:
		return false
	}
	return true
}

// pump hands queued updates to the channel one at a time, in order, and
// exits when the queue is empty or the context is done (what is left
// queued then is never delivered).
func (c *Config) pump() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.ctx.Err() != nil {
			c.pumping = false
			c.queue = nil
			c.mu.Unlock()
			return
		}
		u := c.queue[0]
		c.queue[0] = Update{}
		c.queue = c.queue[1:]
		c.mu.Unlock()
		select {
		case c.out <- u:
		case <-c.ctx.Done():
		}
	}
}

// changed reports whether next differs from prev in anything a pod worker
// acts on: spec, labels, annotations other than AnnotationConfigSeen and
// AnnotationConfigSource, deletion metadata, and the status conditions
// its readiness gates name (others set them through the API; the pod's
// Ready condition follows them, as upstream reconciles pod readiness).
func changed(prev, next *v1.Pod) bool {
	if gateConditionsChanged(prev, next) {
		return true
	}
	if !equality.Semantic.DeepEqual(prev.Spec, next.Spec) {
		return true
	}
	if !equality.Semantic.DeepEqual(prev.Labels, next.Labels) {
		return true
	}
	if !equality.Semantic.DeepEqual(identityAnnotations(prev), identityAnnotations(next)) {
		return true
	}
	if !equality.Semantic.DeepEqual(prev.DeletionTimestamp, next.DeletionTimestamp) {
		return true
	}
	return !equality.Semantic.DeepEqual(prev.DeletionGracePeriodSeconds, next.DeletionGracePeriodSeconds)
}

// gateConditionsChanged reports whether a condition named by one of
// next's readiness gates differs in status between prev and next, or
// exists in only one of them.
func gateConditionsChanged(prev, next *v1.Pod) bool {
	for _, g := range next.Spec.ReadinessGates {
		p, pok := conditionStatus(prev, g.ConditionType)
		n, nok := conditionStatus(next, g.ConditionType)
		if pok != nok || p != n {
			return true
		}
	}
	return false
}

func conditionStatus(p *v1.Pod, t v1.PodConditionType) (v1.ConditionStatus, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status, true
		}
	}
	return "", false
}

// identityAnnotations returns the pod's annotations without the ones Config
// fills in itself.
func identityAnnotations(p *v1.Pod) map[string]string {
	out := make(map[string]string, len(p.Annotations))
	for k, v := range p.Annotations {
		if k == AnnotationConfigSeen || k == AnnotationConfigSource {
			continue
		}
		out[k] = v
	}
	return out
}

func sortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		if pods[i].Name != pods[j].Name {
			return pods[i].Name < pods[j].Name
		}
		return pods[i].UID < pods[j].UID
	})
}

// IsStatic reports whether pod came from a source other than the API server
// (a static pod).
func IsStatic(pod *v1.Pod) bool {
	s := pod.Annotations[AnnotationConfigSource]
	return s != "" && s != SourceAPIServer
}
