package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// The driver's storage: one ext4 filesystem in a sparse file, loop-mounted
// at <state>/fs. A filesystem volume is a directory on it, a block volume a
// sparse file on it attached to a loop device when staged.

// run runs a command and returns its error with the command's output.
func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// mounted tells whether path is a mount point; a missing path is not.
func mounted(path string) (bool, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	ok, err := mountinfo.Mounted(path)
	if err != nil {
		return false, fmt.Errorf("checking the mount at %s: %w", path, err)
	}
	return ok, nil
}

// setupBacking makes sure the backing filesystem exists and is mounted.
func setupBacking(ctx context.Context, dirs stateDirs, size int64) error {
	if err := os.MkdirAll(dirs.fs(), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dirs.fs(), err)
	}
	ok, err := mounted(dirs.fs())
	if err != nil {
		return err
	}
	if !ok {
		if _, err := os.Stat(dirs.backingFile()); errors.Is(err, fs.ErrNotExist) {
			if err := createSparse(dirs.backingFile(), size); err != nil {
				return err
			}
			if _, err := run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", dirs.backingFile()); err != nil {
				return fmt.Errorf("formatting the backing filesystem: %w", err)
			}
		}
		if _, err := run(ctx, "mount", "-o", "loop", dirs.backingFile(), dirs.fs()); err != nil {
			return fmt.Errorf("mounting the backing filesystem: %w", err)
		}
	}
	for _, d := range []string{filepath.Dir(dirs.volumeDir("x")), filepath.Dir(dirs.blockFile("x"))} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

// createSparse creates (or grows) a sparse file of size bytes.
func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if st.Size() >= size {
		return nil
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("sizing %s: %w", path, err)
	}
	return nil
}

// attachLoop attaches file to a free loop device and returns the device.
func attachLoop(ctx context.Context, file string, readOnly bool) (string, error) {
	args := []string{"--find", "--show"}
	if readOnly {
		args = append(args, "--read-only")
	}
	dev, err := run(ctx, "losetup", append(args, file)...)
	if err != nil {
		return "", fmt.Errorf("attaching %s to a loop device: %w", file, err)
	}
	return dev, nil
}

// loopBacking returns the file a loop device is attached to ("" when it
// is free or gone).
func loopBacking(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// detachLoop detaches dev if it is still attached to file.
func detachLoop(ctx context.Context, dev, file string) error {
	if dev == "" || loopBacking(dev) != file {
		return nil
	}
	if _, err := run(ctx, "losetup", "--detach", dev); err != nil {
		return fmt.Errorf("detaching %s: %w", dev, err)
	}
	return nil
}

// refreshLoop makes the loop device see its file's new size.
func refreshLoop(ctx context.Context, dev string) error {
	if _, err := run(ctx, "losetup", "--set-capacity", dev); err != nil {
		return fmt.Errorf("resizing %s: %w", dev, err)
	}
	return nil
}

// mountFlagBits are the mount flags (CSI MountVolume.mount_flags, the
// PV's mountOptions) a bind mount can honour. Any other flag is refused.
var mountFlagBits = map[string]uintptr{
	"ro":         unix.MS_RDONLY,
	"rw":         0,
	"noexec":     unix.MS_NOEXEC,
	"nosuid":     unix.MS_NOSUID,
	"nodev":      unix.MS_NODEV,
	"noatime":    unix.MS_NOATIME,
	"nodiratime": unix.MS_NODIRATIME,
	"relatime":   unix.MS_RELATIME,
	"sync":       unix.MS_SYNCHRONOUS,
	"defaults":   0,
}

// parseMountFlags turns mount flags into MS_* bits.
func parseMountFlags(flags []string) (uintptr, error) {
	var bits uintptr
	for _, f := range flags {
		b, ok := mountFlagBits[f]
		if !ok {
			return 0, fmt.Errorf("mount flag %q is not supported by this driver (supported: ro, rw, noexec, nosuid, nodev, noatime, nodiratime, relatime, sync, defaults)", f)
		}
		bits |= b
	}
	return bits, nil
}

// bindMount bind-mounts src onto dst and then applies flags (MS_RDONLY and
// the like), which a bind mount only takes on a remount.
func bindMount(src, dst string, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", src, dst, err)
	}
	if flags == 0 {
		return nil
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		_ = unix.Unmount(dst, 0)
		return fmt.Errorf("applying the mount flags to %s: %w", dst, err)
	}
	return nil
}

// unmountAll unmounts path until it is no mount point any more (a path
// mounted twice needs two unmounts). A missing path is fine.
func unmountAll(path string) error {
	for range 8 {
		ok, err := mounted(path)
		if err != nil || !ok {
			return err
		}
		if err := unix.Unmount(path, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmounting %s: still mounted", path)
}

// dirUsage is the bytes and inodes used under dir.
func dirUsage(dir string) (bytes, inodes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		inodes++
		if st, ok := info.Sys().(*unix.Stat_t); ok {
			bytes += st.Blocks * 512
		} else {
			bytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return bytes, inodes, nil
}

// chownGroup gives the volume root to group gid with the setgid bit, so
// that a pod with that fsGroup may write it (CSI volume_mount_group).
func chownGroup(dir, group string) error {
	gid, err := strconv.Atoi(group)
	if err != nil || gid < 0 {
		return fmt.Errorf("volume_mount_group %q is not a numeric group ID", group)
	}
	if err := os.Lchown(dir, -1, gid); err != nil {
		return fmt.Errorf("changing the group of %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o775|os.ModeSetgid); err != nil {
		return fmt.Errorf("changing the mode of %s: %w", dir, err)
	}
	return nil
}
