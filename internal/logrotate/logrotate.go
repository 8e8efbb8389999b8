// Package logrotate rotates the log files of running containers, as
// upstream's container log manager (pkg/kubelet/logs): when the current
// log of a container exceeds MaxSize it is renamed to <log>.<timestamp>
// and the runtime is asked to reopen the log; older rotated files are
// gzip-compressed and the oldest removed so that at most MaxFiles files,
// the current one included, remain.
//
// Unlike upstream, logs are not only looked at once every monitor
// interval: between two passes each running container's log is checked
// again when, at the rate it grew since the last check, it would be half
// way to MaxSize (at most every CheckPeriod, at least every second, and
// at most twice as long as the last wait), so a container writing fast is
// rotated close to MaxSize rather than one interval's worth of output
// later.
//
// A rotation that fails is retried with an exponential back-off per
// container, CheckPeriod doubling up to Interval, and each failure is
// logged once, so a log that cannot be rotated costs neither a retry nor
// an error line every CheckPeriod.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
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
	// CheckPeriod is the shortest time between two checks of one log
	// between passes (default 25ms).
	CheckPeriod time.Duration
	Clock       clock.WithTicker
}

// maxCheckWait is the longest time between two checks of a running
// container's log between passes, so that one that starts writing fast
// after being quiet is noticed within a second.
const maxCheckWait = time.Second

// maxCheckSlack bounds how early a log is checked along with another that
// is due: by a quarter of its wait, at most maxCheckSlack. Logs checked
// every second then share the loop's wake-ups (about ten a second however
// many there are) instead of waking it once each.
const maxCheckSlack = 100 * time.Millisecond

// slack is how early a log waiting wait may be checked.
func slack(wait time.Duration) time.Duration { return min(wait/4, maxCheckSlack) }

// Manager rotates container logs every Interval, and between passes
// those that grow fast (see the package documentation).
type Manager struct {
	rt   Runtime
	opts Options

	mu    sync.Mutex
	watch map[string]*watched // by container ID: the running containers of the last pass and those started since

	// Containers started since the loop last looked: kept apart so that
	// telling of one never waits for a rotation.
	startedMu sync.Mutex
	started   []*watched
	wake      chan struct{} // a container was started: recompute the next check
}

// watched is the log of a running container between passes: its size
// when it was last checked, and when to check it next.
type watched struct {
	target
	size int64
	at   time.Time
	next time.Time
	wait time.Duration // between the last check and the next
	// retry is the back-off after a failed rotation, 0 after a
	// successful one.
	retry time.Duration
}

// failed advances the rotation back-off of w after a failed rotation at
// now: CheckPeriod, doubling up to Interval.
func (m *Manager) failed(w *watched, now time.Time) {
	if w.retry <= 0 {
		w.retry = m.opts.CheckPeriod
	} else {
		w.retry = min(2*w.retry, max(m.opts.Interval, m.opts.CheckPeriod))
	}
	w.next = now.Add(w.retry)
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
	if opts.CheckPeriod <= 0 {
		opts.CheckPeriod = 25 * time.Millisecond
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{rt: rt, opts: opts, watch: map[string]*watched{}, wake: make(chan struct{}, 1)}
}

// ContainerStarted watches the log of a container just started, so that
// it is checked from CheckPeriod on rather than from the next pass.
func (m *Manager) ContainerStarted(pod *v1.Pod, container, id, logPath string) {
	if m.opts.MaxSize <= 0 {
		return
	}
	now := m.opts.Clock.Now()
	t := target{
		pod:       &runtime.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace},
		container: &runtime.ContainerStatus{ID: id, Name: container, State: runtime.ContainerRunning, LogPath: logPath},
	}
	m.startedMu.Lock()
	m.started = append(m.started, &watched{target: t, at: now, wait: m.opts.CheckPeriod, next: now.Add(m.opts.CheckPeriod)})
	m.startedMu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run rotates logs every Interval, and fast-growing ones in between,
// until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	if m.opts.MaxSize <= 0 {
		return nil
	}
	t := m.opts.Clock.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		check := m.opts.Clock.NewTimer(m.untilNextCheck())
		select {
		case <-ctx.Done():
			check.Stop()
			return nil
		case <-t.C():
			check.Stop()
			if err := m.RotateAll(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Container log rotation failed")
			}
		case <-check.C():
			m.CheckGrowth(ctx)
		case <-m.wake:
			check.Stop()
		}
	}
}

