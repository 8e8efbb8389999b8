package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DevicesDir is the directory below a pod's directory that holds, per
// plugin, the links to its raw block volumes (upstream's pod device map
// path: <RootDir>/pods/<uid>/volumeDevices/<plugin>/<volume>).
const DevicesDir = "volumeDevices"

// Device permissions as upstream gives them to the runtime.
const (
	devicePermsReadWrite = "mrw"
	devicePermsReadOnly  = "r"
)

// Devices returns the CRI devices of the container's volumeDevices, in
// order. Only a volume a plugin set up as a Device (a claim bound to a
// persistent volume of volumeMode Block) can be one: the host side of the
// device is the plugin's link, never a path of the pod spec, so a
// volumeDevices entry naming a hostPath, emptyDir or any other volume is
// refused. A read-only volume gives permissions "r", else "mrw". Volumes
// must have been prepared; calls for one pod are serialized with Prepare
// and Cleanup.
func (m *Manager) Devices(_ context.Context, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error) {
	if len(c.VolumeDevices) == 0 {
		return nil, nil
	}
	st := m.acquire(pod.UID)
	defer st.mu.Unlock()
	vols := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	out := make([]*runtimeapi.Device, 0, len(c.VolumeDevices))
	for _, vd := range c.VolumeDevices {
		v := vols[vd.Name]
		if v == nil {
			return nil, fmt.Errorf("cannot find volume %q to map into container %q", vd.Name, c.Name)
		}
		if err := validDevicePath(vd.DevicePath); err != nil {
			return nil, fmt.Errorf("volumeDevice %q of container %q: %w", vd.Name, c.Name, err)
		}
		if m.pluginFor(v) == nil || (v.PersistentVolumeClaim == nil && v.Ephemeral == nil) {
			return nil, fmt.Errorf("volumeDevice %q of container %q: volume type %s cannot be a device: only a persistentVolumeClaim or ephemeral volume of volumeMode Block can: %w",
				vd.Name, c.Name, sourceName(&v.VolumeSource), ErrUnsupported)
		}
		mt, ok := st.mounted[v.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of container %q is not set up yet", vd.Name, c.Name)
		}
		if !mt.Device {
			return nil, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", v.Name, v1.PersistentVolumeFilesystem)
		}
		perms := devicePermsReadWrite
		if mt.ReadOnly {
			perms = devicePermsReadOnly
		}
		out = append(out, &runtimeapi.Device{ContainerPath: vd.DevicePath, HostPath: mt.HostPath, Permissions: perms})
	}
	return out, nil
}

// validDevicePath checks a devicePath as the API does: absolute, without
// a ".." element or a NUL byte.
func validDevicePath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("devicePath %q must be an absolute path", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("devicePath %q must not contain a NUL byte", p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return fmt.Errorf("devicePath %q must not contain '..'", p)
		}
	}
	return nil
}

// DeviceLink is where LinkDevice puts the link of a pod's raw block
// volume: <root>/pods/<uid>/volumeDevices/<pluginDir>/<name>.
func DeviceLink(root string, uid types.UID, pluginDir, name string) string {
	return filepath.Join(root, "pods", string(uid), DevicesDir, pluginDir, name)
}

// LinkDevice makes DeviceLink a symbolic link to target (the block device,
// or the file a driver bind-mounted it on), replacing a link to anything
// else, and returns the link. The container runtime resolves it when it
// creates the device node in the container.
func LinkDevice(root string, uid types.UID, pluginDir, name, target string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("link block volume: invalid volume name %q", name)
	}
	dir, err := MakePodDir(root, uid, DevicesDir, pluginDir)
	if err != nil {
		return "", err
	}
	link := filepath.Join(dir, name)
	cur, err := os.Readlink(link)
	switch {
	case err == nil && cur == target:
		return link, nil
	case err == nil:
		if err := os.Remove(link); err != nil {
			return "", fmt.Errorf("replace block volume link %s: %w", link, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read block volume link %s: %w", link, err)
	}
	if err := os.Symlink(target, link); err != nil {
		return "", fmt.Errorf("link block volume %s: %w", link, err)
	}
	return link, nil
}

// DeviceLinks lists the names of a pod's raw block volume links of one
// plugin (none when the directory does not exist).
func DeviceLinks(root string, uid types.UID, pluginDir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "pods", string(uid), DevicesDir, pluginDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list block volumes of pod %s: %w", uid, err)
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// ReleaseGlobalMap releases what upstream's kubelet holds for one pod's
// raw block volume at path (its global map path joined with the pod UID),
// so that heartlet can tear down a volume that kubelet mapped: the loop
// device it attaches to keep the block device open, the bind mount of the
// device on path, and the file. heartlet itself makes none of them (the
// pod's link is what the runtime gets); nothing at path is not an error.
func ReleaseGlobalMap(path string) error {
	return globalMapOps{sysBlock: "/sys/block", detach: detachLoop, unmount: unmountFile}.release(path)
}

// globalMapOps are the system calls of ReleaseGlobalMap (fakes in tests).
type globalMapOps struct {
	sysBlock string                 // /sys/block
	detach   func(dev string) error // detaches a loop device
	unmount  func(path string) error
}

func (o globalMapOps) release(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	loops, err := filepath.Glob(filepath.Join(o.sysBlock, "loop*", "loop", "backing_file"))
	if err != nil {
		return fmt.Errorf("list loop devices: %w", err)
	}
	for _, f := range loops {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		if strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") != path {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if err := o.detach(dev); err != nil {
			return fmt.Errorf("detach loop device %s of %s: %w", dev, path, err)
		}
	}
	if err := o.unmount(path); err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// detachLoop detaches a loop device (LOOP_CLR_FD); one that is already
// free (ENXIO) is fine.
func detachLoop(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return err
	}
	return nil
}

// unmountFile unmounts path when it is a mount point: the bind mount of a
// device node lies on another filesystem (devtmpfs) than its directory. A
// path that is not one (EINVAL) or is gone is fine.
func unmountFile(path string) error {
	var st, parent unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if err := unix.Stat(filepath.Dir(path), &parent); err != nil {
		return err
	}
	if st.Dev == parent.Dev {
		return nil
	}
	err := unix.Unmount(path, 0)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
