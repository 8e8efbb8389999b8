package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRemoveTree removes trees without mounts: nested directories, more
// entries than one directory read returns, empty directories, and
// symbolic links, which are removed and never followed.
func TestRemoveTree(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(outside, "d", "marker")
	if err := os.WriteFile(marker, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		build func(t *testing.T, dir string)
	}{
		{"empty directory", func(t *testing.T, dir string) {}},
		{"nested", func(t *testing.T, dir string) {
			mkdirs(t, filepath.Join(dir, "a/b/c"), filepath.Join(dir, "a/e"))
			writeTestFiles(t, filepath.Join(dir, "a/b/c/f"), filepath.Join(dir, "a/g"), filepath.Join(dir, "h"))
		}},
		{"many entries", func(t *testing.T, dir string) {
			for i := range 2500 {
				writeTestFiles(t, filepath.Join(dir, fmt.Sprintf("f%04d", i)))
			}
			mkdirs(t, filepath.Join(dir, "zz/sub"))
		}},
		{"links out", func(t *testing.T, dir string) {
			mkdirs(t, filepath.Join(dir, "v"))
			for name, target := range map[string]string{"v/dir": filepath.Join(outside, "d"), "v/file": marker, "v/up": "../../outside", "dangling": "/nonexistent"} {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"read-only directories", func(t *testing.T, dir string) {
			mkdirs(t, filepath.Join(dir, "ro/sub"))
			writeTestFiles(t, filepath.Join(dir, "ro/sub/f"))
			for _, d := range []string{"ro/sub", "ro"} {
				if err := os.Chmod(filepath.Join(dir, d), 0o555); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "read-only directories" && os.Geteuid() != 0 {
				t.Skip("skipping: removing from a read-only directory needs root")
			}
			dir := filepath.Join(base, "pods", tt.name)
			mkdirs(t, dir)
			tt.build(t, dir)
			if err := removeTree(dir); errors.Is(err, errNoMountID) {
				t.Skipf("skipping: %v", err)
			} else if err != nil {
				t.Fatalf("removeTree: %v", err)
			}
			if _, err := os.Lstat(dir); !os.IsNotExist(err) {
				t.Errorf("%s after removeTree: %v", dir, err)
			}
			if b, err := os.ReadFile(marker); err != nil || string(b) != "keep" {
				t.Errorf("the file behind a link after removeTree: %q, %v", b, err)
			}
		})
	}
	for _, missing := range []string{filepath.Join(base, "pods/none"), filepath.Join(base, "no/parent")} {
		if err := removeTree(missing); err != nil {
			t.Errorf("removeTree(%s) = %v, want nil", missing, err)
		}
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeTestFiles(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemoveTreeImmutableFile: a file that may not be removed fails the
// removal with the unlink's error, naming the file.
func TestRemoveTreeImmutableFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: setting the immutable flag needs root")
	}
	dir := filepath.Join(t.TempDir(), "pod")
	mkdirs(t, filepath.Join(dir, "v"))
	file := filepath.Join(dir, "v", "locked")
	writeTestFiles(t, file)
	if err := setImmutable(file, true); err != nil {
		t.Skipf("skipping: the filesystem has no immutable flag: %v", err)
	}
	t.Cleanup(func() { _ = setImmutable(file, false) })
	err := removeTree(dir)
	if errors.Is(err, errNoMountID) {
		t.Skipf("skipping: %v", err)
	}
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), file) {
		t.Errorf("removeTree = %v, want EPERM naming %s", err, file)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the immutable file after removeTree: %v", err)
	}
}

// fsImmutableFlag is FS_IMMUTABLE_FL of linux/fs.h (chattr +i).
const fsImmutableFlag = 0x10

func setImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFlag
	} else {
		flags &^= fsImmutableFlag
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
}
