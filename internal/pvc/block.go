package pvc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/volume"
)

// LocalPluginDir is upstream's directory of local volumes below a pod's
// volumeDevices directory.
const LocalPluginDir = "kubernetes.io~local-volume"

// localGlobalMapDir is upstream's global map directory of local raw block
// volumes below the root directory.
var localGlobalMapDir = filepath.Join("plugins", "kubernetes.io~local-volume", volume.DevicesDir)

// ErrNotBlockDevice reports a local PV of volumeMode Block whose path is
// not a block device.
var ErrNotBlockDevice = errors.New("not a block device")

// isBlock reports whether pv has volumeMode Block (Filesystem when unset).
func isBlock(pv *v1.PersistentVolume) bool {
	return pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
}

// checkVolumeMode refuses, as upstream's volume manager does (a
// FailedMount with its message), a Block volume that a container names in
// volumeMounts and a Filesystem volume that one names in volumeDevices.
func checkVolumeMode(pod *v1.Pod, name string, pv *v1.PersistentVolume) error {
	mode := v1.PersistentVolumeFilesystem
	if isBlock(pv) {
		mode = v1.PersistentVolumeBlock
	}
	mounted, mapped := volumeUse(pod, name)
	if mounted && mode != v1.PersistentVolumeFilesystem {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	}
	if mapped && mode != v1.PersistentVolumeBlock {
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	}
	return nil
}

// volumeUse reports whether any container of pod (init, regular or
// ephemeral) names the volume in volumeMounts and in volumeDevices.
func volumeUse(pod *v1.Pod, name string) (mounted, mapped bool) {
	check := func(mounts []v1.VolumeMount, devices []v1.VolumeDevice) {
		for _, m := range mounts {
			mounted = mounted || m.Name == name
		}
		for _, d := range devices {
			mapped = mapped || d.Name == name
		}
	}
	for i := range pod.Spec.InitContainers {
		check(pod.Spec.InitContainers[i].VolumeMounts, pod.Spec.InitContainers[i].VolumeDevices)
	}
	for i := range pod.Spec.Containers {
		check(pod.Spec.Containers[i].VolumeMounts, pod.Spec.Containers[i].VolumeDevices)
	}
	for i := range pod.Spec.EphemeralContainers {
		check(pod.Spec.EphemeralContainers[i].VolumeMounts, pod.Spec.EphemeralContainers[i].VolumeDevices)
	}
	return mounted, mapped
}

// setUpBlock sets up a PV of volumeMode Block. For local, the PV's path
// must be a block device on this node; it is linked, as upstream does, at
// <root>/pods/<uid>/volumeDevices/kubernetes.io~local-volume/<pv>, and the
// link is what the containers get. The device comes from the PV only.
func (p *Plugin) setUpBlock(ctx context.Context, pod *v1.Pod, v *v1.Volume, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error) {
	switch src := &pv.Spec.PersistentVolumeSource; {
	case src.Local != nil:
		if p.rootDir == "" {
			return volume.Mounted{}, fmt.Errorf("local persistentvolume %q of volumeMode Block: %w", pv.Name, volume.ErrUnsupported)
		}
		if err := checkBlockDevice(src.Local.Path); err != nil {
			return volume.Mounted{}, fmt.Errorf("local persistentvolume %q of volumeMode Block: %w", pv.Name, err)
		}
		link, err := volume.LinkDevice(p.rootDir, pod.UID, LocalPluginDir, pv.Name, src.Local.Path)
		if err != nil {
			return volume.Mounted{}, fmt.Errorf("local persistentvolume %q: %w", pv.Name, err)
		}
		return volume.Mounted{HostPath: link, ReadOnly: readOnly, Device: true}, nil
	case src.CSI != nil:
		if p.csi == nil {
			return volume.Mounted{}, fmt.Errorf("csi persistentvolume %q: %w", pv.Name, volume.ErrUnsupported)
		}
		return p.setUpCSI(ctx, pod, claim, pv, readOnly || src.CSI.ReadOnly, func() (volume.Mounted, error) {
			return p.csi.SetUpPersistentBlock(ctx, pod, v, pv, readOnly || src.CSI.ReadOnly)
		})
	}
	return volume.Mounted{}, fmt.Errorf("persistentvolume %q: volumeMode Block of volume source %s: %w", pv.Name, blockSourceName(&pv.Spec.PersistentVolumeSource), volume.ErrUnsupported)
}

// checkBlockDevice checks that path (after symbolic links) is a block
// device.
func checkBlockDevice(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("path %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
		return fmt.Errorf("path %s: %w", path, ErrNotBlockDevice)
	}
	return nil
}

// blockSourceName names a PV source for the Block refusal.
func blockSourceName(s *v1.PersistentVolumeSource) string {
	if s.HostPath != nil {
		return "hostPath"
	}
	return sourceName(s)
}

// tearDownBlock releases, for each local raw block volume the pod links,
// what upstream's kubelet keeps at its global map path
// (<root>/plugins/kubernetes.io~local-volume/volumeDevices/<pv>/<uid>)
// when it mapped the volume before a switch to heartlet; heartlet's own
// link goes with the pod directory.
func (p *Plugin) tearDownBlock(ctx context.Context, uid types.UID) error {
	if p.rootDir == "" {
		return nil
	}
	names, err := volume.DeviceLinks(p.rootDir, uid, LocalPluginDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		dir := filepath.Join(p.rootDir, localGlobalMapDir, name)
		if err := volume.ReleaseGlobalMap(filepath.Join(dir, string(uid))); err != nil {
			errs = append(errs, fmt.Errorf("local persistentvolume %q: %w", name, err))
			continue
		}
		// The volume's directory goes with its last pod.
		if err := os.Remove(dir); err == nil {
			klog.FromContext(ctx).V(2).Info("Released a local block volume mapped by upstream's kubelet", "podUID", uid, "volume", name)
		}
	}
	return errors.Join(errs...)
}
