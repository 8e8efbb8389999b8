// Package file is the static pod source: it watches a directory of pod
// manifests, or a single manifest file (the kubelet's staticPodPath may be
// either), and delivers the full set of pods they describe every time it
// changes.
//
// Rules:
//
//   - When staticPodPath is a file, that file is the only manifest; its
//     directory is watched for changes to it (so that saves by rename are
//     seen) and the rules below apply to it alone.
//   - Each regular file directly in the directory holds one Pod, in YAML or
//     JSON (see package manifest for decoding, defaults, identity and
//     validation). Subdirectories are not read, names starting with "." are
//     ignored, symbolic links are followed.
//   - Changes are picked up through inotify (create, write, remove, rename;
//     editors that save by renaming a temporary file work) after a short
//     debounce, and by a full rescan every resync period as a safety net
//     (e.g. for a symlink whose target changes outside the directory).
//   - Unknown or duplicated fields do not reject a manifest (as upstream);
//     they, and upstream's warnings about a static pod's priority, are
//     logged once per distinct content and reported by Warnings.
//   - A malformed file is logged once per distinct content and reported by
//     Errors; it never disturbs the pods of other files. When a file that
//     held a valid pod becomes malformed (including a half-written save),
//     the last valid version of its pod is kept and keeps running until the
//     file is fixed or removed: nothing is lost to a typo.
//   - Two files defining the same namespace/name: the first by file name
//     wins, the other is reported as an error.
//   - If the directory is missing when Run starts, Run fails. If it
//     disappears later, the pods last delivered are kept, the problem is
//     logged, and the source keeps retrying until the directory is back.
package file

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsource/manifest"
)

// SourceName is the name of this source in podconfig.
const SourceName = podconfig.SourceFile

const (
	// maxManifestSize bounds how much of a file is read; larger files are
	// rejected.
	maxManifestSize = 4 << 20
	// debounceDelay is how long the directory must be quiet after an event
	// before it is rescanned, so a save in several writes is read once.
	debounceDelay = 100 * time.Millisecond
	// maxDebounce bounds how long a stream of events can postpone a rescan.
	maxDebounce = time.Second
	// retryDelay is how often a missing or unwatchable directory is retried.
	retryDelay = time.Second
)

// Source watches one static pod directory.
type Source struct {
	path     string // staticPodPath as given, cleaned
	dir      string // the directory watched: path, or its parent
	single   string // the base name of path when path is a file
	nodeName string
	resync   time.Duration
	sink     func([]*v1.Pod)
	clock    clock.WithTicker
	debounce time.Duration
	retry    time.Duration

	mu       sync.Mutex
	errs     map[string]string
	warnings map[string][]string

	// Owned by the Run goroutine.
	files     map[string]*fileState
	delivered []types.UID
	sent      bool
	missing   bool
}

// fileState is what the source knows about one manifest file.
type fileState struct {
	sum    [sha256.Size]byte
	read   bool
	pod    *v1.Pod // the pod decoded from the current content, or nil
	err    error   // why the current content was rejected
	good   *v1.Pod // the last pod this file held
	logged string  // the last problem logged for this file
}

// New returns a source for the manifests in dir (a directory or one file)
// on node nodeName, rescanned
// every resync (the kubelet's fileCheckFrequency; 20s when not positive).
// sink receives the full set of valid pods after every change; it is
// called from Run's goroutine, must not block for long, and owns the pods
// it receives.
func New(dir, nodeName string, resync time.Duration, sink func([]*v1.Pod)) *Source {
	if resync <= 0 {
		resync = 20 * time.Second
	}
	if sink == nil {
		sink = func([]*v1.Pod) {}
	}
	return &Source{
		path:     filepath.Clean(dir),
		dir:      filepath.Clean(dir),
		nodeName: nodeName,
		resync:   resync,
		sink:     sink,
		clock:    clock.RealClock{},
		debounce: debounceDelay,
		retry:    retryDelay,
		errs:     map[string]string{},
		warnings: map[string][]string{},
		files:    map[string]*fileState{},
	}
}

// Errors returns, for each manifest file currently rejected, the last error
// (file path → message). While the directory itself cannot be read, it has
// an entry too.
func (s *Source) Errors() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.errs))
	for k, v := range s.errs {
		out[k] = v
	}
	return out
}

// Warnings returns, for each manifest file accepted with warnings (unknown
// or duplicated fields, priority), the warnings of its current content.
func (s *Source) Warnings() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]string, len(s.warnings))
	for k, v := range s.warnings {
		out[k] = slices.Clone(v)
	}
	return out
}

