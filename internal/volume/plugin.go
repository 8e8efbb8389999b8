package volume

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Mounted is what a Plugin set up for one volume of a pod.
type Mounted struct {
	// HostPath is what the runtime mounts into the containers (and what a
	// subPath is opened below).
	HostPath string
	// ReadOnly mounts the volume read-only into every container (for a
	// Device, the containers get it read-only).
	ReadOnly bool
	// Device reports a raw block volume (volumeMode Block): HostPath is a
	// symbolic link to the block device, given to the containers that name
	// the volume in volumeDevices (see Devices) and never mounted.
	Device bool
	// Ownership asks the Manager to give the volume to the pod's fsGroup
	// (honouring fsGroupChangePolicy) once it is set up; ignored when
	// ReadOnly.
	Ownership bool
}

// Plugin sets up the volumes of the kinds the Manager does not own itself
// (persistent volume claims, CSI volumes). Options.Plugins lists them; the
// first whose Handles is true owns a volume.
//
// Contract:
//   - Handles reports whether the plugin owns v. It does no I/O.
//   - SetUp makes v ready for pod and returns where it is. It is
//     idempotent: it runs before every container start and must find what
//     an earlier call (or an earlier run of heartlet) did. An error that
//     only time can fix (an unbound claim, a missing attachment, a driver
//     not registered yet) is returned as is and SetUp is called again.
//   - Reconstruct adopts the volumes of a pod whose containers survived a
//     restart of heartlet, from what is on the node; it mounts, unmounts
//     and removes nothing. It is idempotent.
//   - TearDown releases everything the plugin holds for the pod UID. The
//     Manager calls it in Cleanup before it unmounts what is left below the
//     pod directory and removes it; it finds what to release on the node,
//     so it is safe after a restart, idempotent and safe without SetUp. An
//     error keeps the pod directory; Cleanup is retried.
//
// Calls for one pod are never concurrent; calls for different pods may be.
type Plugin interface {
	Handles(v *v1.Volume) bool
	SetUp(ctx context.Context, pod *v1.Pod, v *v1.Volume) (Mounted, error)
	Reconstruct(ctx context.Context, pod *v1.Pod) error
	TearDown(ctx context.Context, uid types.UID) error
}

// pluginFor returns the plugin that owns v, or nil.
func (m *Manager) pluginFor(v *v1.Volume) Plugin {
	for _, p := range m.opts.Plugins {
		if p.Handles(v) {
			return p
		}
	}
	return nil
}

// setUpPlugin sets up a volume owned by a plugin and remembers where it
// is for Mounts. st is locked by the caller.
func (m *Manager) setUpPlugin(ctx context.Context, st *podState, pod *v1.Pod, p Plugin, v *v1.Volume) error {
	mt, err := p.SetUp(ctx, pod, v)
	if err != nil {
		return err
	}
	if mt.HostPath == "" {
		return fmt.Errorf("volume %q: plugin returned no host path", v.Name)
	}
	if mt.Ownership && !mt.ReadOnly && !mt.Device {
		// As for emptyDir: applied once, when the root does not match.
		if err := podOwnership(pod).apply(mt.HostPath, false, false); err != nil {
			return err
		}
	}
	if st.mounted == nil {
		st.mounted = map[string]Mounted{}
	}
	st.mounted[v.Name] = mt
	return nil
}

// pluginPath returns where a plugin's volume was set up by Prepare.
func pluginPath(st *podState, v *v1.Volume) (string, bool, error) {
	mt, ok := st.mounted[v.Name]
	if !ok {
		return "", false, fmt.Errorf("volume %q is not set up yet", v.Name)
	}
	if mt.Device {
		return "", false, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", v.Name, v1.PersistentVolumeBlock)
	}
	return mt.HostPath, mt.ReadOnly, nil
}

// reconstructPlugins lets every plugin adopt the pod's volumes.
func (m *Manager) reconstructPlugins(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for _, p := range m.opts.Plugins {
		if err := p.Reconstruct(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tearDownPlugins releases what every plugin holds for uid.
func (m *Manager) tearDownPlugins(ctx context.Context, uid types.UID) error {
	var errs []error
	for _, p := range m.opts.Plugins {
		if err := p.TearDown(ctx, uid); err != nil {
			klog.FromContext(ctx).V(2).Info("Volume plugin tear-down failed", "podUID", uid, "err", err)
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("tear down volumes of pod %s: %w", uid, errors.Join(errs...))
	}
	return nil
}
