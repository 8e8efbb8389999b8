package agent

import (
	"fmt"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// minFreeBytes is the least free space the filesystems of the root dir and
// the pod logs dir must have for a new pod sandbox to be created.
const minFreeBytes = 1 << 20

// diskDir is a directory heartlet writes pods' files or logs to, and what
// it is for ("root-dir", "podLogsDir").
type diskDir struct{ path, what string }

// statfsFunc reads a filesystem's statistics (syscall.Statfs).
type statfsFunc func(path string, st *syscall.Statfs_t) error

// diskCheck returns a check that fails, with an error wrapping
// syscall.ENOSPC that names the directory, when the filesystem of one of
// dirs has less than minFreeBytes or no inode free for the user heartlet
// runs as (root, so reserved blocks count). A directory that cannot be
// read is not its concern: the writes into it fail on their own.
func diskCheck(statfs statfsFunc, dirs ...diskDir) func() error {
	return func() error {
		for _, d := range dirs {
			if d.path == "" {
				continue
			}
			var st syscall.Statfs_t
			if err := statfs(d.path, &st); err != nil {
				continue
			}
			free := st.Bfree * uint64(st.Bsize)
			switch {
			case free < minFreeBytes:
				return fmt.Errorf("%w: the filesystem of %s (%s) has %s free",
					syscall.ENOSPC, d.path, d.what, resource.NewQuantity(int64(free), resource.BinarySI))
			case st.Files > 0 && st.Ffree == 0:
				return fmt.Errorf("%w: the filesystem of %s (%s) has no inode free", syscall.ENOSPC, d.path, d.what)
			}
		}
		return nil
	}
}
