// Package logrotate rotates the log files of running containers, as
// upstream's container log manager (pkg/kubelet/logs): when the current
// log of a container exceeds MaxSize it is renamed to <log>.<timestamp>
// and the runtime is asked to reopen the log; older rotated files are
// gzip-compressed and the oldest removed so that at most MaxFiles files,
// the current one included, remain.
package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/runtime"
)

const (
	// timestampFormat names rotated files, as upstream.
	timestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Runtime is what the manager needs from the container runtime.
type Runtime interface {
	ListPods(ctx context.Context) ([]*runtime.PodStatus, error)
	GetPodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)
	ReopenContainerLog(ctx context.Context, id string) error
}

// Options configure a Manager.
type Options struct {
	MaxSize    int64         // containerLogMaxSize in bytes; <= 0 disables rotation
	MaxFiles   int           // containerLogMaxFiles, at least 2
	MaxWorkers int           // containerLogMaxWorkers, at least 1
	Interval   time.Duration // containerLogMonitorInterval
	Clock      clock.WithTicker
}

// Manager rotates container logs every Interval.
type Manager struct {
	rt   Runtime
	opts Options
}

// New returns a Manager; zero options take upstream's defaults.
func New(rt Runtime, opts Options) *Manager {
	if opts.MaxFiles < 2 {
		opts.MaxFiles = 2
	}
	if opts.MaxWorkers < 1 {
		opts.MaxWorkers = 1
	}
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{rt: rt, opts: opts}
}

// Run rotates logs every Interval until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	if m.opts.MaxSize <= 0 {
		return nil
	}
	t := m.opts.Clock.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := m.RotateAll(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Container log rotation failed")
			}
		}
	}
}

type target struct {
	pod       *runtime.PodStatus
	container *runtime.ContainerStatus
}

// RotateAll makes one pass over the running containers, up to MaxWorkers
// at a time. Errors of single containers are logged, not returned; the
// error is that of listing the containers.
func (m *Manager) RotateAll(ctx context.Context) error {
	targets, err := m.running(ctx)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(m.opts.MaxWorkers)
	for _, t := range targets {
		g.Go(func() error {
			logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(t.pod.Namespace, t.pod.Name), "podUID", t.pod.UID, "container", t.container.Name)
			if err := m.rotate(ctx, t.container.ID, t.container.LogPath); err != nil {
				logger.Error(err, "Failed to rotate container log", "path", t.container.LogPath)
			}
			return nil
		})
	}
	return g.Wait()
}

// running lists the running containers with a log path: ListPods is cheap
// but carries no log paths, so the status of pods with a running container
// is read in full.
func (m *Manager) running(ctx context.Context) ([]target, error) {
	pods, err := m.rt.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []target
	for _, p := range pods {
		if !hasRunning(p) {
			continue
		}
		st, err := m.rt.GetPodStatus(ctx, p.UID)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Failed to read pod status for log rotation", "pod", klog.KRef(p.Namespace, p.Name), "podUID", p.UID)
			continue
		}
		for _, c := range st.Containers {
			if c.State == runtime.ContainerRunning && c.LogPath != "" {
				out = append(out, target{pod: st, container: c})
			}
		}
	}
	return out, nil
}

func hasRunning(p *runtime.PodStatus) bool {
	for _, c := range p.Containers {
		if c.State == runtime.ContainerRunning {
			return true
		}
	}
	return false
}

// rotate rotates the log of one container if it is over MaxSize.
func (m *Manager) rotate(ctx context.Context, id, log string) error {
	fi, err := os.Stat(log)
	if errors.Is(err, fs.ErrNotExist) {
		// The current log is gone (removed by hand, or a reopen that
		// failed after the rename): ask the runtime for a new one, as
		// upstream does.
		if err := m.rt.ReopenContainerLog(ctx, id); err != nil {
			return fmt.Errorf("reopen missing log %s: %w", log, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	if fi.Size() <= m.opts.MaxSize {
		return nil
	}
	rotated, err := filepath.Glob(globEscape(log) + ".*")
	if err != nil {
		return fmt.Errorf("list rotated logs of %s: %w", log, err)
	}
	rotated, err = cleanup(rotated)
	if err != nil {
		return err
	}
	rotated, err = m.removeExcess(rotated)
	if err != nil {
		return err
	}
	// Compress all but the newest rotated file, which a reader following
	// the log may still have open (upstream keeps it plain too).
	for i := 0; i+1 < len(rotated); i++ {
		if !strings.HasSuffix(rotated[i], compressSuffix) {
			if err := compress(rotated[i]); err != nil {
				return err
			}
		}
	}
	return m.rotateLatest(ctx, id, log)
}

// cleanup removes leftovers of interrupted compressions: temporary files,
// and plain files whose compressed version exists. It returns the
// remaining rotated files.
func cleanup(logs []string) ([]string, error) {
	set := map[string]bool{}
	for _, l := range logs {
		set[l] = true
	}
	var out []string
	for _, l := range logs {
		if strings.HasSuffix(l, tmpSuffix) || set[l+compressSuffix] {
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove unused log: %w", err)
			}
			continue
		}
		out = append(out, l)
	}
	return out, nil
}

// removeExcess removes the oldest rotated files so that, with the current
// log about to be rotated and the new current one, at most MaxFiles files
// remain: MaxFiles-2 rotated ones are kept.
func (m *Manager) removeExcess(logs []string) ([]string, error) {
	sort.Strings(logs) // timestamps sort oldest first
	keep := max(m.opts.MaxFiles-2, 0)
	i := 0
	for ; i < len(logs)-keep; i++ {
		if err := os.Remove(logs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("remove old log: %w", err)
		}
	}
	return logs[i:], nil
}

// compress gzips log into log.gz through a temporary file and removes log.
func compress(log string) (err error) {
	in, err := os.Open(log)
	if err != nil {
		return fmt.Errorf("open log to compress: %w", err)
	}
	defer in.Close()
	tmp := log + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create compressed log: %w", err)
	}
	defer func() {
		out.Close()
		if err != nil {
			os.Remove(tmp)
		}
	}()
	w := gzip.NewWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", log, err)
	}
	if err := os.Rename(tmp, log+compressSuffix); err != nil {
		return fmt.Errorf("rename compressed log: %w", err)
	}
	if err := os.Remove(log); err != nil {
		return fmt.Errorf("remove compressed original: %w", err)
	}
	return nil
}

// rotateLatest renames the current log and asks the runtime to reopen it;
// when the reopen fails the file is renamed back so the next pass tries
// again.
func (m *Manager) rotateLatest(ctx context.Context, id, log string) error {
	rotated := log + "." + m.opts.Clock.Now().Format(timestampFormat)
	if err := os.Rename(log, rotated); err != nil {
		return fmt.Errorf("rotate log %s: %w", log, err)
	}
	if err := m.rt.ReopenContainerLog(ctx, id); err != nil {
		if rerr := os.Rename(rotated, log); rerr != nil {
			klog.FromContext(ctx).Error(rerr, "Failed to rename rotated log back", "path", rotated)
		}
		return fmt.Errorf("reopen log %s: %w", log, err)
	}
	return nil
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(p)
}
