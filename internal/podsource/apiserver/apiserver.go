// Package apiserver is the cluster pod source: it watches the pods the
// scheduler (or a user) bound to this node and delivers the full set of them
// once, then every change to it as a delta of the pods that changed.
//
// Rules:
//
//   - Only pods with spec.nodeName equal to this node are listed and
//     watched; the field selector is part of every list and watch request,
//     as the Node authorizer refuses a node's unrestricted pod list.
//   - The first set is delivered only once the initial list is complete, so
//     a consumer that waits for every source before removing anything never
//     removes a pod because the API source had not spoken yet.
//   - After that, every add, update and delete leads to a delivery of a
//     delta: the pods added or updated since the last delivery and the UIDs
//     of the pods gone (deleted, turned mirror pod, or replaced by a pod of
//     the same name and another UID). Its cost is that of the pods changed,
//     not of every pod bound to the node. Bursts of events are coalesced
//     into one delivery: the informer's handler only records the pod's key
//     and raises a signal and never blocks; one goroutine builds and
//     delivers the delta.
//   - Each delivered pod is a private deep copy, annotated with
//     kubernetes.io/config.source=api (overriding any value the object
//     carries, so an API pod can never pass for a static pod) and
//     kubernetes.io/config.seen, the time this source first saw the pod's UID.
//     The informer's cache is never modified.
//   - Mirror pods (the API copies of static pods, annotated
//     kubernetes.io/config.mirror) are not desired pods and are left out of
//     the set; MirrorPods returns them for the mirror pod manager.
//   - Pods in a terminal phase (Succeeded or Failed) stay in the set until
//     they are deleted from the API: the pod workers see the phase in the
//     delivered status and must not start them again. A pod deleted from the
//     API is removed by the next delta.
//   - There is no periodic resync of the informer; the pod workers resync on
//     their own.
package apiserver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/apiwait"
	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/podconfig"
)

// KubeClient is the API group the node's pods are watched with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// SourceName is the name of this source in podconfig, also the value of the
// kubernetes.io/config.source annotation of its pods.
const SourceName = podconfig.SourceAPIServer

// nodeNameField is the pod field the list and watch requests select on.
const nodeNameField = "spec.nodeName"

// Sink receives what the source delivers. Its methods are called from one
// goroutine of Run at a time and may block (later changes are then
// coalesced into the next delivery); the sink owns the pods it receives.
type Sink interface {
	// Set receives the full set of the node's desired pods, once, after
	// the initial list.
	Set(pods []*v1.Pod)
	// Apply receives a change to the set last delivered: pods added or
	// updated (possibly unchanged in what a worker acts on, as a status
	// update), then the UIDs no longer desired.
	Apply(changed []*v1.Pod, removed []types.UID)
}

// Source watches the pods bound to one node.
type Source struct {
	nodeName string
	sink     Sink
	clock    clock.PassiveClock
	informer cache.SharedIndexInformer

	// signal holds at most one pending "the set changed" notice.
	signal  chan struct{}
	synced  atomic.Bool
	running atomic.Bool

	// dirtyMu guards dirty, the keys (namespace/name) of the pods an
	// event named since the last delivery.
	dirtyMu sync.Mutex
	dirty   map[string]struct{}

	// firstSeen records when each delivered UID was first seen (RFC 3339
	// with nanoseconds); delivered is the UID delivered for each key.
	// Both are owned by the goroutine that delivers.
	firstSeen map[types.UID]string
	delivered map[string]types.UID

	// updated, if set, is called with every pod the watch updates.
	updated func(*v1.Pod)
	// waitBack, if set, waits for the API server to be reachable again
	// after a failed list or watch (see RetryWhenBack).
	waitBack apiwait.WaitFunc
}

// RetryWhenBack makes a list or watch that failed call wait with the time
// the request started and, when it returns true, try again at once. wait
// should return true at once if the API server became reachable again
// since then, false at once if it is not known to be unreachable, and
// otherwise block until it is reachable again (true) or a bound passes
// (false); the informer retries with its own backoff after false. It must
// be called before Run.
func (s *Source) RetryWhenBack(wait apiwait.WaitFunc) {
	s.waitBack = wait
}

