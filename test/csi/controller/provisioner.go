package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// Annotations and parameters of the provisioning protocol.
const (
	// AnnStorageProvisioner is set on a PVC by the PV controller when an
	// external provisioner is to provision it (and the beta name too).
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode is set on a PVC by the scheduler for
	// WaitForFirstConsumer StorageClasses.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnProvisionedBy marks the PVs a provisioner created.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// ParamFSType is the StorageClass parameter naming the fsType.
	ParamFSType = "csi.storage.k8s.io/fstype"
	// reservedPrefix starts the StorageClass parameters the provisioner
	// consumes itself (never passed to the driver).
	reservedPrefix = "csi.storage.k8s.io/"
)

// PVName is the name of the PV provisioned for a PVC (as upstream:
// "pvc-" and the claim's UID).
func PVName(pvc *v1.PersistentVolumeClaim) string { return "pvc-" + string(pvc.UID) }

// RunProvisioner provisions a volume and a PV for every PVC the PV
// controller hands to cfg.DriverName, and deletes the volume and the PV of
// every released PV it provisioned with reclaim policy Delete, until ctx
// ends.
func RunProvisioner(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	l := newLoop(cfg, "provisioner")
	p := &provisioner{cfg: cfg, csi: csi.NewControllerClient(cfg.CSI), deleted: map[types.UID]bool{}}
	pvcs := l.factory.Core().V1().PersistentVolumeClaims()
	pvs := l.factory.Core().V1().PersistentVolumes()
	p.pvcs, p.pvs = pvcs.Lister(), pvs.Lister()
	p.classes = l.factory.Storage().V1().StorageClasses().Lister()
	p.csiNodes = l.factory.Storage().V1().CSINodes().Lister()
	p.nodes = l.factory.Core().V1().Nodes().Lister()
	prefixed := func(prefix string) func(obj any) (string, bool) {
		return func(obj any) (string, bool) {
			k, ok := metaKey(obj)
			return prefix + k, ok
		}
	}
	if err := l.watch(pvcs.Informer(), prefixed("pvc/")); err != nil {
		return err
	}
	if err := l.watch(pvs.Informer(), prefixed("pv/")); err != nil {
		return err
	}
	return l.run(ctx, func(ctx context.Context, key string) error {
		if k, ok := strings.CutPrefix(key, "pvc/"); ok {
			return p.syncClaim(ctx, k)
		}
		return p.syncVolume(ctx, strings.TrimPrefix(key, "pv/"))
	})
}

type provisioner struct {
	cfg      Config
	csi      csi.ControllerClient
	pvcs     corelisters.PersistentVolumeClaimLister
	pvs      corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	csiNodes storagelisters.CSINodeLister
	nodes    corelisters.NodeLister

	// deleted are the PVs (by UID) whose volume was deleted: the
	// informer's copy may not show the PV's deletion yet when another
	// event of it comes, and the volume is deleted once.
	mu      sync.Mutex
	deleted map[types.UID]bool
}

// syncClaim provisions the claim key (namespace/name) if it is the
// driver's to provision.
func (p *provisioner) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := p.pvcs.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the claim %s: %w", key, err)
	}
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil {
		return nil
	}
	ann := pvc.Annotations[AnnStorageProvisioner]
	if ann == "" {
		ann = pvc.Annotations[annBetaStorageProvisioner]
	}
	if ann != p.cfg.DriverName || pvc.Spec.StorageClassName == nil {
		return nil
	}
	sc, err := p.classes.Get(*pvc.Spec.StorageClassName)
	if err != nil {
		return fmt.Errorf("getting the StorageClass of %s: %w", key, err)
	}
	if sc.Provisioner != p.cfg.DriverName {
		return nil
	}
	selected := pvc.Annotations[AnnSelectedNode]
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer && selected == "" {
		return nil
	}
	// The cache may not hold the PV of the provisioner's own last write.
	if _, err := p.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, PVName(pvc), metav1.GetOptions{}); err == nil {
		return nil // provisioned; the PV controller binds it
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("looking for the PV of %s: %w", key, err)
	}
	return p.provision(ctx, pvc, sc, selected)
}

