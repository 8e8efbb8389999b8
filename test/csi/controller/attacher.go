package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// AttacherFinalizer is the finalizer the attacher puts on a
// VolumeAttachment it attached, so that it can detach before the object
// goes (as external-attacher's "external-attacher/<driver>").
func AttacherFinalizer(driver string) string {
	return "external-attacher/" + strings.ReplaceAll(driver, "/", "-")
}

// RunAttacher attaches (ControllerPublishVolume, then status.attached and
// the publish context as attachmentMetadata) every VolumeAttachment of
// cfg.DriverName the attach-detach controller creates, and detaches
// (ControllerUnpublishVolume, then drops its finalizer) every one being
// deleted, until ctx ends. A failed attach is written to
// status.attachError with the driver's message.
func RunAttacher(ctx context.Context, cfg Config) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	l := newLoop(cfg, "attacher")
	a := &attacher{cfg: cfg, csi: csi.NewControllerClient(cfg.CSI)}
	vas := l.factory.Storage().V1().VolumeAttachments()
	a.pvs = l.factory.Core().V1().PersistentVolumes().Lister()
	a.csiNodes = l.factory.Storage().V1().CSINodes().Lister()
	if err := l.watch(vas.Informer(), metaKey); err != nil {
		return err
	}
	return l.run(ctx, a.sync)
}

type attacher struct {
	cfg      Config
	csi      csi.ControllerClient
	pvs      corelisters.PersistentVolumeLister
	csiNodes storagelisters.CSINodeLister
}

// sync reads the VolumeAttachment from the API server, not the cache: a
// cached copy may predate the attacher's own last write.
func (a *attacher) sync(ctx context.Context, name string) error {
	va, err := a.cfg.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting the VolumeAttachment %s: %w", name, err)
	}
	if va.Spec.Attacher != a.cfg.DriverName {
		return nil
	}
	fin := AttacherFinalizer(a.cfg.DriverName)
	if va.DeletionTimestamp != nil {
		if !slices.Contains(va.Finalizers, fin) {
			return nil
		}
		return a.detach(ctx, va, fin)
	}
	if va.Status.Attached {
		return nil
	}
	return a.attach(ctx, va, fin)
}

// volume returns the PV's CSI source and the node's CSI node ID.
func (a *attacher) volume(va *storagev1.VolumeAttachment) (*v1.PersistentVolume, string, error) {
	if va.Spec.Source.PersistentVolumeName == nil {
		return nil, "", fmt.Errorf("VolumeAttachment %s has no persistentVolumeName (inline sources are not supported)", va.Name)
	}
	pv, err := a.pvs.Get(*va.Spec.Source.PersistentVolumeName)
	if err != nil {
		return nil, "", fmt.Errorf("getting the PV of VolumeAttachment %s: %w", va.Name, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != a.cfg.DriverName {
		return nil, "", fmt.Errorf("PV %s is not a volume of %s", pv.Name, a.cfg.DriverName)
	}
	cn, err := a.csiNodes.Get(va.Spec.NodeName)
	if err != nil {
		return nil, "", fmt.Errorf("getting the CSINode of %s: %w", va.Spec.NodeName, err)
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == a.cfg.DriverName {
			return pv, d.NodeID, nil
		}
	}
	return nil, "", fmt.Errorf("CSINode %s has no driver %s", va.Spec.NodeName, a.cfg.DriverName)
}

func (a *attacher) attach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	pv, nodeID, err := a.volume(va)
	if err != nil {
		return a.attachFailed(ctx, va, err)
	}
	if !slices.Contains(va.Finalizers, fin) {
		upd := va.DeepCopy()
		upd.Finalizers = append(upd.Finalizers, fin)
		if va, err = a.cfg.Client.StorageV1().VolumeAttachments().Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("adding the finalizer to VolumeAttachment %s: %w", upd.Name, err)
		}
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	if len(pv.Spec.AccessModes) > 0 {
		if mode, err = accessMode(pv.Spec.AccessModes[0]); err != nil {
			return a.attachFailed(ctx, va, err)
		}
	}
	resp, err := a.csi.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		NodeId:           nodeID,
		VolumeCapability: capability(block, pv.Spec.CSI.FSType, pv.Spec.MountOptions, mode),
		Readonly:         pv.Spec.CSI.ReadOnly,
		VolumeContext:    pv.Spec.CSI.VolumeAttributes,
	})
	if err != nil {
		return a.attachFailed(ctx, va, fmt.Errorf("ControllerPublishVolume: %w", err))
	}
	va = va.DeepCopy()
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: resp.GetPublishContext()}
	if _, err := a.cfg.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking VolumeAttachment %s attached: %w", va.Name, err)
	}
	a.cfg.Log.Info("attached", "volumeAttachment", va.Name, "pv", pv.Name, "node", va.Spec.NodeName)
	return nil
}

// attachFailed writes cause to status.attachError and returns it, so the
// attach is retried.
func (a *attacher) attachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error) error {
	va = va.DeepCopy()
	va.Status.AttachError = &storagev1.VolumeError{Time: metav1.Now(), Message: cause.Error()}
	if _, err := a.cfg.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%w (and recording it: %w)", cause, err)
	}
	return cause
}

func (a *attacher) detach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	pv, nodeID, err := a.volume(va)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if pv != nil {
		if _, err := a.csi.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle, NodeId: nodeID}); err != nil {
			va = va.DeepCopy()
			va.Status.DetachError = &storagev1.VolumeError{Time: metav1.Now(), Message: err.Error()}
			_, _ = a.cfg.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{})
			return fmt.Errorf("ControllerUnpublishVolume for VolumeAttachment %s: %w", va.Name, err)
		}
	}
	va = va.DeepCopy()
	va.Finalizers = slices.DeleteFunc(va.Finalizers, func(f string) bool { return f == fin })
	if _, err := a.cfg.Client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizer of VolumeAttachment %s: %w", va.Name, err)
	}
	a.cfg.Log.Info("detached", "volumeAttachment", va.Name, "node", va.Spec.NodeName)
	return nil
}