// OnUpdate has fn called with every pod of the node (mirror pods too) the
// watch reports updated, from the informer's goroutine, with the cache's
// own object: fn must only read it, must not keep it, and must not block.
// It must be called before Run.
func (s *Source) OnUpdate(fn func(*v1.Pod)) {
	s.updated = fn
}

// New returns a source for the pods bound to node nodeName, read through
// kube, that delivers to sink (nil: nowhere). New starts nothing.
func New(kube KubeClient, nodeName string, sink Sink) *Source {
	if sink == nil {
		sink = discard{}
	}
	selector := fields.OneTermEqualSelector(nodeNameField, nodeName).String()
	pods := kube.CoreV1().Pods(metav1.NamespaceAll)
	s := &Source{
		nodeName:  nodeName,
		sink:      sink,
		clock:     clock.RealClock{},
		signal:    make(chan struct{}, 1),
		dirty:     map[string]struct{}{},
		firstSeen: map[types.UID]string{},
		delivered: map[string]types.UID{},
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return apiwait.RetryWhenBack(ctx, s.waitBack, func() (runtime.Object, error) { return pods.List(ctx, opts) })
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return apiwait.RetryWhenBack(ctx, s.waitBack, func() (watch.Interface, error) { return pods.Watch(ctx, opts) })
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(lw, kube),
		&v1.Pod{},
		cache.SharedIndexInformerOptions{ObjectDescription: "pods of node " + nodeName},
	)
	// Managed fields are never read here; dropping them before the object
	// is stored keeps the cache small. The error is only returned once the
	// informer has started, which it has not.
	_ = informer.SetTransform(dropManagedFields)
	s.informer = informer
	return s
}

// discard is the sink of a source given none.
type discard struct{}

func (discard) Set([]*v1.Pod)                {}
func (discard) Apply([]*v1.Pod, []types.UID) {}

// HasSynced reports whether the initial list of the node's pods is
// complete. It turns true just before the first set is handed to the sink;
// from then on MirrorPods is complete too.
func (s *Source) HasSynced() bool {
	return s.synced.Load()
}

// MirrorPods returns copies of the mirror pods bound to this node, sorted by
// UID, from the informer's cache. Until HasSynced reports true the list may
// be incomplete.
func (s *Source) MirrorPods() []*v1.Pod {
	var out []*v1.Pod
	for _, obj := range s.informer.GetStore().List() {
		p, ok := obj.(*v1.Pod)
		if !ok || p.Spec.NodeName != s.nodeName || !isMirror(p) {
			continue
		}
		out = append(out, p.DeepCopy())
	}
	sortByUID(out)
	return out
}

// Pod returns a copy of the node's pod namespace/name as the informer's
// cache holds it, status included (a mirror pod too), and false when the
// cache has no such pod bound to this node. It costs one lookup whatever
// the number of pods.
func (s *Source) Pod(namespace, name string) (*v1.Pod, bool) {
	p, ok := s.SharedPod(namespace, name)
	if !ok {
		return nil, false
	}
	return p.DeepCopy(), true
}

// SharedPod is Pod without the copy: the pod is the informer cache's own
// object, which the caller must not modify (the cache replaces it, never
// changes it, so it stays consistent while the caller reads it).
func (s *Source) SharedPod(namespace, name string) (*v1.Pod, bool) {
	obj, ok, err := s.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName != s.nodeName {
		return nil, false
	}
	return p, true
}

// Run lists and watches the node's pods and delivers the full set after the
// initial list and after every change, until ctx is done; then it returns
// nil. Failing list or watch requests are retried with backoff by the
// informer and logged; they do not end Run. Run may be called only once.
func (s *Source) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return fmt.Errorf("api pod source of node %s: already running", s.nodeName)
	}
	logger := klog.FromContext(ctx).WithValues("source", SourceName, "node", s.nodeName)
	ctx = klog.NewContext(ctx, logger)

	reg, err := s.informer.AddEventHandlerWithOptions(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			// The initial list is delivered as a whole once it is complete.
			if !initial {
				s.mark(obj)
			}
		},
		UpdateFunc: func(_, obj any) {
			s.mark(obj)
			if p, ok := obj.(*v1.Pod); ok && s.updated != nil {
				s.updated(p)
			}
		},
		DeleteFunc: func(obj any) { s.mark(obj) },
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return fmt.Errorf("watch pods of node %s: %w", s.nodeName, err)
	}

	// The informer stops with ctx; Run waits for it so nothing outlives Run.
	var wg sync.WaitGroup
	wg.Go(func() { s.informer.RunWithContext(ctx) })
	defer wg.Wait()

	// The handler has seen the initial list only after the cache is
	// complete, so waiting for it covers both.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}
	// Changes already recorded are part of the first delivery: the keys
	// are dropped before the cache is read, so a change after that is in
	// the next delta (possibly once more).
	select {
	case <-s.signal:
	default:
	}
	s.takeDirty()
	s.synced.Store(true)
	n := s.deliverAll(ctx)
	logger.Info("Listed pods bound to node", "pods", n)

	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.signal:
		}
		s.deliverChanges(ctx)
	}
}

