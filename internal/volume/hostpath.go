package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"
)

// checkHostPath applies the type check of a hostPath volume, creating the
// path for DirectoryOrCreate (mode 0755, with parents) and FileOrCreate
// (an empty file, mode 0644; the parent must exist). An unset or empty type
// checks nothing. Symbolic links are followed.
func checkHostPath(src *v1.HostPathVolumeSource) error {
	if src.Type == nil || *src.Type == v1.HostPathUnset {
		return nil
	}
	p := src.Path
	switch t := *src.Type; t {
	case v1.HostPathDirectoryOrCreate:
		if !pathExists(p) {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("create hostPath directory %s: %w", p, err)
			}
			return nil
		}
		return hostPathTypeIs(p, v1.HostPathDirectory, "directory")
	case v1.HostPathDirectory:
		return hostPathTypeIs(p, v1.HostPathDirectory, "directory")
	case v1.HostPathFileOrCreate:
		if !pathExists(p) {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create hostPath file %s: %w", p, err)
			}
			if f != nil {
				_ = f.Close()
			}
			return nil
		}
		return hostPathTypeIs(p, v1.HostPathFile, "file")
	case v1.HostPathFile:
		return hostPathTypeIs(p, v1.HostPathFile, "file")
	case v1.HostPathSocket:
		return hostPathTypeIs(p, v1.HostPathSocket, "socket file")
	case v1.HostPathCharDev:
		return hostPathTypeIs(p, v1.HostPathCharDev, "character device")
	case v1.HostPathBlockDev:
		return hostPathTypeIs(p, v1.HostPathBlockDev, "block device")
	default:
		return fmt.Errorf("%s is an invalid volume type", t)
	}
}

func pathExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// hostPathTypeIs checks that p exists and has the wanted type.
func hostPathTypeIs(p string, want v1.HostPathType, desc string) error {
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath %s doesn't exist", p)
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", p, desc, err)
	}
	got, ok := fileType(fi.Mode())
	if !ok {
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: only file, directory, socket, block device and character device are recognised", p, desc)
	}
	if got != want {
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", p, desc, got)
	}
	return nil
}

// fileType maps a file mode to the hostPath type naming it.
func fileType(m fs.FileMode) (v1.HostPathType, bool) {
	switch {
	case m&fs.ModeSocket != 0:
		return v1.HostPathSocket, true
	case m.IsRegular():
		return v1.HostPathFile, true
	case m.IsDir():
		return v1.HostPathDirectory, true
	case m&fs.ModeCharDevice != 0:
		return v1.HostPathCharDev, true
	case m&fs.ModeDevice != 0:
		return v1.HostPathBlockDev, true
	}
	return "", false
}

// CheckHostPath applies the type check of a hostPath volume source as the
// Manager does for hostPath volumes (for hostPath PersistentVolumes).
func CheckHostPath(src *v1.HostPathVolumeSource) error { return checkHostPath(src) }