// Run delivers the initial set, then watches the directory (or the file's
// directory) until ctx is done. It fails at once if the path does not
// exist, is neither a directory nor a regular file, or cannot be watched.
func (s *Source) Run(ctx context.Context) error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("static pod path %s: %w", s.path, err)
	}
	switch {
	case fi.IsDir():
		s.dir, s.single = s.path, ""
	case fi.Mode().IsRegular():
		s.dir, s.single = filepath.Dir(s.path), filepath.Base(s.path)
	default:
		return fmt.Errorf("static pod path %s is neither a directory nor a regular file", s.path)
	}
	logger := klog.FromContext(ctx).WithValues("dir", s.dir)
	if s.single != "" {
		logger = klog.FromContext(ctx).WithValues("file", s.path)
	}
	ctx = klog.NewContext(ctx, logger)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch static pod path %s: %w", s.dir, err)
	}
	defer func() { _ = w.Close() }()
	watched, err := s.watch(w)
	if err != nil {
		return err
	}

	ticker := s.clock.NewTicker(s.resync)
	defer ticker.Stop()
	logger.V(2).Info("Watching static pod directory", "resync", s.resync)
	s.scan(ctx)

	var (
		pending      clock.Timer // debounce or retry timer, nil when idle
		pendingSince time.Time
	)
	arm := func(d time.Duration) {
		now := s.clock.Now()
		switch {
		case pending == nil:
			pending, pendingSince = s.clock.NewTimer(d), now
		case now.Sub(pendingSince) < maxDebounce:
			pending.Stop()
			pending = s.clock.NewTimer(d)
		}
	}
	timerC := func() <-chan time.Time {
		if pending == nil {
			return nil
		}
		return pending.C()
	}
	// refresh re-establishes the watch when needed and rescans.
	refresh := func() {
		if watched != nil {
			if cur, err := os.Stat(s.dir); err != nil || !os.SameFile(watched, cur) {
				_ = w.Remove(s.dir)
				watched = nil
			}
		}
		if watched == nil {
			var err error
			if watched, err = s.watch(w); err != nil {
				s.setMissing(ctx, err)
				arm(s.retry)
				return
			}
		}
		s.scan(ctx)
	}

	for {
		select {
		case <-ctx.Done():
			if pending != nil {
				pending.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("watch static pod path %s: watcher closed", s.dir)
			}
			logger.V(5).Info("Static pod directory event", "event", ev.String())
			if filepath.Clean(ev.Name) == s.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// The directory itself went away; the watch is gone.
				_ = w.Remove(s.dir)
				watched = nil
			}
			arm(s.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("watch static pod path %s: watcher closed", s.dir)
			}
			// Typically a queue overflow: events may have been lost.
			logger.Error(err, "Static pod directory watch error")
			arm(s.debounce)
		case <-timerC():
			pending = nil
			refresh()
		case <-ticker.C():
			refresh()
		}
	}
}

// watch adds the directory to w and returns its identity.
func (s *Source) watch(w *fsnotify.Watcher) (os.FileInfo, error) {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return nil, fmt.Errorf("static pod path %s: %w", s.dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("static pod path %s is not a directory", s.dir)
	}
	if err := w.Add(s.dir); err != nil {
		return nil, fmt.Errorf("watch static pod path %s: %w", s.dir, err)
	}
	return fi, nil
}

// setMissing logs, once per outage, that the directory cannot be read.
func (s *Source) setMissing(ctx context.Context, err error) {
	s.setError(s.dir, err)
	if s.missing {
		return
	}
	s.missing = true
	klog.FromContext(ctx).Error(err, "Static pod directory unavailable, keeping its pods and retrying")
}

// scan reads every manifest and delivers the resulting set if it changed.
func (s *Source) scan(ctx context.Context) {
	logger := klog.FromContext(ctx)
	entries, err := s.entries()
	if err != nil {
		s.setMissing(ctx, fmt.Errorf("read static pod path %s: %w", s.dir, err))
		return
	}
	if s.missing {
		s.missing = false
		s.setError(s.dir, nil)
		logger.Info("Static pod directory available again")
	}

	present := map[string]bool{}
	claimed := map[string]string{} // namespace/name → file
	var pods []*v1.Pod
	for _, e := range entries { // sorted by file name
		name := e
		if s.single == "" && strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(s.dir, name)
		st, ok := s.load(ctx, path)
		if !ok {
			continue
		}
		present[path] = true

		pod, problem := st.pod, st.err
		if pod == nil {
			pod = st.good
		}
		if pod != nil {
			key := pod.Namespace + "/" + pod.Name
			if first, dup := claimed[key]; dup {
				problem = fmt.Errorf("static pod manifest %s: pod %s is already defined by %s", path, key, first)
				pod = nil
			} else {
				claimed[key] = path
				pods = append(pods, pod)
			}
		}
		s.report(ctx, path, st, problem)
	}
	for path := range s.files {
		if !present[path] {
			delete(s.files, path)
			s.setError(path, nil)
			s.setWarnings(path, nil)
		}
	}
	s.deliver(pods)
}

