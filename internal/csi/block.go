package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/volume"
)

// Raw block volumes (volumeMode Block) use upstream's layout, so that
// either kubelet finds what the other made:
//
//	<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>        NodeStage target (a directory)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>  NodePublish target (the driver makes the file)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<pv>/data/vol_data.json
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<pv>/dev/<uid>      upstream's global map: heartlet makes none, releases one it finds
//	<root>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>             link to the publish target, given to the runtime
//
// The link in the pod's directory is the record of a pod's publication:
// it is made before the driver is called, so that a publication that fails
// half-way is still unpublished when the pod goes.
const blockDir = "volumeDevices"

// BlockStagingPath is where a raw block volume is staged.
func (p *Publisher) BlockStagingPath(pvName string) string {
	return filepath.Join(p.blockRoot(), "staging", pvName)
}

// BlockPublishPath is where a raw block volume is published for a pod.
func (p *Publisher) BlockPublishPath(pvName string, uid types.UID) string {
	return filepath.Join(p.blockRoot(), "publish", pvName, string(uid))
}

// blockDataDir holds a raw block volume's vol_data.json.
func (p *Publisher) blockDataDir(pvName string) string {
	return filepath.Join(p.blockRoot(), pvName, "data")
}

func (p *Publisher) blockRoot() string {
	return filepath.Join(p.opts.RootDir, "plugins", "kubernetes.io", "csi", blockDir)
}

// SetUpPersistentBlock implements pvc.CSIPublisher for a PV of volumeMode
// Block: the volume is staged (once per node, when the driver stages) and
// published (per pod) with a Block access type, and the pod's link to the
// published device is the volume.Mounted Device.
func (p *Publisher) SetUpPersistentBlock(ctx context.Context, pod *v1.Pod, _ *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error) {
	if err := p.needAPI(pod); err != nil {
		return volume.Mounted{}, err
	}
	mounted := volume.Mounted{HostPath: volume.DeviceLink(p.opts.RootDir, pod.UID, PluginDir, pv.Name), ReadOnly: readOnly, Device: true}
	if p.isPublished(string(pod.UID) + "/" + pv.Name) {
		p.republishIfDue(ctx, pod, pv.Name, true, func(ctx context.Context) (request, *storagev1.CSIDriver, error) {
			return p.persistentRequest(ctx, pv, readOnly)
		})
		return mounted, nil
	}
	req, cd, err := p.persistentRequest(ctx, pv, readOnly)
	if err != nil {
		return volume.Mounted{}, err
	}
	if err := p.publishBlock(ctx, pod, cd, req); err != nil {
		return mounted, err
	}
	p.expand.mark(string(pod.UID) + "/" + pv.Name)
	return mounted, nil
}

// publishBlock stages (when the driver stages) and publishes req for pod
// as a raw block volume.
func (p *Publisher) publishBlock(ctx context.Context, pod *v1.Pod, cd *storagev1.CSIDriver, req request) error {
	drv, err := p.opts.Drivers.get(req.driver)
	if err != nil {
		return err
	}
	key := string(pod.UID) + "/" + req.name
	defer p.locks.lock(req.driver, req.handle)()
	if p.isPublished(key) {
		return nil
	}
	stageSecrets, err := p.secrets(ctx, req.stageRef)
	if err != nil {
		return err
	}
	publishSecrets, err := p.secrets(ctx, req.publishRef)
	if err != nil {
		return err
	}
	capability := blockCapability(req)
	vd := volData{
		SpecVolID: req.name, VolumeHandle: req.handle, DriverName: req.driver, NodeName: p.opts.NodeName,
		AttachmentID: req.attachID, VolumeLifecycleMode: req.mode,
	}
	dataDir := p.blockDataDir(req.name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dataDir, err)
	}
	if err := writeVolData(dataDir, vd); err != nil {
		return err
	}
	target := p.BlockPublishPath(req.name, pod.UID)
	if _, err := volume.LinkDevice(p.opts.RootDir, pod.UID, PluginDir, req.name, target); err != nil {
		return err
	}
	staging := p.blockStaging(drv, req)
	if staging != "" {
		if err := p.stageBlock(ctx, drv, req, staging, capability, stageSecrets); err != nil {
			return err
		}
	}
	volCtx, err := p.volumeContext(ctx, pod, cd, req)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(target), err)
	}
	_, err = drv.client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId: req.handle, PublishContext: req.pubCtx, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, Readonly: req.readOnly, Secrets: publishSecrets, VolumeContext: volCtx,
	})
	if err != nil {
		return fmt.Errorf("NodePublishVolume of block volume %q (driver %s): %w", req.name, req.driver, err)
	}
	p.markPublished(key, vd, cd, req)
	klog.FromContext(ctx).V(2).Info("CSI block volume published", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", req.name, "driver", req.driver)
	return nil
}

