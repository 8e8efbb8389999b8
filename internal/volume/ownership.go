package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// Permission bits fsGroup ownership adds, as upstream's SetVolumeOwnership:
// group read-write on writable volumes, group read on read-only ones
// (configMap, secret, downwardAPI, projected), plus group search and the
// setgid bit on directories so that new files inherit the group.
const (
	rwMask   os.FileMode = 0o660
	roMask   os.FileMode = 0o440
	execMask os.FileMode = 0o110
)

// ownership is what a pod's fsGroup asks of its volumes that support
// ownership management (emptyDir, configMap, secret, downwardAPI,
// projected). The zero value asks nothing.
type ownership struct {
	// fsGroup is the group that owns every file; nil leaves ownership
	// alone.
	fsGroup *int64
	// onRootMismatch skips the walk when the volume's root already has the
	// group and permissions (fsGroupChangePolicy OnRootMismatch).
	onRootMismatch bool
}

// podOwnership reads fsGroup and fsGroupChangePolicy from the pod.
func podOwnership(pod *v1.Pod) ownership {
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.FSGroup == nil {
		return ownership{}
	}
	g := *psc.FSGroup
	return ownership{
		fsGroup:        &g,
		onRootMismatch: psc.FSGroupChangePolicy != nil && *psc.FSGroupChangePolicy == v1.FSGroupChangeOnRootMismatch,
	}
}

// mask is the permission bits added to files (and, with setgid and
// search, to directories).
func mask(readOnly bool) os.FileMode {
	if readOnly {
		return roMask
	}
	return rwMask
}

// fileMode is the mode a file written into a read-only content volume
// ends with once ownership is applied, so that the atomic writer's
// comparison of modes stays stable.
func (o ownership) fileMode(mode os.FileMode) os.FileMode {
	if o.fsGroup == nil {
		return mode
	}
	return mode | roMask
}

// rootMatches reports whether the volume's root already has the group,
// the setgid bit and the permission bits ownership sets.
func (o ownership) rootMatches(dir string, readOnly bool) (bool, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return false, fmt.Errorf("check ownership of %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, nil
	}
	want := mask(readOnly) | execMask
	return int64(st.Gid) == *o.fsGroup && fi.Mode()&os.ModeSetgid != 0 && fi.Mode().Perm()&want == want, nil
}

// apply gives every file below dir (dir included) the group fsGroup, adds
// the group permission bits of mask(readOnly) and, on directories, group
// search and setgid. Symbolic links get the group but keep their mode.
// Files already right are not touched. With onRootMismatch, or when
// always is false, nothing is done when the root already matches.
func (o ownership) apply(dir string, readOnly, always bool) error {
	if o.fsGroup == nil {
		return nil
	}
	if o.onRootMismatch || !always {
		ok, err := o.rootMatches(dir, readOnly)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	gid := int(*o.fsGroup)
	m := mask(readOnly)
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil // removed under us (an atomic writer swap)
			}
			return fmt.Errorf("set ownership of %s: %w", path, err)
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("set ownership of %s: %w", path, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if int(st.Gid) != gid {
			if err := os.Lchown(path, int(st.Uid), gid); err != nil {
				return fmt.Errorf("set group of %s: %w", path, err)
			}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		want := fi.Mode() | m
		if fi.IsDir() {
			want |= os.ModeSetgid | execMask
		}
		if want != fi.Mode() {
			if err := os.Chmod(path, want&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky)); err != nil {
				return fmt.Errorf("set mode of %s: %w", path, err)
			}
		}
		return nil
	})
}
