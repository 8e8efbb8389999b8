// Package nodestatus keeps the node's Node object and Lease in the API
// server: it registers the Node, reports its capacity, allocatable
// resources, conditions, addresses, machine and version information and
// images, and renews the node Lease, the heartbeat the control plane uses to
// decide that the node is alive.
package nodestatus

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/apiwait"
	"github.com/heartlet/heartlet/internal/kubeapi"
)

// KubeClient is the API groups the Node and its Lease are written with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
	CoordinationV1() kubeapi.CoordinationV1Interface
}

// Defaults, as the upstream kubelet's.
const (
	DefaultUpdateFrequency = 10 * time.Second
	DefaultReportFrequency = 5 * time.Minute
	DefaultLeaseDuration   = 40
	DefaultMaxPods         = 110
	DefaultMaxImages       = 50
	DefaultPort            = 10250
	// LeaseNamespace holds every node's Lease.
	LeaseNamespace = "kube-node-lease"
)

// RuntimeInfo is what the node status needs from the container runtime.
// When it also has Status(ctx) (*runtimeapi.StatusResponse, error), as
// *runtime.Runtime does, the runtime's RuntimeReady and NetworkReady
// conditions count for the node's Ready condition.
type RuntimeInfo interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
}

// runtimeStatus is the optional part of RuntimeInfo.
type runtimeStatus interface {
	Status(ctx context.Context) (*runtimeapi.StatusResponse, error)
}

// Pressure reports the node's resource pressure (the eviction manager's
// view). A nil Pressure means no pressure.
type Pressure interface {
	MemoryPressure() bool
	DiskPressure() bool
	PIDPressure() bool
}

// EventRecorder records events about an object; it must not block.
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// Options configures the node status.
type Options struct {
	// NodeName is the Node object's name.
	NodeName string
	// NodeIPs are the --node-ip addresses; empty means detect one.
	NodeIPs []string
	// Hostname is the kubernetes.io/hostname label and the Hostname
	// address; "" means NodeName.
	Hostname string
	// RegisterNode creates the Node when it does not exist (registerNode).
	RegisterNode bool
	// Labels are added at registration (nodeLabels).
	Labels map[string]string
	// Taints are set at registration (registerWithTaints).
	Taints []v1.Taint
	// ProviderID is spec.providerID, set at registration (providerID).
	ProviderID string
	// MaxPods is the pods capacity; 0 means 110.
	MaxPods int
	// MaxImages caps the images reported, largest first
	// (nodeStatusMaxImages): nil means 50, -1 (any negative) no cap, 0 no
	// images at all, as upstream.
	MaxImages *int32
	// Reserved is kubeReserved plus systemReserved.
	Reserved v1.ResourceList
	// EvictionHard are the hard eviction thresholds; memory.available and
	// nodefs.available reduce allocatable memory and ephemeral-storage.
	EvictionHard map[string]string
	// UpdateFrequency is how often the status is computed
	// (nodeStatusUpdateFrequency); 0 means 10 s.
	UpdateFrequency time.Duration
	// ReportFrequency is how often an unchanged status is still written
	// (nodeStatusReportFrequency); 0 means 5 min.
	ReportFrequency time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds
	// (nodeLeaseDurationSeconds); it is renewed every quarter of it. 0
	// means 40.
	LeaseDuration int32
	// Version is heartlet's version; nodeInfo.kubeletVersion is
	// version.Kubelet(Version).
	Version string
	// Port is daemonEndpoints.kubeletEndpoint.port; 0 means 10250.
	Port int32
	// RootDir is the root directory; its filesystem's size is the
	// ephemeral-storage capacity.
	RootDir string
	// NoLocalStorage leaves ephemeral-storage out of capacity and
	// allocatable (localStorageCapacityIsolation false), as upstream: pods
	// requesting it are then refused at admission.
	NoLocalStorage bool
	// Heartbeat, when set, is used for status patches and Lease renewals
	// (a client without client-side rate limiting); otherwise the main
	// client is.
	Heartbeat KubeClient
	// Recorder records node events (NodeReady, NodeNotReady, pressure
	// transitions, Starting, Rebooted); nil records none.
	Recorder EventRecorder
	// Pressure reports resource pressure; nil means none.
	Pressure Pressure
	// OnRepeatedFailure is called when a status update or Lease renewal
	// fails again after a retry, e.g. to close the client's connections.
	OnRepeatedFailure func()
	// WaitBack, if set, lets the Node's watch, failed while the API
	// server was unreachable, resume as soon as it is back
	// (kubeclient.Reachability).
	WaitBack apiwait.WaitFunc
	// DeclaredFeatures are status.declaredFeatures (NodeDeclaredFeatures,
	// GA in 1.37): the features, named as upstream's registry
	// (k8s.io/component-helpers/nodedeclaredfeatures) names them, that
	// heartlet implements. The API server refuses a pod update that needs
	// a feature the node does not declare.
	DeclaredFeatures []string
	// VolumesInUse lists the attachable volumes mounted for pods
	// (status.volumesInUse, which the attach-detach controller reads before
	// it detaches); nil reports none.
	VolumesInUse func() []v1.UniqueVolumeName
}