// untilNextCheck is the time until the earliest check of a watched log,
// or Interval when there is none.
func (m *Manager) untilNextCheck() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchStarted()
	wait := m.opts.Interval
	now := m.opts.Clock.Now()
	for _, w := range m.watch {
		wait = min(wait, w.next.Sub(now))
	}
	return max(wait, 0)
}

// CheckGrowth checks the watched logs that are due, or nearly (see
// maxCheckSlack): one over MaxSize is rotated, the others are given their
// next check by their growth rate.
func (m *Manager) CheckGrowth(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchStarted()
	for _, w := range m.watch {
		now := m.opts.Clock.Now()
		if now.Before(w.next.Add(-slack(w.wait))) {
			continue
		}
		fi, err := os.Stat(w.log())
		if err != nil {
			// Gone or unreadable: the next pass deals with it.
			w.next = now.Add(maxCheckWait)
			continue
		}
		size := fi.Size()
		if size > m.opts.MaxSize {
			err := m.rotate(ctx, w.container.ID, w.log())
			done := m.opts.Clock.Now()
			if err != nil {
				m.failed(w, done)
				w.logger(ctx).Error(err, "Failed to rotate container log", "path", w.log(), "retryIn", w.retry)
				continue
			}
			// The new log starts when the rotation is done.
			w.size, w.at, w.wait, w.next, w.retry = 0, done, m.opts.CheckPeriod, done.Add(m.opts.CheckPeriod), 0
			continue
		}
		prev := w.size
		if size < prev {
			prev = 0 // rotated by a pass since the last check
		}
		// Check again when, at the rate the log grew, it would be half
		// way to MaxSize, or after maxCheckWait if it did not grow; but
		// wait at most twice as long as last time, since writers are
		// bursty and a rate seen over a short time can be far too low.
		wait := maxCheckWait
		if elapsed := now.Sub(w.at); size > prev && elapsed > 0 {
			rate := float64(size-prev) / elapsed.Seconds() // bytes a second
			wait = min(wait, time.Duration(float64(m.opts.MaxSize-size)/rate/2*float64(time.Second)))
		}
		wait = max(min(wait, 2*w.wait), m.opts.CheckPeriod)
		w.wait = wait
		w.size, w.at, w.next = size, now, now.Add(wait)
	}
}

// watchStarted adds the containers started since the last call to the
// watched logs. m.mu is held.
func (m *Manager) watchStarted() {
	m.startedMu.Lock()
	started := m.started
	m.started = nil
	m.startedMu.Unlock()
	for _, w := range started {
		m.watch[w.container.ID] = w
	}
}

// watchTargets makes targets the watched logs, keeping what is known of
// those watched already; each is checked next after CheckPeriod, or, when
// its rotation in this pass failed (failed holds its ID), after its next
// back-off.
func (m *Manager) watchTargets(targets []target, failed map[string]bool) {
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	watch := make(map[string]*watched, len(targets))
	for _, t := range targets {
		w, ok := m.watch[t.container.ID]
		if !ok {
			w = &watched{target: t, at: now, wait: m.opts.CheckPeriod}
			if fi, err := os.Stat(t.container.LogPath); err == nil {
				w.size = fi.Size()
			}
		}
		w.target = t
		if failed[t.container.ID] {
			m.failed(w, now)
		} else {
			w.retry = 0
			w.next = now.Add(m.opts.CheckPeriod)
		}
		watch[t.container.ID] = w
	}
	m.watch = watch
}

type target struct {
	pod       *runtime.PodStatus
	container *runtime.ContainerStatus
}

func (t target) log() string { return t.container.LogPath }

func (t target) logger(ctx context.Context) klog.Logger {
	return klog.FromContext(ctx).WithValues("pod", klog.KRef(t.pod.Namespace, t.pod.Name), "podUID", t.pod.UID, "container", t.container.Name)
}

