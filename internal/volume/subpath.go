package volume

// subPath mounts.
//
// A container of the pod can change its volumes while heartlet works on
// them, so a subPath cannot be handed to the runtime as a path: between
// heartlet's check and the runtime's mount a directory along the path can
// become a symbolic link to anywhere on the host (CVE-2017-1002101,
// CVE-2021-25741). Instead heartlet opens the subPath itself, never
// following a link out of the volume, bind-mounts the opened descriptor
// (/proc/self/fd/<fd>, not the path) onto
//
//	<RootDir>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>
//
// (index: the volumeMount's position in the container's volumeMounts, as
// upstream) and gives the runtime that mount point, which no container can
// change.
//
// Resolution rule: the subPath is resolved below the volume's directory as
// openat2(2) does with RESOLVE_BENEATH. A symbolic link met on the way is
// followed when it is relative and everything it leads to stays inside the
// volume (".." in its target may climb, but never above the volume's
// directory): this keeps subPaths into configMap, secret, downwardAPI and
// projected volumes working, whose files are relative links into a
// timestamped data directory. An absolute link is refused, as is anything
// that leads out of the volume and chains of more than 40 links. This is
// stricter than upstream, which also follows absolute links whose host
// target lies inside the volume; inside the container such a link names
// another place anyway. Missing directories along the subPath, the last
// element included, are created with the mode of the volume's directory,
// its setgid, setuid and sticky bits included, as upstream's SafeMakeDir
// (so under fsGroup an emptyDir's 2777 gives 2777), owned by root and by
// the group the volume's directory gives them (its setgid bit: the
// fsGroup).
//
// Where the kernel has openat2, a subPath that exists is opened with one
// call; otherwise, and to create missing directories, the walk goes one
// element at a time with openat(O_PATH|O_NOFOLLOW) from descriptors it
// holds, reading each link it meets with readlinkat on the link's own
// descriptor and handling ".." by going back to the descriptor of the
// parent it came from, never by the kernel's "..". Every step starts from a
// descriptor inside the volume, so a rename or a swap of an element for a
// link by a container changes what is found, never where the walk may go.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

const (
	// subPathsDirName is the directory below a pod's directory that holds
	// the subPath bind mounts, as upstream.
	subPathsDirName = "volume-subpaths"
	// maxSymlinks is how many links one resolution follows (the kernel's
	// limit).
	maxSymlinks = 40
	// maxRaces is how often the walk starts an element again because it
	// changed between two system calls.
	maxRaces = 64
	// subPathTargetDirMode and subPathTargetFileMode are the modes of the
	// mount targets heartlet creates, as upstream.
	subPathTargetDirMode  = 0o750
	subPathTargetFileMode = 0o640
)

// errOpenat2Unavailable reports that openat2 cannot be used here (an old
// kernel, or a seccomp filter that refuses it).
var errOpenat2Unavailable = errors.New("openat2 unavailable")

// errChanged reports that an element changed between two system calls;
// the walk looks at it again.
var errChanged = errors.New("changed while being resolved")

// openSubPath opens sub below the directory base and returns an O_PATH
// descriptor of what it names, creating missing directories with mode perm
// (see the resolution rule above). base itself is trusted: a volume
// directory of heartlet's or a hostPath the pod names; sub must have
// passed validateSubPath. The caller closes the descriptor.
func openSubPath(base, sub string, perm os.FileMode) (int, error) {
	root, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open volume path %s: %w", base, err)
	}
	defer unix.Close(root)
	fd, err := openBeneath(root, sub)
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, errOpenat2Unavailable), errors.Is(err, unix.EAGAIN):
		// Something to create, no openat2, or a rename raced the kernel's
		// walk: walk step by step.
	default:
		return -1, subPathError(base, sub, err)
	}
	fd, err = walkBeneath(root, sub, perm)
	if err != nil {
		return -1, subPathError(base, sub, err)
	}
	return fd, nil
}

// subPathError words a resolution failure; leaving the volume and link
// loops are ErrInvalidSubPath.
func subPathError(base, sub string, err error) error {
	switch {
	case errors.Is(err, ErrInvalidSubPath):
		return fmt.Errorf("subPath %q in volume path %s: %w", sub, base, err)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: subPath %q leads out of volume path %s", ErrInvalidSubPath, sub, base)
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: subPath %q in volume path %s: too many levels of symbolic links", ErrInvalidSubPath, sub, base)
	}
	return fmt.Errorf("open subPath %q in volume path %s: %w", sub, base, err)
}