// stageBlock stages a raw block volume unless it is staged already. The
// volume's lock is held.
func (p *Publisher) stageBlock(ctx context.Context, drv *driver, req request, staging string, capability *csipb.VolumeCapability, secrets map[string]string) error {
	key := req.driver + "/" + req.handle
	if p.isStaged(key) {
		return nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("create staging directory %s: %w", staging, err)
	}
	_, err := drv.client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId: req.handle, PublishContext: req.pubCtx, StagingTargetPath: staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: req.attrs,
	})
	if err != nil {
		return fmt.Errorf("NodeStageVolume of block volume %q (driver %s): %w", req.name, req.driver, err)
	}
	p.setStaged(key, true)
	return nil
}

// podBlockVolumes reads the record of every raw block volume linked in
// the pod's directory, by PV name; a link without a record (made by a
// publication that never wrote one) maps to the zero volData.
func (p *Publisher) podBlockVolumes(uid types.UID) (map[string]volData, error) {
	names, err := volume.DeviceLinks(p.opts.RootDir, uid, PluginDir)
	if err != nil {
		return nil, err
	}
	out := make(map[string]volData, len(names))
	var errs []error
	for _, name := range names {
		d, err := readVolData(p.blockDataDir(name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			out[name] = volData{}
		case err != nil:
			errs = append(errs, err)
		default:
			out[name] = d
		}
	}
	return out, errors.Join(errs...)
}

// reconstructBlock remembers the pod's raw block publications and their
// stagings found on disk. p.mu is held.
func (p *Publisher) reconstructBlock(ctx context.Context, pod *v1.Pod) error {
	vols, err := p.podBlockVolumes(pod.UID)
	for name, d := range vols {
		if d.VolumeHandle == "" {
			continue
		}
		p.published[string(pod.UID)+"/"+name] = d
		if fi, err := os.Stat(p.BlockStagingPath(name)); err == nil && fi.IsDir() {
			p.staged[d.DriverName+"/"+d.VolumeHandle] = true
		}
		klog.FromContext(ctx).V(2).Info("Reconstructed CSI block volume", "pod", klog.KObj(pod), "podUID", pod.UID, "volume", name, "driver", d.DriverName)
	}
	return err
}

// tearDownBlock unpublishes every raw block volume of the pod, then
// unstages each one no other pod links any more.
func (p *Publisher) tearDownBlock(ctx context.Context, uid types.UID) error {
	vols, err := p.podBlockVolumes(uid)
	if err != nil {
		return err
	}
	var errs []error
	for name, d := range vols {
		errs = append(errs, p.tearDownVolume(ctx, p.blockKind(), uid, name, d))
	}
	return errors.Join(errs...)
}

// blockKind is the layout of raw block volumes: a pod's link records its
// publication; the staging directory and the record go with the last link.
func (p *Publisher) blockKind() volumeKind {
	return volumeKind{
		unpublish: p.unpublishBlock,
		staging: func(name string, d volData) (string, bool, []string) {
			staging := p.BlockStagingPath(name)
			_, err := os.Stat(staging)
			dataDir := p.blockDataDir(name)
			return staging, err == nil, []string{staging, filepath.Join(dataDir, volDataFile), dataDir, filepath.Join(filepath.Dir(dataDir), "dev"), filepath.Dir(dataDir)}
		},
		uses: func(uid types.UID, name string, _ volData) (bool, error) {
			_, err := os.Lstat(volume.DeviceLink(p.opts.RootDir, uid, PluginDir, name))
			if err == nil {
				return true, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return false, fmt.Errorf("check block volume %q of pod %s: %w", name, uid, err)
			}
			return false, nil
		},
	}
}

// unpublishBlock unpublishes one raw block volume of a pod and removes its
// link. The volume's lock is held.
func (p *Publisher) unpublishBlock(ctx context.Context, uid types.UID, name string, d volData) error {
	target := p.BlockPublishPath(name, uid)
	// Upstream's kubelet, when it mapped the volume before a switch, holds
	// it at its global map path too: released first, as it does.
	if err := volume.ReleaseGlobalMap(filepath.Join(p.blockRoot(), name, "dev", string(uid))); err != nil {
		return fmt.Errorf("block volume %q: %w", name, err)
	}
	if d.VolumeHandle != "" {
		drv, err := p.opts.Drivers.get(d.DriverName)
		if err != nil {
			return fmt.Errorf("unpublish block volume %q: %w", name, err)
		}
		if _, err := drv.client.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: d.VolumeHandle, TargetPath: target}); err != nil {
			return fmt.Errorf("NodeUnpublishVolume of block volume %q (driver %s): %w", name, d.DriverName, err)
		}
	}
	// The driver removes its target file; a file it left is removed (a
	// device still mounted there is not: Remove fails with EBUSY).
	for _, path := range []string{target, volume.DeviceLink(p.opts.RootDir, uid, PluginDir, name)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
	}
	// The volume's publish directory goes with its last publication.
	_ = os.Remove(filepath.Dir(target))
	p.forgetPublished(string(uid) + "/" + name)
	klog.FromContext(ctx).V(2).Info("CSI block volume unpublished", "podUID", uid, "volume", name, "driver", d.DriverName)
	return nil
}
