package podsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podresources"
)

// LogDir is the resource handler of pods' container log directories,
// <podLogsDir>/<namespace>_<name>_<uid>. The logs stay until the pod is
// removed (no Release), so that a terminated pod's logs can be read.
func LogDir(podLogsDir string) podresources.Handler {
	return logDir{root: podLogsDir}
}

type logDir struct{ root string }

func (logDir) Name() string { return podresources.NameLogs }

func (h logDir) Prepare(_ context.Context, pod *v1.Pod) error {
	// The Set names the handler; the error names the path.
	return os.MkdirAll(podLogDir(h.root, pod), 0o755)
}

// Reconstruct has nothing to adopt: the directory is found by its name.
func (logDir) Reconstruct(context.Context, *v1.Pod) error { return nil }

// Cleanup removes the log directory of uid, found by the UID that ends its
// name (namespaces and pod names never contain '_'), so the pod's name is
// not needed.
func (h logDir) Cleanup(_ context.Context, uid types.UID) error {
	if err := checkUID(uid); err != nil {
		return err
	}
	entries, err := os.ReadDir(h.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", h.root, err)
	}
	for _, e := range entries {
		prefix, ok := strings.CutSuffix(e.Name(), "_"+string(uid))
		if !e.IsDir() || !ok || strings.Count(prefix, "_") != 1 {
			continue
		}
		if err := os.RemoveAll(filepath.Join(h.root, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ContainerFiles is the resource handler of the files heartlet mounts into
// a pod's containers: the termination message files
// (<rootDir>/pods/<uid>/containers) and the hosts file
// (<rootDir>/pods/<uid>/etc-hosts). They are written when a container
// starts (the hosts file follows the pod's IPs, each attempt has its own
// message file), so Prepare has nothing to do. Nil when rootDir is empty.
func ContainerFiles(rootDir string) podresources.Handler {
	if rootDir == "" {
		return nil
	}
	return containerFiles{root: rootDir}
}

type containerFiles struct{ root string }

func (containerFiles) Name() string { return podresources.NameContainerFiles }

// Prepare does nothing: the files are made for each container start.
func (containerFiles) Prepare(context.Context, *v1.Pod) error { return nil }

// Reconstruct has nothing to adopt: the runtime's mounts name the files.
func (containerFiles) Reconstruct(context.Context, *v1.Pod) error { return nil }

// Cleanup removes the container files and then the pod directory when
// nothing else is left in it.
func (h containerFiles) Cleanup(_ context.Context, uid types.UID) error {
	if err := checkUID(uid); err != nil {
		return err
	}
	podDir := filepath.Join(h.root, "pods", string(uid))
	if err := os.RemoveAll(filepath.Join(podDir, "containers")); err != nil {
		return fmt.Errorf("remove container files of pod %s: %w", uid, err)
	}
	if err := os.Remove(filepath.Join(podDir, hostsFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove hosts file of pod %s: %w", uid, err)
	}
	if entries, err := os.ReadDir(podDir); err == nil && len(entries) == 0 {
		if err := os.Remove(podDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove pod directory %s: %w", podDir, err)
		}
	}
	return nil
}

// checkUID refuses a UID that is not one path element, so that no path
// built from it leaves the directory it names.
func checkUID(uid types.UID) error {
	if u := string(uid); u == "" || u == "." || u == ".." || strings.ContainsRune(u, '/') {
		return fmt.Errorf("invalid pod UID %q", uid)
	}
	return nil
}