// entries lists the names of the candidate manifest files, sorted: the
// directory's entries, or the one file.
func (s *Source) entries() ([]string, error) {
	if s.single != "" {
		if _, err := os.Stat(s.dir); err != nil {
			return nil, err
		}
		return []string{s.single}, nil
	}
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(des))
	for i, e := range des {
		names[i] = e.Name()
	}
	return names, nil
}

// load returns the state of the file at path, reading and decoding it if
// its content changed. ok is false for paths that are not manifest files
// (directories, devices, vanished files).
func (s *Source) load(ctx context.Context, path string) (st *fileState, ok bool) {
	logger := klog.FromContext(ctx)
	fi, err := os.Stat(path) // follows symlinks
	if errors.Is(err, fs.ErrNotExist) {
		// Removed since the listing, or a dangling symlink.
		return nil, false
	}
	if err == nil && fi.IsDir() {
		logger.V(4).Info("Not descending into subdirectory of static pod path", "file", path)
		return nil, false
	}
	if err == nil && !fi.Mode().IsRegular() {
		logger.V(2).Info("Ignoring non-regular file in static pod path", "file", path, "mode", fi.Mode().String())
		return nil, false
	}
	st = s.files[path]
	if st == nil {
		st = &fileState{}
		s.files[path] = st
	}
	var data []byte
	if err == nil {
		data, err = readLimited(path)
	}
	if err != nil {
		// Unreadable: keep the last good pod, report the error.
		st.read, st.pod, st.err = false, nil, fmt.Errorf("static pod manifest %s: %w", path, err)
		return st, true
	}
	sum := sha256.Sum256(data)
	if st.read && sum == st.sum {
		return st, true
	}
	st.sum, st.read = sum, true
	var warnings []string
	pod, err := manifest.Parse(data, manifest.Options{
		NodeName: s.nodeName,
		Origin:   path,
		Source:   SourceName,
		Seen:     s.clock.Now(),
		Warn:     func(p manifest.Problem) { warnings = append(warnings, p.String()) },
	})
	s.setWarnings(path, warnings)
	if len(warnings) > 0 {
		logger.Info("Static pod manifest has warnings", "file", path, "warnings", warnings)
	}
	if err != nil {
		st.pod, st.err = nil, fmt.Errorf("static pod manifest %s: %w", path, err)
		return st, true
	}
	if st.good != nil && st.good.UID == pod.UID {
		// Same content as the pod already delivered: keep its first-seen
		// time.
		pod = st.good
	}
	st.pod, st.err, st.good = pod, nil, pod
	return st, true
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestSize {
		return nil, fmt.Errorf("file is larger than %d bytes", maxManifestSize)
	}
	return data, nil
}

// report records problem (nil when the file is fine) for path and logs it
// once per distinct content and message.
func (s *Source) report(ctx context.Context, path string, st *fileState, problem error) {
	s.setError(path, problem)
	if problem == nil {
		st.logged = ""
		return
	}
	key := fmt.Sprintf("%x|%s", st.sum, problem)
	if key == st.logged {
		return
	}
	st.logged = key
	logger := klog.FromContext(ctx)
	if st.err != nil && st.good != nil {
		logger.Error(problem, "Invalid static pod manifest, keeping the last valid version", "file", path, "pod", klog.KObj(st.good), "podUID", st.good.UID)
		return
	}
	logger.Error(problem, "Invalid static pod manifest", "file", path)
}

func (s *Source) setWarnings(path string, warnings []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(warnings) == 0 {
		delete(s.warnings, path)
		return
	}
	s.warnings[path] = warnings
}

func (s *Source) setError(path string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.errs, path)
		return
	}
	s.errs[path] = err.Error()
}

// deliver hands pods to the sink on the first scan and whenever the set of
// UIDs changed (a UID stands for the exact content of a manifest).
func (s *Source) deliver(pods []*v1.Pod) {
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	if s.sent && slices.Equal(uids, s.delivered) {
		return
	}
	s.sent, s.delivered = true, uids
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = p.DeepCopy()
	}
	s.sink(out)
}
