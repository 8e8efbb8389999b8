// Package pvc sets up the pod volumes that name a PersistentVolumeClaim
// (spec.volumes[].persistentVolumeClaim) or a generic ephemeral volume
// (spec.volumes[].ephemeral, whose claim the ephemeral-volume controller
// creates as <pod>-<volume>, owned by the pod). It resolves the volume to
// its claim and the claim to its bound PersistentVolume through the API
// (the Node authorizer lets a node get the claims of its pods and their
// volumes), checks the volume's node affinity against this node, and
// gives the volume to the runtime:
//
//   - local: the PV's path, owned by the pod's fsGroup as upstream;
//   - hostPath: the PV's path after the hostPath type check;
//   - csi: handed to a CSI publisher (package csi);
//
// every other PV source is refused with a message naming it. A PV of
// volumeMode Block (local or csi, see block.go) becomes a raw block
// device for the containers' volumeDevices. A claim that is not bound yet is an error SetUp returns until
// it is (a FailedMount event, and the containers wait).
package pvc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/volume"
)

// KubeClient is the API group claims, volumes and the Node are read with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// Sentinel errors, checked with errors.Is.
var (
	// ErrUnbound reports a claim that is not bound to a volume yet.
	ErrUnbound = errors.New("persistentvolumeclaim is not bound")
	// ErrNotOwner reports a generic ephemeral volume whose claim exists
	// but was not created for this pod.
	ErrNotOwner = errors.New("persistentvolumeclaim was not created for the pod")
	// ErrNodeAffinity reports a persistent volume whose node affinity does
	// not match this node.
	ErrNodeAffinity = errors.New("persistent volume's node affinity does not match this node")
)

// Getter reads claims, volumes and this node. NewClientGetter adapts a
// clientset. A missing object is an error for which apierrors.IsNotFound
// holds.
type Getter interface {
	GetClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	GetVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	GetNode(ctx context.Context) (*v1.Node, error)
}

// CSIPublisher publishes the CSI persistent volumes (package csi).
//
// Contract: SetUpPersistent stages (once per volume and node) and
// publishes (once per pod) pv for pod's volume v, idempotently, and
// returns where the pod's containers find it; the publication is released
// by the publisher's own volume.Plugin TearDown.
type CSIPublisher interface {
	SetUpPersistent(ctx context.Context, pod *v1.Pod, v *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error)
	// SetUpPersistentBlock is SetUpPersistent for a PV of volumeMode
	// Block: the result is a volume.Mounted Device.
	SetUpPersistentBlock(ctx context.Context, pod *v1.Pod, v *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error)
}

// CSIExpander is a CSIPublisher that does the node's part of volume
// expansion (package csi).
//
// Contract: ExpandPersistent runs after every SetUpPersistent of a
// filesystem volume (each sync of the pod) with the claim and PV just
// read; it grows the published volume when the claim asks for it and
// records the new size on the claim. It returns an error only when the
// pod must wait (an expansion due at mount failed).
type CSIExpander interface {
	ExpandPersistent(ctx context.Context, pod *v1.Pod, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, readOnly bool) error
}

// Plugin is the volume.Plugin of claims. It is safe for concurrent use.
type Plugin struct {
	getter  Getter
	csi     CSIPublisher
	rootDir string
	clock   clock.PassiveClock

	mu    sync.Mutex
	local map[types.UID][]localVolume // by pod; stats.go
}

// Option configures a Plugin.
type Option func(*Plugin)

// WithRootDir sets the kubelet root directory, below which the links of
// local raw block volumes are made; without it they are refused.
func WithRootDir(dir string) Option { return func(p *Plugin) { p.rootDir = dir } }

var _ volume.Plugin = (*Plugin)(nil)

