package podsync

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/volume"
)

// Termination message limits, as upstream (pkg/kubelet/container).
const (
	// maxTerminationMessageBytes is how much of a termination message
	// file is read: its last 4 KiB.
	maxTerminationMessageBytes = 4 << 10
	// maxPodTerminationMessageBytes is shared evenly by the termination
	// messages of all the pod's containers (init and app).
	maxPodTerminationMessageBytes = 12 << 10
	// maxTerminationLogBytes and maxTerminationLogLines bound the message
	// taken from the container log under FallbackToLogsOnError: the last
	// 2 KiB of its last 80 lines.
	maxTerminationLogBytes = 2 << 10
	maxTerminationLogLines = 80
)

// reasonContainerCannotRun is the runtime reason of a container that could
// not even start, so it has no log to fall back to (upstream's check).
const reasonContainerCannotRun = "ContainerCannotRun"

// podContainerDir is the directory of one container's files on the node,
// as upstream: <root>/pods/<uid>/containers/<name>.
func podContainerDir(root string, uid types.UID, name string) string {
	return filepath.Join(root, "pods", string(uid), "containers", name)
}

// terminationMessageMount creates the file that backs the container's
// terminationMessagePath for one attempt, named at random in the
// container's directory so attempts never share one, and returns its bind
// mount. It returns nil when the container has no path or heartlet has no
// root directory; a file that cannot be created is logged and the
// container runs without it, as upstream.
func (s *Syncer) terminationMessageMount(ctx context.Context, pod *v1.Pod, c *v1.Container) *runtimeapi.Mount {
	if s.opts.RootDir == "" || c.TerminationMessagePath == "" {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("container", c.Name)
	// The directories up to the root directory keep other local users
	// out: the file itself is writable by any user of the container.
	dir, err := volume.MakePodDir(s.opts.RootDir, pod.UID, "containers", c.Name)
	if err != nil {
		logger.Error(err, "Failed to create the container directory for the termination message", "path", podContainerDir(s.opts.RootDir, pod.UID, c.Name))
		return nil
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	file := filepath.Join(dir, hex.EncodeToString(id[:]))
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		logger.Error(err, "Failed to create the termination message file", "path", file)
		return nil
	}
	f.Close()
	// The mode must not depend on the umask: any user of the container
	// may write its message.
	if err := os.Chmod(file, 0o666); err != nil {
		logger.Error(err, "Failed to set the termination message file mode", "path", file)
	}
	return &runtimeapi.Mount{HostPath: file, ContainerPath: absContainerPath(c.TerminationMessagePath)}
}

func absContainerPath(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join("/", p)
}

// fillTerminationMessages completes the runtime message of every exited
// container of rs with its termination message (file, or log tail under
// FallbackToLogsOnError), and cuts each to its share of the pod's limit.
// Messages read from files are kept per container, so they survive the
// removal of the pod's directory; the entries of containers the runtime no
// longer has are dropped. Messages from logs are read again every time:
// the log lives as long as the container, and may still be completed by
// the runtime just after the exit.
func (s *Syncer) fillTerminationMessages(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus) {
	perContainer := maxPodTerminationMessageBytes
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
		perContainer /= n
	}
	s.lc.mu.Lock()
	defer s.lc.mu.Unlock()
	known := s.lc.messages[string(pod.UID)]
	next := map[string]string{}
	for _, rec := range rs.Containers {
		if rec.State != runtime.ContainerExited {
			continue
		}
		msg, ok := known[rec.ID]
		if !ok {
			tmsg, fromLog := s.terminationMessage(ctx, pod, rec)
			msg = combineMessages(rec.Message, tmsg)
			if !fromLog {
				next[rec.ID] = msg
			}
		} else {
			next[rec.ID] = msg
		}
		if len(msg) > perContainer {
			msg = msg[:perContainer]
		}
		rec.Message = msg
	}
	if len(next) == 0 {
		delete(s.lc.messages, string(pod.UID))
		return
	}
	s.lc.messages[string(pod.UID)] = next
}

// forgetTerminationMessages drops what is kept for a removed pod.
func (s *Syncer) forgetTerminationMessages(uid types.UID) {
	s.lc.mu.Lock()
	defer s.lc.mu.Unlock()
	delete(s.lc.messages, string(uid))
}

// combineMessages appends the container's own message to the runtime's.
func combineMessages(runtimeMsg, termMsg string) string {
	switch {
	case termMsg == "":
		return runtimeMsg
	case runtimeMsg == "":
		return termMsg
	}
	return runtimeMsg + ": " + termMsg
}

// terminationMessage reads the message an exited container of pod left:
// the file heartlet created for that attempt (found through the
// container's mounts, which the runtime keeps, so this works after a
// restart of heartlet too), else, under FallbackToLogsOnError for a failed
// container, the tail of its log.
func (s *Syncer) terminationMessage(ctx context.Context, pod *v1.Pod, rec *runtime.ContainerStatus) (msg string, fromLog bool) {
	info, _ := runtime.ParseContainerAnnotations(rec.Annotations)
	fallback := info.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError &&
		rec.ExitCode != 0 && rec.Reason != reasonContainerCannotRun
	msg, checkLogs := readTerminationFile(s.opts.RootDir, pod.UID, rec.Name, rec.Mounts, info.TerminationMessagePath, fallback)
	if !checkLogs {
		return msg, false
	}
	tail, err := tailCRILog(rec.LogPath, maxTerminationLogLines, maxTerminationLogBytes)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Failed to read the termination message from the container log", "container", rec.Name, "path", rec.LogPath, "err", err)
		return fmt.Sprintf("Error on reading termination message from logs: %v", err), true
	}
	return tail, true
}

