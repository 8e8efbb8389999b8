package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// File names the atomic writer reserves in a volume directory. Every name
// starting with ".." belongs to it.
const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout is the time layout of a timestamped data directory name;
	// os.MkdirTemp appends a random suffix.
	tsDirLayout = "..2006_01_02_15_04_05."
)

// Limits of one projected path, as the API validates them.
const (
	maxFileNameLength = 255
	maxPathLength     = 4096
)

// fileProjection is the content, mode and owner of one file of a volume.
type fileProjection struct {
	data []byte
	mode os.FileMode
	// uid, when set, owns the file (a service account token for the one
	// user every container runs as); else root does.
	uid *int64
}

// payload maps a path relative to the volume directory to its file.
type payload map[string]fileProjection

// validatePayloadPath checks one path of a payload: relative, not empty,
// no ".." element, not starting with ".." (names the writer reserves), no
// element longer than 255 bytes and at most 4096 bytes in all.
func validatePayloadPath(p string) error {
	switch {
	case p == "":
		return errors.New("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path: must be relative path: %s", p)
	case len(p) > maxPathLength:
		return fmt.Errorf("invalid path: must be less than or equal to %d characters", maxPathLength)
	}
	items := strings.Split(p, "/")
	for _, item := range items {
		if item == ".." {
			return fmt.Errorf("invalid path: must not contain '..': %s", p)
		}
		if len(item) > maxFileNameLength {
			return fmt.Errorf("invalid path: filenames must be less than or equal to %d characters", maxFileNameLength)
		}
	}
	if strings.HasPrefix(items[0], "..") {
		return fmt.Errorf("invalid path: must not start with '..': %s", p)
	}
	if filepath.Clean(p) == "." {
		return fmt.Errorf("invalid path: must name a file: %s", p)
	}
	return nil
}

// writeAtomic projects files into dir so that a reader never sees a mix of
// old and new content:
//
//   - the files live in a timestamped directory dir/..<timestamp>.<random>;
//   - dir/..data is a symbolic link to it;
//   - every top-level name of the payload is a symbolic link
//     dir/<name> -> ..data/<name>.
//
// An update writes a complete new timestamped directory, points a temporary
// link at it and renames that link over ..data (rename(2) is atomic), then
// removes the top-level links of paths that are gone and the previous
// timestamped directory. When the files on disk already match the payload
// (content and mode) nothing is written. It reports whether it wrote.
// dir must exist. Calls for one dir must be serialized by the caller.
func writeAtomic(dir string, files payload, now time.Time) (bool, error) {
	clean := make(payload, len(files))
	for p, f := range files {
		if err := validatePayloadPath(p); err != nil {
			return false, err
		}
		clean[filepath.Clean(p)] = f
	}

	dataLink := filepath.Join(dir, dataDirName)
	oldTs, err := os.Readlink(dataLink)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("read data link %s: %w", dataLink, err)
		}
		oldTs = ""
	}

	var oldFiles map[string]bool
	if oldTs != "" {
		oldFiles, err = listFiles(filepath.Join(dir, oldTs))
		if err != nil {
			return false, err
		}
		same, err := matches(filepath.Join(dir, oldTs), clean, oldFiles)
		if err != nil {
			return false, err
		}
		if same {
			return false, nil
		}
	}

	tsDir, err := os.MkdirTemp(dir, now.UTC().Format(tsDirLayout))
	if err != nil {
		return false, fmt.Errorf("create data directory in %s: %w", dir, err)
	}
	// Group and others must be able to traverse the tree, whatever the
	// umask.
	if err := os.Chmod(tsDir, 0o755); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("set mode of data directory %s: %w", tsDir, err)
	}
	if err := writeFiles(tsDir, clean); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}

	// The user-visible links point through ..data, so they can be created
	// before the swap: until then they dangle or show the old content.
	top := topLevel(clean)
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(tsDir)
			return false, fmt.Errorf("check visible path %s: %w", link, err)
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			_ = os.RemoveAll(tsDir)
			return false, fmt.Errorf("create visible link %s: %w", link, err)
		}
		// The link to a file with an owner belongs to that owner too, as
		// upstream's atomic writer makes it.
		if f, ok := clean[name]; ok && f.uid != nil {
			if err := os.Lchown(link, int(*f.uid), -1); err != nil {
				_ = os.RemoveAll(tsDir)
				return false, fmt.Errorf("set owner of visible link %s: %w", link, err)
			}
		}
	}

	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink) // left over from an interrupted write
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("create data link %s: %w", tmpLink, err)
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		_ = os.Remove(tmpLink)
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("swap data link %s: %w", dataLink, err)
	}

	var errs []error
	for name := range topLevel(setToPayloadKeys(oldFiles)) {
		if top[name] {
			continue
		}
		link := filepath.Join(dir, name)
		if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := os.Remove(link); err != nil {
				errs = append(errs, fmt.Errorf("remove visible link %s: %w", link, err))
			}
		}
	}
	if err := removeStaleDataDirs(dir, filepath.Base(tsDir)); err != nil {
		errs = append(errs, err)
	}
	return true, errors.Join(errs...)
}