// openBeneath opens sub below the directory root with openat2 and
// RESOLVE_BENEATH: the kernel refuses, atomically, any resolution that
// leaves root (EXDEV), absolute links included.
func openBeneath(root int, sub string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(root, sub, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.E2BIG), errors.Is(err, unix.EINVAL):
			return -1, fmt.Errorf("%w: %w", errOpenat2Unavailable, err)
		}
		return -1, fmt.Errorf("openat2: %w", err)
	}
}

// walkBeneath resolves sub below the directory root one element at a time
// with the rule openBeneath's kernel applies, creating missing directories
// with mode perm. It returns an O_PATH descriptor, or an O_RDONLY one for
// a directory it created.
func walkBeneath(root int, sub string, perm os.FileMode) (int, error) {
	first, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open volume directory: %w", err)
	}
	// stack holds the descriptors of the directories from root to the
	// current element; ".." pops.
	stack := []int{first}
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(sub, "/")
	links, races := 0, 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		cur := stack[len(stack)-1]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) == 1 {
				return -1, fmt.Errorf("%w: a symbolic link climbs above the volume", ErrInvalidSubPath)
			}
			unix.Close(cur)
			stack = stack[:len(stack)-1]
			continue
		}
		fd, err := unix.Openat(cur, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			fd, err = mkdirBeneath(cur, name, perm)
		}
		if errors.Is(err, errChanged) {
			if races++; races > maxRaces {
				return -1, fmt.Errorf("element %q: %w", name, err)
			}
			todo = append([]string{name}, todo...)
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("open element %q: %w", name, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("stat element %q: %w", name, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			// Read the link that was opened, not whatever the name
			// holds now.
			target, err := readlinkFd(fd)
			unix.Close(fd)
			if err != nil {
				return -1, fmt.Errorf("read symbolic link %q: %w", name, err)
			}
			if links++; links > maxSymlinks {
				return -1, fmt.Errorf("%w: too many levels of symbolic links", ErrInvalidSubPath)
			}
			if filepath.IsAbs(target) {
				return -1, fmt.Errorf("%w: symbolic link %q is absolute (%s)", ErrInvalidSubPath, name, target)
			}
			todo = append(strings.Split(target, "/"), todo...)
		case unix.S_IFDIR:
			stack = append(stack, fd)
		default:
			if len(todo) > 0 {
				unix.Close(fd)
				return -1, fmt.Errorf("element %q: %w", name, unix.ENOTDIR)
			}
			stack = append(stack, fd)
		}
	}
	// The last descriptor is the result (the volume's directory itself
	// when sub names it).
	fd := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	return fd, nil
}

// mkdirBeneath creates the directory name in the directory parent with
// mode perm (umask aside) and opens it without following a link. It
// returns errChanged when name appeared, or was swapped for something
// else, between the calls.
func mkdirBeneath(parent int, name string, perm os.FileMode) (int, error) {
	err := unix.Mkdirat(parent, name, kernelMode(perm))
	if errors.Is(err, unix.EEXIST) {
		return -1, errChanged
	}
	if err != nil {
		return -1, fmt.Errorf("create directory %q: %w", name, err)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) {
		return -1, errChanged
	}
	if err != nil {
		return -1, fmt.Errorf("open created directory %q: %w", name, err)
	}
	// mkdirat applied the umask; the descriptor is the directory made
	// above (or one swapped in, which is inside the volume as well).
	if err := unix.Fchmod(fd, kernelMode(perm)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("set mode of created directory %q: %w", name, err)
	}
	return fd, nil
}

// subPathDirMode is the mode missing subPath directories are created
// with: that of the volume's directory, special bits included.
func subPathDirMode(base string) (os.FileMode, error) {
	bi, err := os.Stat(base)
	if err != nil {
		return 0, fmt.Errorf("check volume path %s: %w", base, err)
	}
	return bi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky), nil
}

// kernelMode is perm as chmod(2) takes it: the permission bits and the
// setuid, setgid and sticky bits.
func kernelMode(perm os.FileMode) uint32 {
	m := uint32(perm.Perm())
	if perm&os.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if perm&os.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if perm&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}

// readlinkFd reads the target of the symbolic link fd was opened on (with
// O_PATH|O_NOFOLLOW).
func readlinkFd(fd int) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// subPathTarget is where the subPath of container's index-th volumeMount
// of volume is bind-mounted.
func (m *Manager) subPathTarget(pod *v1.Pod, volume, container string, index int) (string, error) {
	for _, n := range []string{volume, container} {
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") {
			return "", fmt.Errorf("%w: name %q cannot name a directory", ErrInvalidSubPath, n)
		}
	}
	return filepath.Join(m.PodDir(pod.UID), subPathsDirName, volume, container, strconv.Itoa(index)), nil
}

