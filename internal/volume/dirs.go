package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// DataDirMode is the mode of heartlet's own directories below the root
// directory, as upstream: the root directory, <root>/pods, each pod's
// directory, its volumes directory and the plugin directories in it, and
// its containers directory. Other local users cannot enter them, so the
// secrets, tokens and other volume files below, whatever their own modes
// (a container reads them through its bind mounts, which no host
// directory's mode restricts), and the termination message files stay out
// of their reach.
const DataDirMode = 0o750

// MakeDataDirs creates the root directory (with missing parents) and
// <root>/pods with DataDirMode whatever the umask, and narrows them to at
// most DataDirMode when they exist with wider permissions, such as a root
// directory someone made 0755.
func MakeDataDirs(root string) error {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(root), DataDirMode); err != nil {
			return fmt.Errorf("create root directory %s: %w", root, err)
		}
	}
	return makePrivateDirs(root, filepath.Join(root, "pods"))
}

// MakePodDir creates <root>/pods/<uid> and the directories sub names below
// it, one inside the other, as MakeDataDirs does, and returns the deepest.
// uid and every element of sub must be a single path element.
func MakePodDir(root string, uid types.UID, sub ...string) (string, error) {
	if err := MakeDataDirs(root); err != nil {
		return "", err
	}
	dirs := make([]string, 0, len(sub)+1)
	cur := filepath.Join(root, "pods")
	for _, e := range append([]string{string(uid)}, sub...) {
		if e == "" || e == "." || e == ".." || strings.ContainsRune(e, '/') {
			return "", fmt.Errorf("create pod directory: invalid path element %q", e)
		}
		cur = filepath.Join(cur, e)
		dirs = append(dirs, cur)
	}
	if err := makePrivateDirs(dirs...); err != nil {
		return "", err
	}
	return cur, nil
}

// makePrivateDirs creates each directory, the parent of the next, with
// DataDirMode (chmod after mkdir, so the umask does not widen or narrow
// it), and narrows one that exists to at most DataDirMode. A path that is
// not a directory is an error.
func makePrivateDirs(dirs ...string) error {
	for _, d := range dirs {
		err := os.Mkdir(d, DataDirMode)
		created := err == nil
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory %s: %w", d, err)
		}
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check directory %s: %w", d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("create directory %s: not a directory", d)
		}
		perm := fi.Mode().Perm()
		want := perm & DataDirMode
		if created {
			want = DataDirMode
		}
		if perm == want {
			continue
		}
		if err := os.Chmod(d, want); err != nil {
			return fmt.Errorf("set mode of directory %s: %w", d, err)
		}
	}
	return nil
}
