package csi

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"
)

// A driver whose CSIDriver sets requiresRepublish gets NodePublishVolume
// again for the volumes it published while their pods run, with the same
// request and fresh service account tokens (tokenRequests), so that it can
// renew what it publishes (secrets-store drivers rotate their content).
// As upstream's kubelet, which remounts such volumes when it processes the
// pod again, heartlet republishes from the pod's own set-up path: each sync
// of the pod (at least every syncFrequency) republishes the volumes whose
// last publication is RepublishInterval old or more. No loop over all pods
// is involved; a pod that is not synced is not running anything to renew.
//
// A failed republication leaves the volume as it was published: it is
// logged and tried again at the pod's next sync, and the pod's containers
// are not held back for it.

// DefaultRepublishInterval is the least time between two publications of a
// volume whose driver requires republishing: the pod's syncs bound the
// period from above, this bounds it from below.
const DefaultRepublishInterval = 10 * time.Second

// republishing is what the publisher remembers to republish a volume.
type republishing struct {
	requires bool    // the driver's CSIDriver sets requiresRepublish
	req      request // the publication made
	last     time.Time
}

func requiresRepublish(cd *storagev1.CSIDriver) bool {
	return cd != nil && cd.Spec.RequiresRepublish != nil && *cd.Spec.RequiresRepublish
}

// markPublished records a publication made now.
func (p *Publisher) markPublished(key string, vd volData, cd *storagev1.CSIDriver, req request) {
	now := p.opts.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published[key] = vd
	p.repub[key] = &republishing{requires: requiresRepublish(cd), req: req, last: now}
}

// mountCapability is the capability of a filesystem publication. A driver
// with VOLUME_MOUNT_GROUP applies the pod's fsGroup itself, as upstream
// delegates it, unless the policy says None.
func mountCapability(drv *driver, pod *v1.Pod, cd *storagev1.CSIDriver, req request) *csipb.VolumeCapability {
	mountGroup := ""
	if fsGroup := podFSGroup(pod); fsGroup != "" && drv.mountGroup && !policyNone(cd) {
		mountGroup = fsGroup
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: req.fsType, MountFlags: req.mountFlags, VolumeMountGroup: mountGroup}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: req.accessMode},
	}
}

// blockCapability is the capability of a raw block publication.
func blockCapability(req request) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: req.accessMode},
	}
}

// mountStaging is the staging target of a filesystem volume, "" when it
// is not staged.
func (p *Publisher) mountStaging(drv *driver, req request) string {
	if !drv.stage || req.mode != modePersistent {
		return ""
	}
	return filepath.Join(p.StagingDir(req.driver, req.handle), globalMount)
}

// blockStaging is the staging target of a raw block volume, "" when it is
// not staged.
func (p *Publisher) blockStaging(drv *driver, req request) string {
	if !drv.stage {
		return ""
	}
	return p.BlockStagingPath(req.name)
}

// republishIfDue publishes the pod's published volume name again when its
// driver requires it and its last publication is RepublishInterval old.
// build makes the request of a publication heartlet did not make itself
// (found on disk after a restart). A failure is logged and, as upstream's
// failed remount, a FailedMount warning on the pod with the driver's
// message; the containers go on with the last publication, and the next
// sync tries again.
func (p *Publisher) republishIfDue(ctx context.Context, pod *v1.Pod, name string, block bool, build func(context.Context) (request, *storagev1.CSIDriver, error)) {
	if err := p.republish(ctx, pod, name, block, build); err != nil {
		klog.FromContext(ctx).Error(err, "Couldn't republish CSI volume", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", name)
		p.event(pod, v1.EventTypeWarning, "FailedMount", fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", name, err))
	}
}

func (p *Publisher) republish(ctx context.Context, pod *v1.Pod, name string, block bool, build func(context.Context) (request, *storagev1.CSIDriver, error)) error {
	key := string(pod.UID) + "/" + name
	now := p.opts.Clock.Now()
	p.mu.Lock()
	r := p.repub[key]
	_, published := p.published[key]
	p.mu.Unlock()
	if !published {
		return nil
	}
	if r != nil && (!r.requires || now.Sub(r.last) < p.opts.RepublishInterval) {
		return nil
	}
	var (
		req request
		cd  *storagev1.CSIDriver
		err error
	)
	if r != nil {
		req = r.req
		cd, err = p.csiDriver(ctx, req.driver)
	} else {
		req, cd, err = build(ctx)
	}
	if err != nil {
		return err
	}
	if !requiresRepublish(cd) {
		p.mu.Lock()
		if _, ok := p.published[key]; ok {
			p.repub[key] = &republishing{req: req}
		}
		p.mu.Unlock()
		return nil
	}
	drv, err := p.opts.Drivers.get(req.driver)
	if err != nil {
		return err
	}
	defer p.locks.lock(req.driver, req.handle)()
	if !p.isPublished(key) {
		return nil // torn down meanwhile
	}
	publishSecrets, err := p.secrets(ctx, req.publishRef)
	if err != nil {
		return err
	}
	volCtx, err := p.volumeContext(ctx, pod, cd, req)
	if err != nil {
		return err
	}
	npv := &csipb.NodePublishVolumeRequest{
		VolumeId: req.handle, PublishContext: req.pubCtx, Readonly: req.readOnly, Secrets: publishSecrets, VolumeContext: volCtx,
	}
	if block {
		npv.VolumeCapability, npv.StagingTargetPath, npv.TargetPath = blockCapability(req), p.blockStaging(drv, req), p.BlockPublishPath(req.name, pod.UID)
	} else {
		npv.VolumeCapability, npv.StagingTargetPath, npv.TargetPath = mountCapability(drv, pod, cd, req), p.mountStaging(drv, req), filepath.Join(p.PublishDir(pod.UID, req.name), "mount")
	}
	if _, err := drv.client.NodePublishVolume(ctx, npv); err != nil {
		return fmt.Errorf("republish: NodePublishVolume of volume %q (driver %s): %w", req.name, req.driver, err)
	}
	p.mu.Lock()
	if _, ok := p.published[key]; ok {
		p.repub[key] = &republishing{requires: true, req: req, last: now}
	}
	p.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("CSI volume republished", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", req.name, "driver", req.driver)
	return nil
}
