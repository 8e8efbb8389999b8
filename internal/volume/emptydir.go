package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/qos"
)

// setUpEmptyDir creates an emptyDir volume: a directory on disk, or a tmpfs
// for medium Memory (sized by sizeLimit, the pod's memory limit and the
// node's allocatable memory, whichever is smallest), owned by the pod's
// fsGroup when it has one.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, v *v1.Volume) error {
	dir := m.volumeDir(pod.UID, PluginEmptyDir, v.Name)
	var err error
	switch medium := v.EmptyDir.Medium; {
	case medium == v1.StorageMediumDefault:
		err = m.setUpDir(pod, dir, false, 0)
	case medium == v1.StorageMediumMemory:
		var limit int64
		if v.EmptyDir.SizeLimit != nil {
			limit = v.EmptyDir.SizeLimit.Value()
		}
		err = m.setUpDir(pod, dir, true, limit)
	case strings.HasPrefix(string(medium), string(v1.StorageMediumHugePages)):
		return fmt.Errorf("emptyDir medium %s: %w", medium, ErrUnsupported)
	default:
		return fmt.Errorf("unknown storage medium %q", medium)
	}
	if err != nil {
		return err
	}
	// Ownership is applied once, when the volume is new: later the files
	// are the containers' own. A root that does not match means new.
	return podOwnership(pod).apply(dir, false, false)
}

// setUpDir creates a volume directory with mode 0777 (whatever the umask;
// its parents are DataDirMode)
// and, when memory is set, mounts a tmpfs on it unless one is there
// already. sizeLimit (bytes, 0 for none) bounds the tmpfs size.
func (m *Manager) setUpDir(pod *v1.Pod, dir string, memory bool, sizeLimit int64) error {
	// The directories above, up to the root directory, keep other local
	// users out (see DataDirMode).
	if _, err := MakePodDir(m.opts.RootDir, pod.UID, "volumes", filepath.Base(filepath.Dir(dir))); err != nil {
		return err
	}
	if err := os.Mkdir(dir, emptyDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create volume directory %s: %w", dir, err)
	}
	if !memory {
		return ensureMode(dir, emptyDirMode)
	}
	mounted, err := m.isMountPoint(dir, "tmpfs")
	if err != nil {
		return fmt.Errorf("check tmpfs on %s: %w", dir, err)
	}
	if mounted {
		return nil
	}
	if err := ensureMode(dir, emptyDirMode); err != nil {
		return err
	}
	var opts []string
	if size := m.tmpfsSize(pod, sizeLimit); size > 0 {
		opts = append(opts, "size="+strconv.FormatInt(size, 10))
	}
	if err := m.mounter.Mount("tmpfs", dir, "tmpfs", opts); err != nil {
		return fmt.Errorf("mount tmpfs on volume directory %s: %w", dir, err)
	}
	return nil
}

// ensureMode sets the permission bits of dir when they differ.
func ensureMode(dir string, mode os.FileMode) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check volume directory %s: %w", dir, err)
	}
	if fi.Mode().Perm() == mode.Perm() {
		return nil
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("set mode of volume directory %s: %w", dir, err)
	}
	return nil
}

// tmpfsSize returns the size of a memory-backed volume in bytes, 0 for the
// kernel's default: the smallest positive of the node's allocatable memory,
// the pod's memory limit (when it has one) and the volume's sizeLimit.
func (m *Manager) tmpfsSize(pod *v1.Pod, sizeLimit int64) int64 {
	var size int64
	smaller := func(v int64) {
		if v > 0 && (size == 0 || v < size) {
			size = v
		}
	}
	if m.opts.Allocatable != nil {
		if q, ok := m.opts.Allocatable()[v1.ResourceMemory]; ok {
			smaller(q.Value())
		}
	}
	smaller(podMemoryLimit(pod))
	smaller(sizeLimit)
	return size
}

// podMemoryLimit is the pod's memory limit in bytes, 0 when unlimited: the
// pod-level limit, else the aggregate of the containers' limits when every
// container has one.
func podMemoryLimit(pod *v1.Pod) int64 {
	if q, ok := qos.PodLevelLimit(pod, v1.ResourceMemory); ok {
		return q.Value()
	}
	if !qos.AllContainersLimit(pod, v1.ResourceMemory) {
		return 0
	}
	_, limits := qos.PodRequestsAndLimits(pod)
	q, ok := limits[v1.ResourceMemory]
	if !ok {
		return 0
	}
	return q.Value()
}