// provision creates the volume and the PV pre-bound to pvc.
func (p *provisioner) provision(ctx context.Context, pvc *v1.PersistentVolumeClaim, sc *storagev1.StorageClass, selectedNode string) error {
	block := pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == v1.PersistentVolumeBlock
	fsType := ""
	params := map[string]string{}
	for k, v := range sc.Parameters {
		switch {
		case k == ParamFSType:
			fsType = v
		case strings.HasPrefix(k, reservedPrefix):
			return fmt.Errorf("StorageClass %s: parameter %q is not supported by this provisioner", sc.Name, k)
		default:
			params[k] = v
		}
	}
	if block {
		fsType = ""
	}
	req := &csi.CreateVolumeRequest{
		Name:          PVName(pvc),
		Parameters:    params,
		CapacityRange: &csi.CapacityRange{},
	}
	if q, ok := pvc.Spec.Resources.Requests[v1.ResourceStorage]; ok {
		req.CapacityRange.RequiredBytes = q.Value()
	}
	if q, ok := pvc.Spec.Resources.Limits[v1.ResourceStorage]; ok {
		req.CapacityRange.LimitBytes = q.Value()
	}
	for _, m := range pvc.Spec.AccessModes {
		mode, err := accessMode(m)
		if err != nil {
			return err
		}
		req.VolumeCapabilities = append(req.VolumeCapabilities, capability(block, fsType, sc.MountOptions, mode))
	}
	if selectedNode != "" {
		top, err := p.nodeTopology(selectedNode)
		if err != nil {
			return err
		}
		req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: []*csi.Topology{top}, Preferred: []*csi.Topology{top}}
	}
	resp, err := p.csi.CreateVolume(ctx, req)
	if err != nil {
		return fmt.Errorf("CreateVolume for %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	vol := resp.GetVolume()
	reclaim := v1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: PVName(pvc), Annotations: map[string]string{AnnProvisionedBy: p.cfg.DriverName}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: *resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			MountOptions:                  sc.MountOptions,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef: &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			NodeAffinity: nodeAffinity(vol.GetAccessibleTopology()),
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver:           p.cfg.DriverName,
				VolumeHandle:     vol.GetVolumeId(),
				FSType:           fsType,
				VolumeAttributes: vol.GetVolumeContext(),
			}},
		},
	}
	if _, err := p.cfg.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the PV for %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	p.cfg.Log.Info("provisioned", "pvc", pvc.Namespace+"/"+pvc.Name, "pv", pv.Name, "volumeID", vol.GetVolumeId(), "capacity", vol.GetCapacityBytes())
	return nil
}

// nodeTopology is the topology segment of node for the driver: the
// node's labels for the topology keys in the driver's CSINode entry.
func (p *provisioner) nodeTopology(node string) (*csi.Topology, error) {
	cn, err := p.csiNodes.Get(node)
	if err != nil {
		return nil, fmt.Errorf("getting the CSINode of %s: %w", node, err)
	}
	var keys []string
	found := false
	for _, d := range cn.Spec.Drivers {
		if d.Name == p.cfg.DriverName {
			keys, found = d.TopologyKeys, true
		}
	}
	if !found {
		return nil, fmt.Errorf("CSINode %s has no driver %s yet", node, p.cfg.DriverName)
	}
	n, err := p.nodes.Get(node)
	if err != nil {
		return nil, fmt.Errorf("getting the node %s: %w", node, err)
	}
	top := &csi.Topology{Segments: map[string]string{}}
	for _, k := range keys {
		v, ok := n.Labels[k]
		if !ok {
			return nil, fmt.Errorf("node %s lacks the topology label %s of driver %s", node, k, p.cfg.DriverName)
		}
		top.Segments[k] = v
	}
	return top, nil
}

// nodeAffinity turns the volume's accessible topology into a PV's node
// affinity: any of the segments, each matching all its labels.
func nodeAffinity(tops []*csi.Topology) *v1.VolumeNodeAffinity {
	if len(tops) == 0 {
		return nil
	}
	sel := &v1.NodeSelector{}
	for _, t := range tops {
		var term v1.NodeSelectorTerm
		for k, v := range t.GetSegments() {
			term.MatchExpressions = append(term.MatchExpressions, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{v}})
		}
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, term)
	}
	return &v1.VolumeNodeAffinity{Required: sel}
}

// accessMode maps a PV access mode onto CSI's.
func accessMode(m v1.PersistentVolumeAccessMode) (csi.VolumeCapability_AccessMode_Mode, error) {
	switch m {
	case v1.ReadWriteOnce:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case v1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case v1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	case v1.ReadWriteOncePod:
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
	}
	return 0, fmt.Errorf("access mode %q is unknown", m)
}

// syncVolume deletes the released PV name and its volume when the
// provisioner made it and its reclaim policy is Delete.
func (p *provisioner) syncVolume(ctx context.Context, name string) error {
	pv, err := p.pvs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the PV %s: %w", name, err)
	}
	if pv.Annotations[AnnProvisionedBy] != p.cfg.DriverName || pv.Spec.CSI == nil || pv.DeletionTimestamp != nil ||
		pv.Status.Phase != v1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		return nil
	}
	p.mu.Lock()
	done := p.deleted[pv.UID]
	p.mu.Unlock()
	if !done {
		if _, err := p.csi.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
			return fmt.Errorf("DeleteVolume %s of PV %s: %w", pv.Spec.CSI.VolumeHandle, name, err)
		}
		p.mu.Lock()
		p.deleted[pv.UID] = true
		p.mu.Unlock()
	}
	if err := p.cfg.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the PV %s: %w", name, err)
	}
	p.cfg.Log.Info("deleted", "pv", name, "volumeID", pv.Spec.CSI.VolumeHandle)
	return nil
}
