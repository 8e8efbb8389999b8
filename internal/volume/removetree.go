package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// errMountBelow is wrapped by RemoveTree when it meets a mount point.
var errMountBelow = errors.New("mount point met")

// errNoMountID is wrapped by RemoveTree when the kernel does not tell
// which mount a file is on (statx(2) STATX_MNT_ID, Linux 5.8).
var errNoMountID = errors.New("the kernel does not report mount IDs (statx STATX_MNT_ID, Linux 5.8)")

// treeRemover is a Mounter that removes a directory tree without reading
// the mount table. The table lists every mount of the node, so reading it
// for each deleted pod costs in proportion to the pods on the node; most
// pod directories have no mount below them at all.
type treeRemover interface {
	// RemoveTree removes dir and everything below it, never entering a
	// mount point nor removing anything through one: every directory it
	// opens must be on the mount dir's parent is on (a bind mount of the
	// same filesystem counts as another mount). When it meets a mount
	// point at or below dir it stops with an error wrapping errMountBelow,
	// having removed part of the tree; the caller unmounts and calls
	// again. It returns an error wrapping errNoMountID, having removed
	// nothing, when it cannot tell mounts apart, and nil when dir does not
	// exist. Symbolic links are removed, never followed.
	RemoveTree(dir string) error
}

// RemoveTree implements treeRemover.
func (systemMounter) RemoveTree(dir string) error { return removeTree(dir) }

// removeTreeAttempts bounds how often one directory is emptied again when
// entries appear in it while it is being removed, or it is swapped for a
// symbolic link between two steps.
const removeTreeAttempts = 3

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

// removeEntry removes name in the directory dirfd (at dirPath) and, when
// it is a directory on mount mnt, its content first.
func removeEntry(dirfd int, dirPath, name string, mnt uint64) error {
	path := filepath.Join(dirPath, name)
	for attempt := 1; ; attempt++ {
		err := unix.Unlinkat(dirfd, name, 0)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			// A file (or a directory on a kernel that checks for mounts
			// first) that something is mounted on.
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
		case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && attempt < removeTreeAttempts:
			continue
		case err != nil:
			return &os.PathError{Op: "open", Path: path, Err: err}
		}
		if err := removeContent(fd, path, mnt); err != nil {
			return err
		}
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("remove %s: %w", path, errMountBelow)
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) && attempt < removeTreeAttempts:
			continue
		}
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
}

// removeContent removes every entry of the directory fd (at path), which
// it closes, after checking that the directory is on mount mnt. The check
// is on the open descriptor, so a mount made on path after the open is
// not entered either: the descriptor still refers to what it covers.
func removeContent(fd int, path string, mnt uint64) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	id, err := mountID(fd, path)
	if err != nil {
		return err
	}
	if id != mnt {
		return fmt.Errorf("remove %s: %w", path, errMountBelow)
	}
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