// mark records that the pod obj (a *v1.Pod, or the tombstone of a delete
// the informer missed) changed and signals the delivering goroutine. It
// never blocks: a notice already pending covers this change too.
func (s *Source) mark(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.dirtyMu.Lock()
	s.dirty[key] = struct{}{}
	s.dirtyMu.Unlock()
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// takeDirty returns the keys recorded since the last call, sorted, and
// starts a new record.
func (s *Source) takeDirty() []string {
	s.dirtyMu.Lock()
	d := s.dirty
	s.dirty = map[string]struct{}{}
	s.dirtyMu.Unlock()
	return slices.Sorted(maps.Keys(d))
}

// deliverAll hands the full current set from the informer's cache to the
// sink and returns its size.
func (s *Source) deliverAll(ctx context.Context) int {
	now := s.clock.Now().Format(time.RFC3339Nano)
	var pods []*v1.Pod
	for _, obj := range s.informer.GetStore().List() {
		p, ok := obj.(*v1.Pod)
		if !ok || !s.desired(p) {
			continue
		}
		pods = append(pods, s.copyOf(p, now))
	}
	sortByUID(pods)
	klog.FromContext(ctx).V(4).Info("Delivering pods bound to node", "pods", len(pods))
	s.sink.Set(pods)
	return len(pods)
}

// deliverChanges hands the sink the delta of the pods whose keys were
// recorded since the last delivery, each read from the informer's cache.
func (s *Source) deliverChanges(ctx context.Context) {
	now := s.clock.Now().Format(time.RFC3339Nano)
	var changed []*v1.Pod
	var removed []types.UID
	store := s.informer.GetStore()
	for _, key := range s.takeDirty() {
		var p *v1.Pod
		if obj, ok, err := store.GetByKey(key); err == nil && ok {
			p, _ = obj.(*v1.Pod)
		}
		prev, had := s.delivered[key]
		if had && (p == nil || !s.desired(p) || p.UID != prev) {
			removed = append(removed, prev)
			delete(s.delivered, key)
			delete(s.firstSeen, prev)
		}
		if p != nil && s.desired(p) {
			changed = append(changed, s.copyOf(p, now))
		}
	}
	if len(changed) == 0 && len(removed) == 0 {
		return
	}
	sortByUID(changed)
	klog.FromContext(ctx).V(4).Info("Delivering changed pods bound to node", "changed", len(changed), "removed", len(removed))
	s.sink.Apply(changed, removed)
}

// desired reports whether p, a pod of the informer's cache, is a desired
// pod of this node (not a mirror pod).
func (s *Source) desired(p *v1.Pod) bool {
	return p.Spec.NodeName == s.nodeName && !isMirror(p)
}

// copyOf returns the copy of p that is delivered, annotated with this
// source and the time its UID was first seen (now for a new UID), and
// records it as delivered.
func (s *Source) copyOf(p *v1.Pod, now string) *v1.Pod {
	first, ok := s.firstSeen[p.UID]
	if !ok {
		first = now
		s.firstSeen[p.UID] = first
	}
	s.delivered[p.Namespace+"/"+p.Name] = p.UID
	cp := p.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[podconfig.AnnotationConfigSource] = SourceName
	cp.Annotations[podconfig.AnnotationConfigSeen] = first
	return cp
}

// dropManagedFields clears the managed fields of a pod on its way into the
// informer's cache.
func dropManagedFields(obj any) (any, error) {
	if p, ok := obj.(*v1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

// isMirror reports whether p is a mirror pod.
func isMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[podconfig.AnnotationConfigMirror]
	return ok
}

func sortByUID(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].UID < pods[j].UID })
}
