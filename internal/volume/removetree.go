package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// errMountBelow is wrapped by RemoveTree when it meets a mount point it
// cannot unmount.
var errMountBelow = errors.New("mount point that cannot be unmounted on its own")

// errNoMountID is wrapped by RemoveTree when the kernel does not tell
// which mount a file is on (statx(2) STATX_MNT_ID, Linux 5.8).
var errNoMountID = errors.New("the kernel does not report mount IDs (statx STATX_MNT_ID, Linux 5.8)")

// treeRemover is a Mounter that unmounts and removes a directory tree
// without reading the mount table. The table lists every mount of the
// node, so reading it for each deleted pod costs in proportion to the pods
// on the node, while a pod's directory has a handful of mounts at most.
type treeRemover interface {
	// RemoveTree unmounts every mount point at or below dir and removes
	// dir with everything below it, never removing anything through a
	// mount: every directory it empties is on the mount dir's parent is
	// on (a bind mount of the same filesystem counts as another mount).
	// Symbolic links are removed, never followed. When it meets a mount
	// it cannot unmount on its own (one with mounts below it, one in use,
	// a file) it stops with an error wrapping errMountBelow, having
	// removed part of the tree; the caller unmounts from the mount table
	// and calls again. It returns an error wrapping errNoMountID, having
	// removed nothing, when it cannot tell mounts apart, and nil when dir
	// does not exist.
	RemoveTree(dir string) error
}

// RemoveTree implements treeRemover.
func (systemMounter) RemoveTree(dir string) error { return removeTree(dir) }

// removeTreeAttempts bounds how often one entry is tried again: after a
// mount on it was unmounted (a path mounted several times shows the next
// mount), when entries appeared in a directory while it was being
// emptied, or when a directory was swapped for a symbolic link.
const removeTreeAttempts = 8

func removeTree(dir string) error {
	dir = filepath.Clean(dir)
	parentPath := filepath.Dir(dir)
	parent, err := unix.Open(parentPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: parentPath, Err: err}
	}
	defer unix.Close(parent)
	mnt, err := mountID(parent, parentPath)
	if err != nil {
		return err
	}
	return removeEntry(parent, parentPath, filepath.Base(dir), mnt)
}

// removeEntry removes name in the directory dirfd (at dirPath), which is
// on mount mnt: a mount on name is unmounted, a directory on mnt emptied
// first.
func removeEntry(dirfd int, dirPath, name string, mnt uint64) error {
	path := filepath.Join(dirPath, name)
	for attempt := 1; ; attempt++ {
		if attempt > removeTreeAttempts {
			return fmt.Errorf("remove %s: still changing after %d attempts", path, removeTreeAttempts)
		}
		unlinkErr := unix.Unlinkat(dirfd, name, 0)
		switch err := unlinkErr; {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			// A file that something is mounted on.
			return fmt.Errorf("remove %s: %w", path, errMountBelow)
		case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
			// EPERM is what POSIX lets unlink(2) return for a directory.
			return &os.PathError{Op: "unlink", Path: path, Err: err}
		}
		// O_NOFOLLOW: a directory swapped for a symbolic link since the
		// unlink is not followed (ELOOP) but unlinked on the next attempt.
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && errors.Is(unlinkErr, unix.EPERM):
			// Not a directory: a file that may not be removed (immutable,
			// or in a sticky directory of another owner).
			return &os.PathError{Op: "unlink", Path: path, Err: unlinkErr}
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			continue
		case err != nil:
			return &os.PathError{Op: "open", Path: path, Err: err}
		}
		// The check is on the open descriptor: a mount made on path after
		// the open is not entered either, the descriptor still refers to
		// the directory it covers.
		id, err := mountID(fd, path)
		if err != nil {
			unix.Close(fd)
			return err
		}
		if id != mnt {
			// Our descriptor would keep the mount busy.
			unix.Close(fd)
			if err := unmountAt(dirfd, name); err != nil {
				return fmt.Errorf("unmount %s: %w", path, err)
			}
			continue
		}
		if err := removeContent(fd, path, mnt); err != nil {
			return err
		}
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			// Mounted on since it was emptied: unmounted next attempt.
			continue
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			continue
		}
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
}

// unmountAt unmounts the mount on name in the directory dirfd. The path
// goes through the descriptor, so no directory swapped for a link since
// dirfd was opened redirects it, and the last component is not followed.
// A mount that is busy (in use, or with mounts below it) is not unmounted;
// the error wraps errMountBelow, as every failure does.
func unmountAt(dirfd int, name string) error {
	if err := unix.Unmount(fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name), unix.UMOUNT_NOFOLLOW); err != nil {
		return fmt.Errorf("%w: %w", errMountBelow, err)
	}
	return nil
}

// removeContent removes every entry of the directory fd (at path), which
// is on mount mnt, and closes fd.
func removeContent(fd int, path string, mnt uint64) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if err := removeEntry(fd, path, name, mnt); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read directory %s: %w", path, err)
		}
	}
}

// mountID returns the ID of the mount the open file fd (at path) is on.
func mountID(fd int, path string) (uint64, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx)
	if errors.Is(err, unix.ENOSYS) {
		return 0, errNoMountID
	}
	if err != nil {
		return 0, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errNoMountID
	}
	return stx.Mnt_id, nil
}