// terminationFileName matches the name terminationMessageMount gives a
// file: 8 hexadecimal digits.
var terminationFileName = regexp.MustCompile(`^[0-9a-f]{8}$`)

// terminationFile returns, relative to root, the file heartlet created for
// the container's attempt and mounted at containerPath: the last mount at
// that path whose host path is <root>/pods/<uid>/containers/<name>/<8 hex
// digits>. Any other mount at the path is not the message.
//
// A container may also mount a volume at its terminationMessagePath (or a
// file of a volume there through subPath). Upstream reads whichever mount
// at the path the runtime lists first, which is the volume's: its host
// path is inside a volume the pod's containers can write, where a file can
// be swapped for a symbolic link to any file of the node that the kubelet
// then reads into the status. heartlet never reads such a mount. Its own
// file is mounted after the volumes, so in the container it lies on top of
// the volume at that path and receives what the container writes there;
// that file alone is the message. Without a root directory there is no
// such file and no message (but the log under FallbackToLogsOnError).
func terminationFile(root string, uid types.UID, name string, mounts []runtime.Mount, containerPath string) (rel []string, ok bool) {
	if root == "" {
		return nil, false
	}
	dir := podContainerDir(root, uid, name)
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if m.ContainerPath != containerPath {
			continue
		}
		if filepath.Dir(m.HostPath) != dir || !terminationFileName.MatchString(filepath.Base(m.HostPath)) {
			continue
		}
		rel = []string{"pods", string(uid), "containers", name, filepath.Base(m.HostPath)}
		for _, e := range rel {
			if e == "" || e == "." || e == ".." || strings.ContainsRune(e, '/') {
				return nil, false
			}
		}
		return rel, true
	}
	return nil, false
}

// readTerminationFile reads the last maxTerminationMessageBytes of the
// file heartlet created for the container (see terminationFile). checkLogs
// tells the caller to use the log instead: fallback is set and there is no
// file or it is empty.
func readTerminationFile(root string, uid types.UID, name string, mounts []runtime.Mount, containerPath string, fallback bool) (msg string, checkLogs bool) {
	if containerPath == "" {
		return "", fallback
	}
	rel, ok := terminationFile(root, uid, name, mounts, absContainerPath(containerPath))
	if !ok {
		return "", fallback
	}
	data, err := readTail(root, rel, maxTerminationMessageBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fallback
	}
	if err != nil {
		return fmt.Sprintf("Error on reading termination log %s: %v", filepath.Join(append([]string{root}, rel...)...), err), false
	}
	return string(data), fallback && len(data) == 0
}

// errNotRegular is returned by readTail for anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// readTail returns at most max bytes from the end of the regular file
// root/rel[0]/rel[1]/..., opened one component at a time below root
// without following a symbolic link (ELOOP for one, ENOTDIR for a
// non-directory in a directory's place), without blocking (a FIFO) and
// without becoming the controlling terminal. root itself may be a link.
func readTail(root string, rel []string, max int64) ([]byte, error) {
	f, err := openBelow(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", errNotRegular, fi.Mode().Type())
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	return io.ReadAll(io.NewSectionReader(f, off, max))
}

// openBelow opens root/rel... for reading, each component of rel with
// O_NOFOLLOW.
func openBelow(root string, rel []string) (*os.File, error) {
	if len(rel) == 0 {
		return nil, errors.New("open below root: empty path")
	}
	dfd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	cur := root
	for i, e := range rel {
		cur = filepath.Join(cur, e)
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(rel)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK | unix.O_NOCTTY
		}
		fd, err := unix.Openat(dfd, e, flags, 0)
		_ = unix.Close(dfd)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: cur, Err: err}
		}
		dfd = fd
	}
	return os.NewFile(uintptr(dfd), cur), nil
}

// tailCRILog returns the content of the last lines lines of a CRI log file
// (both streams, partial lines joined), cut to its last maxBytes bytes.
func tailCRILog(name string, lines int, maxBytes int) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := lastLines(f, lines)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		content, full, ok := parseCRILogLine(line)
		if !ok {
			continue
		}
		out.Write(content)
		if full {
			out.WriteByte('\n')
		}
	}
	b := out.Bytes()
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return string(b), nil
}

// lastLines reads the file backwards in blocks until it holds n complete
// lines, and returns them.
func lastLines(f *os.File, n int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const block = 8 << 10
	size := fi.Size()
	var buf []byte
	for off := size; off > 0; {
		step := int64(block)
		if off < step {
			step = off
		}
		off -= step
		chunk := make([]byte, step)
		if _, err := f.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		buf = append(chunk, buf...)
		// n lines need n newlines besides the one ending the file.
		if bytes.Count(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\n'}) >= n {
			break
		}
	}
	trimmed := bytes.TrimSuffix(buf, []byte{'\n'})
	if i := nthNewlineFromEnd(trimmed, n); i >= 0 {
		return trimmed[i+1:], nil
	}
	return trimmed, nil
}

// nthNewlineFromEnd returns the index of the n-th newline counted from the
// end of b, or -1.
func nthNewlineFromEnd(b []byte, n int) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// parseCRILogLine splits one CRI log line, "<time> <stream> <tag> <content>",
// where tag is F for a full line and P for a part of a longer one.
func parseCRILogLine(line []byte) (content []byte, full, ok bool) {
	fields := bytes.SplitN(line, []byte{' '}, 4)
	if len(fields) < 3 {
		return nil, false, false
	}
	if s := string(fields[1]); s != "stdout" && s != "stderr" {
		return nil, false, false
	}
	tags := bytes.Split(fields[2], []byte{':'})
	full = len(tags) == 0 || string(tags[0]) != "P"
	if len(fields) == 4 {
		content = fields[3]
	}
	return content, full, true
}
