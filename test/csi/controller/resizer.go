package controller

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// RunResizer expands the volume of every bound PVC of cfg.DriverName whose
// storage request exceeds its PV's capacity, when its StorageClass allows
// expansion, until ctx ends: ControllerExpandVolume, the PV's new
// capacity, and in the claim's status the allocated size with
// NodeResizePending and the FileSystemResizePending condition when the
// driver wants a node expansion (which the kubelet then does), or the new
// capacity when it does not.
func RunResizer(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	l := newLoop(cfg, "resizer")
	r := &resizer{cfg: cfg, csi: csi.NewControllerClient(cfg.CSI)}
	pvcs := l.factory.Core().V1().PersistentVolumeClaims()
	r.classes = l.factory.Storage().V1().StorageClasses().Lister()
	if err := l.watch(pvcs.Informer(), metaKey); err != nil {
		return err
	}
	return l.run(ctx, r.sync)
}

type resizer struct {
	cfg     Config
	csi     csi.ControllerClient
	classes storagelisters.StorageClassLister
}

func (r *resizer) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	// The claim and the PV come from the API server, not the cache: a
	// cached copy may predate the resizer's own last write.
	pvc, err := r.cfg.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the claim %s: %w", key, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != v1.ClaimBound || pvc.Spec.StorageClassName == nil {
		return nil
	}
	pv, err := r.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting the PV of %s: %w", key, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.cfg.DriverName {
		return nil
	}
	want, have := pvc.Spec.Resources.Requests[v1.ResourceStorage], pv.Spec.Capacity[v1.ResourceStorage]
	if want.Cmp(have) <= 0 {
		return nil
	}
	sc, err := r.classes.Get(*pvc.Spec.StorageClassName)
	if err != nil {
		return fmt.Errorf("getting the StorageClass of %s: %w", key, err)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return nil
	}
	resp, err := r.csi.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId:      pv.Spec.CSI.VolumeHandle,
		CapacityRange: &csi.CapacityRange{RequiredBytes: want.Value()},
	})
	if err != nil {
		return fmt.Errorf("ControllerExpandVolume for %s: %w", key, err)
	}
	size := *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
	pv = pv.DeepCopy()
	pv.Spec.Capacity[v1.ResourceStorage] = size
	if _, err := r.cfg.Client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the capacity of PV %s: %w", pv.Name, err)
	}
	pvc = pvc.DeepCopy()
	pvc.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: want}
	if resp.GetNodeExpansionRequired() {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}
		pvc.Status.Conditions = append(withoutResizeConditions(pvc.Status.Conditions), v1.PersistentVolumeClaimCondition{
			Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(),
			Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
		})
	} else {
		pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: size}
		pvc.Status.AllocatedResourceStatuses = nil
		pvc.Status.Conditions = withoutResizeConditions(pvc.Status.Conditions)
	}
	if _, err := r.cfg.Client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating the status of %s: %w", key, err)
	}
	r.cfg.Log.Info("expanded", "pvc", key, "pv", pv.Name, "capacity", resp.GetCapacityBytes(), "nodeExpansionRequired", resp.GetNodeExpansionRequired())
	return nil
}

// withoutResizeConditions drops the resize conditions.
func withoutResizeConditions(cs []v1.PersistentVolumeClaimCondition) []v1.PersistentVolumeClaimCondition {
	var out []v1.PersistentVolumeClaimCondition
	for _, c := range cs {
		if c.Type != v1.PersistentVolumeClaimResizing && c.Type != v1.PersistentVolumeClaimFileSystemResizePending {
			out = append(out, c)
		}
	}
	return out
}