// RotateAll makes one pass over the running containers, up to MaxWorkers
// at a time, and watches their logs until the next pass. Errors of single
// containers are logged, not returned; the error is that of listing the
// containers.
func (m *Manager) RotateAll(ctx context.Context) error {
	targets, err := m.running(ctx)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(m.opts.MaxWorkers)
	var mu sync.Mutex
	failed := map[string]bool{}
	for _, t := range targets {
		g.Go(func() error {
			if err := m.rotate(ctx, t.container.ID, t.log()); err != nil {
				t.logger(ctx).Error(err, "Failed to rotate container log", "path", t.log())
				mu.Lock()
				failed[t.container.ID] = true
				mu.Unlock()
			}
			return nil
		})
	}
	err = g.Wait()
	m.watchTargets(targets, failed)
	return err
}

// running lists the running containers with a log path. ListPods is cheap
// but carries no log paths; a container's log path never changes, so the
// status of a pod is read in full only when one of its running containers
// is not watched yet (one read per pod and new container, not one per pod
// and pass).
func (m *Manager) running(ctx context.Context) ([]target, error) {
	pods, err := m.rt.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	m.mu.Lock()
	known := make(map[string]target, len(m.watch))
	for id, w := range m.watch {
		known[id] = w.target
	}
	m.mu.Unlock()
	var out []target
	for _, p := range pods {
		if !hasRunning(p) {
			continue
		}
		if ts, ok := watchedTargets(p, known); ok {
			out = append(out, ts...)
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

// watchedTargets are the targets of p's running containers when every one
// of them is watched already.
func watchedTargets(p *runtime.PodStatus, known map[string]target) ([]target, bool) {
	var out []target
	for _, c := range p.Containers {
		if c.State != runtime.ContainerRunning {
			continue
		}
		t, ok := known[c.ID]
		if !ok {
			return nil, false
		}
		out = append(out, t)
	}
	return out, true
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
	sortRotated(logs)
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

// rotatedName is the name for the current log rotated now:
// <log>.<timestamp> as upstream, or, when the log was rotated within that
// second already, <log>.<timestamp>.<n> with n above the counters in use,
// so that names sort in the order of rotation.
func (m *Manager) rotatedName(log string) (string, error) {
	base := log + "." + m.opts.Clock.Now().Format(timestampFormat)
	same, err := filepath.Glob(globEscape(base) + "*")
	if err != nil {
		return "", fmt.Errorf("list rotated logs of %s: %w", log, err)
	}
	if len(same) == 0 {
		return base, nil
	}
	n := 0
	for _, l := range same {
		n = max(n, counter(l))
	}
	return base + "." + strconv.Itoa(n+1), nil
}

// counter is n of a rotated log <log>.<timestamp>.<n>[.gz], 0 without one.
func counter(rotated string) int {
	ext := filepath.Ext(strings.TrimSuffix(rotated, compressSuffix))
	n, err := strconv.Atoi(strings.TrimPrefix(ext, "."))
	if err != nil {
		return 0 // ".<timestamp>" or a temporary file
	}
	return n
}

// sortRotated sorts rotated log files oldest first: by timestamp, then by
// the counter of rotations within the same second, compressed or not.
func sortRotated(logs []string) {
	stamp := func(l string) string {
		l = strings.TrimSuffix(l, compressSuffix)
		if counter(l) > 0 {
			l = strings.TrimSuffix(l, filepath.Ext(l))
		}
		return l
	}
	sort.SliceStable(logs, func(i, j int) bool {
		a, b := stamp(logs[i]), stamp(logs[j])
		if a != b {
			return a < b
		}
		return counter(logs[i]) < counter(logs[j])
	})
}

// rotateLatest renames the current log and asks the runtime to reopen it;
// when the reopen fails the file is renamed back so the next pass tries
// again.
func (m *Manager) rotateLatest(ctx context.Context, id, log string) error {
	rotated, err := m.rotatedName(log)
	if err != nil {
		return err
	}
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