// listFiles returns the regular files below root, as slash-separated paths
// relative to root.
func listFiles(root string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list data directory %s: %w", root, err)
	}
	return out, nil
}

// matches reports whether the files below tsDir are exactly the payload,
// with the same content and mode.
func matches(tsDir string, files payload, onDisk map[string]bool) (bool, error) {
	if len(onDisk) != len(files) {
		return false, nil
	}
	for p, f := range files {
		if !onDisk[p] {
			return false, nil
		}
		full := filepath.Join(tsDir, p)
		fi, err := os.Lstat(full)
		if err != nil {
			return false, fmt.Errorf("check file %s: %w", full, err)
		}
		if fi.Mode().Perm() != f.mode.Perm() || fi.Size() != int64(len(f.data)) {
			return false, nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int64(st.Uid) != f.owner() {
			return false, nil
		}
		got, err := os.ReadFile(full)
		if err != nil {
			return false, fmt.Errorf("read file %s: %w", full, err)
		}
		if !bytes.Equal(got, f.data) {
			return false, nil
		}
	}
	return true, nil
}

// writeFiles writes the payload below dir, with the exact modes (chmod
// after the write, so the umask does not apply).
func writeFiles(dir string, files payload) error {
	for p, f := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("create directory for file %s: %w", full, err)
		}
		if err := os.WriteFile(full, f.data, f.mode.Perm()); err != nil {
			return fmt.Errorf("write file %s: %w", full, err)
		}
		if err := os.Chmod(full, f.mode.Perm()); err != nil {
			return fmt.Errorf("set mode of file %s: %w", full, err)
		}
		if f.uid != nil {
			if err := os.Lchown(full, int(*f.uid), -1); err != nil {
				return fmt.Errorf("set owner of file %s: %w", full, err)
			}
		}
	}
	return nil
}

// owner is the user the file belongs to once written: uid, else the
// writer (root).
func (f fileProjection) owner() int64 {
	if f.uid != nil {
		return *f.uid
	}
	return int64(os.Geteuid())
}

// topLevel returns the first path element of every payload path.
func topLevel(files payload) map[string]bool {
	out := make(map[string]bool, len(files))
	for p := range files {
		name, _, _ := strings.Cut(p, "/")
		out[name] = true
	}
	return out
}

func setToPayloadKeys(set map[string]bool) payload {
	out := make(payload, len(set))
	for p := range set {
		out[p] = fileProjection{}
	}
	return out
}

// removeStaleDataDirs removes every timestamped data directory of dir but
// keep: the previous one after a swap, and any an interrupted write left.
func removeStaleDataDirs(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list volume directory %s: %w", dir, err)
	}
	var stale []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || n == keep || !strings.HasPrefix(n, "..") || n == dataDirName || n == newDataDirName {
			continue
		}
		stale = append(stale, n)
	}
	sort.Strings(stale)
	var errs []error
	for _, n := range stale {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			errs = append(errs, fmt.Errorf("remove old data directory %s: %w", filepath.Join(dir, n), err))
		}
	}
	return errors.Join(errs...)
}