// Manager keeps the Node and its Lease up to date.
type Manager struct {
	kube      KubeClient
	heartbeat KubeClient
	clk       clock.WithTicker
	opts      Options
	rt        RuntimeInfo
	ready     []func() error
	host      host

	informer cache.SharedIndexInformer
	trigger  chan struct{}
	// cacheStale means a call to the API server failed since the watch
	// last delivered the Node: the watch may be down too, waiting out its
	// backoff, and its copy older than what the API holds (the node
	// lifecycle controller marks a node it lost Unknown). The status is
	// then computed from a fresh read until the watch delivers again.
	cacheStale atomic.Bool

	mu          sync.Mutex
	last        *v1.Node // the last Node the API returned to us
	allocatable v1.ResourceList
	running     bool

	// Owned by the status loop.
	registered     bool
	lastReport     time.Time
	images         []v1.ContainerImage
	runtimeVersion string
	rebootReported bool

	// Owned by the lease loop.
	lease *coordinationv1.Lease
	// jitter returns a number in [0, 1) that spreads the renewals (rand).
	jitter func() float64
}

// New returns a Manager. ready funcs are further readiness checks: the
// node is Ready only when the runtime answers and every one returns nil.
// New has no side effects.
func New(kube KubeClient, clk clock.WithTicker, opts Options, rt RuntimeInfo, ready ...func() error) *Manager {
	if opts.Hostname == "" {
		opts.Hostname = opts.NodeName
	}
	if opts.MaxPods == 0 {
		opts.MaxPods = DefaultMaxPods
	}
	if opts.MaxImages == nil {
		opts.MaxImages = ptr.To[int32](DefaultMaxImages)
	}
	if opts.UpdateFrequency <= 0 {
		opts.UpdateFrequency = DefaultUpdateFrequency
	}
	if opts.ReportFrequency <= 0 {
		opts.ReportFrequency = DefaultReportFrequency
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	hb := opts.Heartbeat
	if hb == nil {
		hb = kube
	}
	m := &Manager{
		jitter:    rand.Float64,
		kube:      kube,
		heartbeat: hb,
		clk:       clk,
		opts:      opts,
		rt:        rt,
		ready:     ready,
		host:      realHost(),
		trigger:   make(chan struct{}, 1),
	}
	m.informer = newNodeInformer(kube, opts.NodeName, opts.WaitBack)
	return m
}

// newNodeInformer watches this node's Node object only.
func newNodeInformer(kube KubeClient, name string, wait apiwait.WaitFunc) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return kube.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return kube.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(apiwait.ResumeListWatch(lw, wait), &v1.Node{}, 0, cache.Indexers{})
	// SetTransform fails only once the informer has started.
	_ = inf.SetTransform(dropManagedFields)
	return inf
}

// dropManagedFields clears the managed fields of a Node on its way into
// the informer's cache: heartlet never reads them, and every writer of the
// Node adds to them. The Node is copied (shallowly), never changed in
// place. Other objects pass through unchanged.
func dropManagedFields(obj any) (any, error) {
	n, ok := obj.(*v1.Node)
	if !ok || n.ManagedFields == nil {
		return obj, nil
	}
	c := *n
	c.ManagedFields = nil
	return &c, nil
}

