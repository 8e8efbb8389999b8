package volume

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// MountPoint is one entry of the mount table.
type MountPoint struct {
	// Path is the absolute mount point.
	Path string
	// FSType is the filesystem type, e.g. "tmpfs".
	FSType string
}

// Mounter mounts and unmounts the tmpfs filesystems of memory-backed
// volumes and the bind mounts of subPaths, and lists the mount table. The
// default uses mount(2), umount(2) and /proc/self/mountinfo; tests use a
// fake so that they need no root.
type Mounter interface {
	// Mount mounts a filesystem of type fstype from source on target with
	// the given options (joined with commas, as mount(8) takes them).
	Mount(source, target, fstype string, options []string) error
	// BindMount bind-mounts source on target (not recursively). The
	// kernel resolves source in the calling process, so a
	// /proc/self/fd/<fd> source mounts the file the descriptor holds.
	BindMount(source, target string) error
	// Unmount unmounts target.
	Unmount(target string) error
	// List returns the current mount points.
	List() ([]MountPoint, error)
}

// mountChecker is a Mounter that tells whether one path is a mount point
// without reading the whole mount table. Set-up checks its tmpfs volumes
// on every sync of every pod, and the table grows with the pods (each adds
// its own mounts), so a full read each time costs O(pods²) in a burst.
type mountChecker interface {
	// IsMountPoint reports whether path is a mount point of type fstype
	// ("" for any); ok is false when it cannot tell (e.g. an fstype it
	// does not know) and the table must be read.
	IsMountPoint(path, fstype string) (mounted, ok bool, err error)
}

// fsMagic are the statfs(2) f_type values of the types mountChecker knows.
var fsMagic = map[string]int64{"tmpfs": unix.TMPFS_MAGIC}

// IsMountPoint implements mountChecker: path is a mount point when it lies
// on another device than its parent directory (or is "/"), and of type
// fstype when statfs(2) says so. A bind mount from the same filesystem is
// not seen; the volumes this serves are tmpfs mounts of their own.
func (systemMounter) IsMountPoint(path, fstype string) (bool, bool, error) {
	magic, known := fsMagic[fstype]
	if fstype != "" && !known {
		return false, false, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("resolve %s: %w", path, err)
	}
	var st, parent unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return false, false, fmt.Errorf("stat %s: %w", real, err)
	}
	if real != "/" {
		if err := unix.Stat(filepath.Dir(real), &parent); err != nil {
			return false, false, fmt.Errorf("stat %s: %w", filepath.Dir(real), err)
		}
		if st.Dev == parent.Dev {
			return false, true, nil
		}
	}
	if fstype == "" {
		return true, true, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(real, &fs); err != nil {
		return false, false, fmt.Errorf("statfs %s: %w", real, err)
	}
	return int64(fs.Type) == magic, true, nil
}

// mountinfoPath is where the system mounter reads the mount table.
const mountinfoPath = "/proc/self/mountinfo"

// systemMounter is the Mounter of the running system.
type systemMounter struct{}

// NewSystemMounter returns the Mounter that uses mount(2), umount(2) and
// /proc/self/mountinfo.
func NewSystemMounter() Mounter { return systemMounter{} }

// Mount implements Mounter.
func (systemMounter) Mount(source, target, fstype string, options []string) error {
	if err := unix.Mount(source, target, fstype, 0, strings.Join(options, ",")); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", source, fstype, target, err)
	}
	return nil
}

// BindMount implements Mounter.
func (systemMounter) BindMount(source, target string) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s on %s: %w", source, target, err)
	}
	return nil
}

// Unmount implements Mounter.
func (systemMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	return nil
}

// List implements Mounter.
func (systemMounter) List() ([]MountPoint, error) {
	data, err := os.ReadFile(mountinfoPath)
	if err != nil {
		return nil, fmt.Errorf("read mount table %s: %w", mountinfoPath, err)
	}
	mps, err := parseMountInfo(data)
	if err != nil {
		return nil, fmt.Errorf("parse mount table %s: %w", mountinfoPath, err)
	}
	return mps, nil
}

// parseMountInfo parses the content of /proc/<pid>/mountinfo (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// The fifth field is the mount point (with space, tab, newline and
// backslash escaped as octal), the field after the "-" separator is the
// filesystem type.
func parseMountInfo(data []byte) ([]MountPoint, error) {
	var out []MountPoint
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 8 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 8", line, len(fields))
		}
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			return nil, fmt.Errorf("line %d: no filesystem type after the separator", line)
		}
		p, err := unescapeOctal(fields[4])
		if err != nil {
			return nil, fmt.Errorf("line %d: mount point: %w", line, err)
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("line %d: mount point %q is not absolute", line, p)
		}
		out = append(out, MountPoint{Path: filepath.Clean(p), FSType: fields[sep+1]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescapeOctal decodes the \NNN escapes the kernel writes into mount
// table fields.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", errors.New("truncated octal escape")
		}
		v := 0
		for _, c := range []byte(s[i+1 : i+4]) {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad octal escape %q", s[i:i+4])
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("octal escape %q out of range", s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