// New returns the plugin. A nil getter (standalone mode) fails every
// claim with volume.ErrNoAPI; a nil csi refuses CSI volumes.
func New(getter Getter, csi CSIPublisher, opts ...Option) *Plugin {
	p := &Plugin{getter: getter, csi: csi, clock: clock.RealClock{}, local: map[types.UID][]localVolume{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Handles implements volume.Plugin.
func (p *Plugin) Handles(v *v1.Volume) bool {
	return v.PersistentVolumeClaim != nil || v.Ephemeral != nil
}

// ClaimName is the name of the claim behind a claim or generic ephemeral
// volume, and whether the claim must be owned by the pod.
func ClaimName(pod *v1.Pod, v *v1.Volume) (name string, owned bool) {
	if v.Ephemeral != nil {
		return pod.Name + "-" + v.Name, true
	}
	if v.PersistentVolumeClaim != nil {
		return v.PersistentVolumeClaim.ClaimName, false
	}
	return "", false
}

// Resolve returns the claim of pod's volume v and the volume it is bound
// to. It fails with ErrUnbound while the claim is pending, with
// ErrNotOwner for an ephemeral claim of another owner, and when the PV
// is bound to another claim.
func (p *Plugin) Resolve(ctx context.Context, pod *v1.Pod, v *v1.Volume) (*v1.PersistentVolumeClaim, *v1.PersistentVolume, error) {
	if p.getter == nil || podconfig.IsStatic(pod) {
		return nil, nil, fmt.Errorf("persistentVolumeClaim: %w", volume.ErrNoAPI)
	}
	name, owned := ClaimName(pod, v)
	claim, err := p.getter.GetClaim(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("persistentvolumeclaim %q not found: %w", name, volume.ErrMissingObject)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get persistentvolumeclaim %q: %w", name, err)
	}
	if owned && !metav1.IsControlledBy(claim, pod) {
		return nil, nil, fmt.Errorf("persistentvolumeclaim %q: %w %q", name, ErrNotOwner, pod.Name)
	}
	if claim.DeletionTimestamp != nil {
		return nil, nil, fmt.Errorf("persistentvolumeclaim %q is being deleted", name)
	}
	if claim.Status.Phase != v1.ClaimBound || claim.Spec.VolumeName == "" {
		return nil, nil, fmt.Errorf("%w: %q (phase %s)", ErrUnbound, name, phaseOf(claim))
	}
	pv, err := p.getter.GetVolume(ctx, claim.Spec.VolumeName)
	if err != nil {
		return nil, nil, fmt.Errorf("get persistentvolume %q of claim %q: %w", claim.Spec.VolumeName, name, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		return nil, nil, fmt.Errorf("%w: persistentvolume %q is not bound to claim %q", ErrUnbound, pv.Name, name)
	}
	return claim, pv, nil
}

func phaseOf(c *v1.PersistentVolumeClaim) v1.PersistentVolumeClaimPhase {
	if c.Status.Phase == "" {
		return v1.ClaimPending
	}
	return c.Status.Phase
}

// SetUp implements volume.Plugin.
func (p *Plugin) SetUp(ctx context.Context, pod *v1.Pod, v *v1.Volume) (volume.Mounted, error) {
	claim, pv, err := p.Resolve(ctx, pod, v)
	if err != nil {
		return volume.Mounted{}, err
	}
	if err := checkVolumeMode(pod, v.Name, pv); err != nil {
		return volume.Mounted{}, err
	}
	if err := p.checkAffinity(ctx, pv); err != nil {
		return volume.Mounted{}, err
	}
	readOnly := v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
	if isBlock(pv) {
		return p.setUpBlock(ctx, pod, v, claim, pv, readOnly)
	}
	switch src := &pv.Spec.PersistentVolumeSource; {
	case src.Local != nil:
		if _, err := os.Stat(src.Local.Path); err != nil {
			return volume.Mounted{}, fmt.Errorf("local persistentvolume %q: path %s: %w", pv.Name, src.Local.Path, err)
		}
		p.rememberLocal(pod, v, src.Local.Path)
		return volume.Mounted{HostPath: src.Local.Path, ReadOnly: readOnly, Ownership: true}, nil
	case src.HostPath != nil:
		if err := volume.CheckHostPath(src.HostPath); err != nil {
			return volume.Mounted{}, fmt.Errorf("hostPath persistentvolume %q: %w", pv.Name, err)
		}
		return volume.Mounted{HostPath: src.HostPath.Path, ReadOnly: readOnly}, nil
	case src.CSI != nil:
		if p.csi == nil {
			return volume.Mounted{}, fmt.Errorf("csi persistentvolume %q: %w", pv.Name, volume.ErrUnsupported)
		}
		return p.setUpCSI(ctx, pod, claim, pv, readOnly || src.CSI.ReadOnly, func() (volume.Mounted, error) {
			return p.csi.SetUpPersistent(ctx, pod, v, pv, readOnly || src.CSI.ReadOnly)
		})
	}
	return volume.Mounted{}, fmt.Errorf("persistentvolume %q: volume source %s: %w", pv.Name, sourceName(&pv.Spec.PersistentVolumeSource), volume.ErrUnsupported)
}

// setUpCSI sets up a CSI PV with setUp and then does the node's part of
// an expansion the claim waits for (see CSIExpander).
func (p *Plugin) setUpCSI(ctx context.Context, pod *v1.Pod, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, readOnly bool, setUp func() (volume.Mounted, error)) (volume.Mounted, error) {
	m, err := setUp()
	if err != nil {
		return m, err
	}
	if e, ok := p.csi.(CSIExpander); ok {
		if err := e.ExpandPersistent(ctx, pod, claim, pv, readOnly); err != nil {
			return volume.Mounted{}, err
		}
	}
	return m, nil
}

// checkAffinity checks pv's required node affinity against this node.
func (p *Plugin) checkAffinity(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	node, err := p.getter.GetNode(ctx)
	if err != nil {
		return fmt.Errorf("check node affinity of persistentvolume %q: %w", pv.Name, err)
	}
	sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
	if err != nil {
		return fmt.Errorf("persistentvolume %q: node affinity: %w", pv.Name, err)
	}
	if !sel.Match(node) {
		return fmt.Errorf("persistentvolume %q, node %q: %w", pv.Name, node.Name, ErrNodeAffinity)
	}
	return nil
}

// Reconstruct implements volume.Plugin: local and hostPath volumes are
// the host's own paths, nothing is mounted for them (the CSI publisher
// reconstructs its own).
func (p *Plugin) Reconstruct(context.Context, *v1.Pod) error { return nil }

// TearDown implements volume.Plugin: nothing is mounted for local and
// hostPath volumes (their stats go); what upstream's kubelet held for a local raw block
// volume is released (block.go).
func (p *Plugin) TearDown(ctx context.Context, uid types.UID) error {
	p.mu.Lock()
	delete(p.local, uid)
	p.mu.Unlock()
	return p.tearDownBlock(ctx, uid)
}

// sourceName names the persistent volume source that is set.
func sourceName(s *v1.PersistentVolumeSource) string {
	switch {
	case s.NFS != nil:
		return "nfs"
	case s.ISCSI != nil:
		return "iscsi"
	case s.FC != nil:
		return "fc"
	case s.RBD != nil:
		return "rbd"
	case s.CephFS != nil:
		return "cephfs"
	case s.FlexVolume != nil:
		return "flexVolume"
	}
	return "unknown"
}

// clientGetter reads through the API server with the node's identity.
type clientGetter struct {
	kube     KubeClient
	nodeName string
}

// NewClientGetter returns a Getter that reads through kube.
func NewClientGetter(kube KubeClient, nodeName string) Getter {
	return clientGetter{kube: kube, nodeName: nodeName}
}

func (g clientGetter) GetClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return g.kube.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (g clientGetter) GetVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return g.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (g clientGetter) GetNode(ctx context.Context) (*v1.Node, error) {
	return g.kube.CoreV1().Nodes().Get(ctx, g.nodeName, metav1.GetOptions{})
}