// Run registers the Node when asked to, then keeps its status and Lease up
// to date until ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("nodestatus: Run called more than once")
	}
	m.running = true
	m.mu.Unlock()

	logger := klog.FromContext(ctx)
	logger.Info("Starting node status", "node", m.opts.NodeName, "updateFrequency", m.opts.UpdateFrequency,
		"reportFrequency", m.opts.ReportFrequency, "leaseDurationSeconds", m.opts.LeaseDuration)
	if _, err := m.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.watched() },
		UpdateFunc: func(_, _ any) { m.watched() },
		DeleteFunc: func(any) { m.watched(); m.Trigger() },
	}); err != nil {
		return err
	}
	m.event(v1.EventTypeNormal, "Starting", "Starting heartlet.")

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { m.informer.RunWithContext(ctx); return nil })
	g.Go(func() error { m.statusLoop(ctx); return nil })
	g.Go(func() error { m.leaseLoop(ctx); return nil })
	err := g.Wait()
	logger.Info("Node status stopped", "node", m.opts.NodeName)
	return err
}

// watched is called for every event of the Node's watch: its copy is as
// current as the watch.
func (m *Manager) watched() {
	m.cacheStale.Store(false)
}

// Trigger asks for a status update now instead of at the next period,
// e.g. when a readiness check changed.
func (m *Manager) Trigger() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Node returns the last known Node object (nil before it was seen). The
// caller must not modify it.
func (m *Manager) Node() *v1.Node {
	if n := m.cachedNode(); n != nil {
		return n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// cachedNode is the informer's copy of the Node, nil when there is none.
func (m *Manager) cachedNode() *v1.Node {
	obj, ok, err := m.informer.GetStore().GetByKey(m.opts.NodeName)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*v1.Node)
	return n
}

func (m *Manager) setLast(n *v1.Node) {
	m.mu.Lock()
	m.last = n
	m.mu.Unlock()
}

// Allocatable returns the node's allocatable resources as last computed,
// computing them when the status was not computed yet. It returns nil when
// the machine cannot be measured.
func (m *Manager) Allocatable() v1.ResourceList {
	m.mu.Lock()
	a := m.allocatable
	m.mu.Unlock()
	if a != nil {
		return a.DeepCopy()
	}
	capacity, err := m.capacity()
	if err != nil {
		return nil
	}
	a, err = allocatable(capacity, m.opts.Reserved, m.opts.EvictionHard)
	if err != nil {
		return nil
	}
	m.mu.Lock()
	if m.allocatable == nil {
		m.allocatable = a
	}
	m.mu.Unlock()
	return a.DeepCopy()
}

// statusLoop registers and updates the status every UpdateFrequency, or
// sooner when triggered or when registration must be retried.
func (m *Manager) statusLoop(ctx context.Context) {
	backoff := registerBackoffStart
	for {
		wait := m.opts.UpdateFrequency
		if err := m.syncStatus(ctx); errors.Is(err, errNotRegistered) {
			wait = backoff
			backoff = min(2*backoff, registerBackoffMax)
		} else {
			backoff = registerBackoffStart
		}
		t := m.clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-m.trigger:
			t.Stop()
		}
	}
}

// leaseLoop renews the Lease every quarter of its duration.
func (m *Manager) leaseLoop(ctx context.Context) {
	for {
		m.syncLease(ctx)
		t := m.clk.NewTimer(m.leaseWait())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// leaseJitter is how much longer than the renew interval the wait after a
// renewal may be, as a fraction of it: upstream's 4 %, so that nodes that
// started together (or saw the API server come back together) do not keep
// renewing in the same instant.
const leaseJitter = 0.04

// leaseWait is the wait after a renewal: the renew interval, plus up to
// leaseJitter of it.
func (m *Manager) leaseWait() time.Duration {
	d := m.renewInterval()
	return d + time.Duration(leaseJitter*m.jitter()*float64(d))
}

func (m *Manager) renewInterval() time.Duration {
	return time.Duration(m.opts.LeaseDuration) * time.Second / 4
}

// sleep waits d on the manager's clock; false when ctx ended first.
func (m *Manager) sleep(ctx context.Context, d time.Duration) bool {
	t := m.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// nodeRef is the object node events are about.
func (m *Manager) nodeRef() *v1.ObjectReference {
	ref := &v1.ObjectReference{Kind: "Node", Name: m.opts.NodeName}
	if n := m.Node(); n != nil {
		ref.UID = n.UID
	}
	return ref
}

func (m *Manager) event(eventType, reason, message string) {
	if m.opts.Recorder == nil {
		return
	}
	m.opts.Recorder.Event(m.nodeRef(), eventType, reason, message)
}