// bindSubPath opens sub in the volume directory base and makes it
// appear at target by a bind mount of the opened descriptor; it returns
// the path the runtime should mount (target, its links resolved). When
// target already holds a mount of the same file it is kept, so that the
// restarts of a container do not stack mounts; a mount of anything else
// (the subPath was replaced since), or more than one, is unmounted first.
func (m *Manager) bindSubPath(ctx context.Context, base, sub, target string) (string, error) {
	perm, err := subPathDirMode(base)
	if err != nil {
		return "", err
	}
	fd, err := openSubPath(base, sub, perm)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return "", fmt.Errorf("stat subPath %q: %w", sub, err)
	}
	isDir := src.Mode&unix.S_IFMT == unix.S_IFDIR

	if err := os.MkdirAll(filepath.Dir(target), subPathTargetDirMode); err != nil {
		return "", fmt.Errorf("create subPath mount directory: %w", err)
	}
	realDir, err := filepath.EvalSymlinks(filepath.Dir(target))
	if err != nil {
		return "", fmt.Errorf("resolve subPath mount directory: %w", err)
	}
	target = filepath.Join(realDir, filepath.Base(target))
	logger := klog.FromContext(ctx)

	n, err := m.mountCount(target)
	if err != nil {
		return "", err
	}
	if n == 1 {
		var st unix.Stat_t
		if err := unix.Lstat(target, &st); err == nil && st.Dev == src.Dev && st.Ino == src.Ino {
			logger.V(4).Info("SubPath already mounted", "subPath", sub, "target", target)
			return target, nil
		}
	}
	for ; n > 0; n-- {
		logger.V(3).Info("Unmounting stale subPath mount", "subPath", sub, "target", target)
		if err := m.mounter.Unmount(target); err != nil {
			return "", fmt.Errorf("unmount stale subPath mount: %w", err)
		}
	}
	if n, err := m.mountCount(target); err != nil {
		return "", err
	} else if n > 0 {
		return "", fmt.Errorf("subPath mount %s still mounted after unmounting", target)
	}
	if err := makeMountTarget(target, isDir); err != nil {
		return "", err
	}
	source := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := m.mounter.BindMount(source, target); err != nil {
		return "", fmt.Errorf("bind-mount subPath %q: %w", sub, err)
	}
	logger.V(3).Info("Mounted subPath", "subPath", sub, "target", target)
	return target, nil
}

// makeMountTarget makes target an empty directory or an empty file, as
// the mounted subPath is a directory or not. A target of the other type,
// left by an earlier mount, is removed (never recursively: it is not a
// mount point, so it is one of heartlet's empty files or directories).
func makeMountTarget(target string, dir bool) error {
	fi, err := os.Lstat(target)
	switch {
	case err == nil && fi.IsDir() == dir && (dir || fi.Mode().IsRegular()):
		return nil
	case err == nil:
		if err := os.Remove(target); err != nil {
			return fmt.Errorf("replace subPath mount target: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("check subPath mount target: %w", err)
	}
	if dir {
		if err := os.Mkdir(target, subPathTargetDirMode); err != nil {
			return fmt.Errorf("create subPath mount target: %w", err)
		}
		return nil
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, subPathTargetFileMode)
	if err != nil {
		return fmt.Errorf("create subPath mount target: %w", err)
	}
	return f.Close()
}

// mountCount tells how many mounts the table has at path (clean and with
// its links resolved).
func (m *Manager) mountCount(path string) (int, error) {
	mps, err := m.mounter.List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, mp := range mps {
		if mp.Path == path {
			n++
		}
	}
	return n, nil
}

// cleanSubPaths unmounts every subPath mount of the pod and removes
// <podDir>/volume-subpaths. Nothing is removed while anything below it is
// still mounted, and removal is one entry at a time, never recursive: a
// mount the table did not show makes it fail (EBUSY, ENOTEMPTY) instead of
// deleting a volume's content through it.
func (m *Manager) cleanSubPaths(ctx context.Context, podDir string) error {
	dir := filepath.Join(podDir, subPathsDirName)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("check subPath mounts %s: %w", dir, err)
	}
	if err := m.unmountBelow(ctx, dir); err != nil {
		return err
	}
	if err := removeSubPathTree(dir, 0); err != nil {
		return fmt.Errorf("remove subPath mounts %s: %w", dir, err)
	}
	return nil
}

// removeSubPathTree removes dir, which is volume-subpaths (depth 0), a
// volume's (1) or a container's (2) directory: entries one by one, the
// mount targets of depth 3 with a single unlink or rmdir.
func removeSubPathTree(dir string, depth int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if depth < 2 && e.IsDir() {
			if err := removeSubPathTree(p, depth+1); err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}
