package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/podconfig"
)

const node = "node-a"

// manifestFor returns a valid manifest for a pod called name.
func manifestFor(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

// malformed has a typo: imagee is an unknown field (a warning, as
// upstream), which leaves the container without its required image.
const malformed = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers:\n  - name: c\n    imagee: busybox\n"

const imageMissing = "spec.containers[0].image: Required value"

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recorder is a sink that keeps every delivered set.
type recorder struct {
	mu     sync.Mutex
	sets   [][]*v1.Pod
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) sink(pods []*v1.Pod) {
	r.mu.Lock()
	r.sets = append(r.sets, pods)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sets)
}

// since returns the sets delivered from index i on.
func (r *recorder) since(i int) [][]*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]*v1.Pod(nil), r.sets[i:]...)
}

func (r *recorder) latest() []*v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return nil
	}
	return r.sets[len(r.sets)-1]
}

// waitFor waits until a delivered set satisfies ok, or fails at the
// deadline.
func (r *recorder) waitFor(t *testing.T, what string, ok func([]*v1.Pod) bool) []*v1.Pod {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.sets)
		var last []*v1.Pod
		if n > 0 {
			last = r.sets[n-1]
		}
		r.mu.Unlock()
		if n > 0 && ok(last) {
			return last
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; last set %v", what, names(last))
		}
	}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

func hasNames(want ...string) func([]*v1.Pod) bool {
	return func(pods []*v1.Pod) bool { return fmt.Sprint(names(pods)) == fmt.Sprint(want) }
}

func find(pods []*v1.Pod, name string) *v1.Pod {
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func testContext(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

// start runs s until the test ends.
func start(t *testing.T, s *Source) {
	t.Helper()
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
}

// poll waits for cond, for state that only changes through fsnotify
// without a delivery (e.g. Errors).
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunRejectsMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(notDir, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope"), "static pod path " + filepath.Join(dir, "nope")},
		{"neither directory nor file", notDir, "static pod path " + notDir + " is neither a directory nor a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			err := New(tt.path, node, time.Minute, r.sink).Run(testContext(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run error = %v, want it to contain %q", err, tt.want)
			}
			if r.calls() != 0 {
				t.Fatal("sink called for a missing directory")
			}
		})
	}
}

// TestUnknownFieldWarns checks that a manifest with an unknown field runs,
// as upstream's, and that the field is reported by Warnings until the file
// is fixed.
func TestUnknownFieldWarns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, strings.Replace(manifestFor("a", "busybox"), "image: busybox", "image: busybox\n    imagePullPolcy: Never", 1))
	r := newRecorder()
	s := New(dir, node, time.Minute, r.sink)
	s.scan(testContext(t))
	if got := names(r.latest()); fmt.Sprint(got) != "[a-node-a]" {
		t.Fatalf("pods = %v, want the pod of the manifest with an unknown field", got)
	}
	if errs := s.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v, want none", errs)
	}
	w := s.Warnings()[path]
	if len(w) != 1 || !strings.Contains(w[0], "spec.containers[0].imagePullPolcy: unknown field") {
		t.Errorf("Warnings()[%s] = %q, want the unknown field", path, w)
	}
	write(t, path, manifestFor("a", "busybox"))
	s.scan(testContext(t))
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() after the fix = %v, want none", w)
	}
}

// TestSingleFile checks a staticPodPath that is a file: only that file is
// read, edits (also by rename) are seen, other files of its directory are
// not pods, and its removal removes the pod.
func TestSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "etcd.yaml")
	write(t, path, manifestFor("etcd", "etcd:1"))
	write(t, filepath.Join(dir, "other.yaml"), manifestFor("other", "busybox"))
	r := newRecorder()
	s := New(path, node, time.Minute, r.sink)
	start(t, s)
	first := find(r.waitFor(t, "the file's pod", hasNames("etcd-node-a")), "etcd-node-a")
	if first.Annotations[podconfig.AnnotationConfigSource] != SourceName {
		t.Errorf("config.source = %q", first.Annotations[podconfig.AnnotationConfigSource])
	}

	// The UID is the one the same file gets in a directory: the path is
	// the origin either way.
	r2 := newRecorder()
	New(dir, node, time.Minute, r2.sink).scan(testContext(t))
	if inDir := find(r2.latest(), "etcd-node-a"); inDir == nil || inDir.UID != first.UID {
		t.Errorf("UID as a single file %s differs from the UID in its directory %v", first.UID, inDir)
	}

	write(t, filepath.Join(dir, "new.yaml"), manifestFor("new", "busybox"))
	tmp := filepath.Join(dir, ".etcd.yaml.tmp")
	write(t, tmp, manifestFor("etcd", "etcd:2"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(t, "the edit", func(p []*v1.Pod) bool { return len(p) == 1 && p[0].UID != first.UID })
	if got[0].Name != "etcd-node-a" || got[0].Spec.Containers[0].Image != "etcd:2" {
		t.Fatalf("after the edit: %v image %s", names(got), got[0].Spec.Containers[0].Image)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "no pod after removal", hasNames())
	if e := s.Errors(); len(e) != 0 {
		t.Errorf("Errors() = %v", e)
	}
}

// TestScan covers the rules of one directory scan.
func TestScan(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		symlinks  map[string]string // name → target relative to the dir
		dirs      []string
		wantPods  []string
		wantError map[string]string // file → substring of its error
	}{
		{name: "empty directory", wantPods: nil},
		{name: "yaml and json", files: map[string]string{
			"a.yaml": manifestFor("a", "busybox"),
			"b.json": `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
		}, wantPods: []string{"a-node-a", "b-node-a"}},
		{name: "any file name", files: map[string]string{"pod.manifest": manifestFor("a", "busybox")}, wantPods: []string{"a-node-a"}},
		{name: "dot files ignored", files: map[string]string{".a.yaml.swp": manifestFor("a", "busybox"), ".hidden": "junk"}, wantPods: nil},
		{name: "subdirectories not read", dirs: []string{"sub"}, files: map[string]string{"sub/a.yaml": manifestFor("a", "busybox")}, wantPods: nil},
		{name: "symlink followed", files: map[string]string{"sub/a.yaml": manifestFor("a", "busybox")}, dirs: []string{"sub"}, symlinks: map[string]string{"link.yaml": "sub/a.yaml"}, wantPods: []string{"a-node-a"}},
		{name: "dangling symlink ignored", symlinks: map[string]string{"link.yaml": "nowhere.yaml"}, wantPods: nil},
		{name: "malformed next to good", files: map[string]string{
			"a.yaml":   manifestFor("a", "busybox"),
			"bad.yaml": malformed,
		}, wantPods: []string{"a-node-a"}, wantError: map[string]string{"bad.yaml": imageMissing}},
		{name: "two files same pod, first by name wins", files: map[string]string{
			"10-web.yaml": manifestFor("web", "nginx:1"),
			"20-web.yaml": manifestFor("web", "nginx:2"),
		}, wantPods: []string{"web-node-a"}, wantError: map[string]string{"20-web.yaml": "pod default/web-node-a is already defined by"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range tt.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, content := range tt.files {
				write(t, filepath.Join(dir, name), content)
			}
			for name, target := range tt.symlinks {
				if err := os.Symlink(filepath.Join(dir, target), filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			r := newRecorder()
			s := New(dir, node, time.Minute, r.sink)
			s.scan(testContext(t))
			if r.calls() != 1 {
				t.Fatalf("sink called %d times, want 1", r.calls())
			}
			if got := names(r.latest()); fmt.Sprint(got) != fmt.Sprint(tt.wantPods) {
				t.Errorf("pods = %v, want %v", got, tt.wantPods)
			}
			errs := s.Errors()
			if len(errs) != len(tt.wantError) {
				t.Errorf("Errors() = %v, want %d entries", errs, len(tt.wantError))
			}
			for file, want := range tt.wantError {
				path := filepath.Join(dir, file)
				if !strings.Contains(errs[path], want) || !strings.Contains(errs[path], path) {
					t.Errorf("error for %s = %q, want it to name the file and contain %q", file, errs[path], want)
				}
			}
			if tt.name == "two files same pod, first by name wins" {
				if img := r.latest()[0].Spec.Containers[0].Image; img != "nginx:1" {
					t.Errorf("winning pod has image %q, want the first file's", img)
				}
			}
			for _, p := range r.latest() {
				if p.Annotations[podconfig.AnnotationConfigSource] != SourceName || p.Spec.NodeName != node {
					t.Errorf("pod %s: source %q nodeName %q", p.Name, p.Annotations[podconfig.AnnotationConfigSource], p.Spec.NodeName)
				}
			}
		})
	}
}

func TestScanKeepsLastGoodVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	write(t, path, manifestFor("web", "nginx:1"))
	r := newRecorder()
	s := New(dir, node, time.Minute, r.sink)
	ctx := testContext(t)
	s.scan(ctx)
	good := find(r.latest(), "web-node-a")
	if good == nil {
		t.Fatal("valid pod not delivered")
	}

	// A typo, then a half-written file: the last good pod stays.
	for _, content := range []string{strings.Replace(manifestFor("web", "nginx:2"), "image:", "imag:", 1), "apiVersion: v1\nkind: Po"} {
		write(t, path, content)
		s.scan(ctx)
		if got := find(r.latest(), "web-node-a"); got == nil || got.UID != good.UID {
			t.Fatalf("after %q: pods %v, want the last good version %s", content, names(r.latest()), good.UID)
		}
		if s.Errors()[path] == "" {
			t.Fatalf("after %q: no error reported for %s", content, path)
		}
	}
	if r.calls() != 1 {
		t.Errorf("sink called %d times, want no new delivery while the set is unchanged", r.calls())
	}

	// Fixed with new content: replaced, error cleared.
	write(t, path, manifestFor("web", "nginx:3"))
	s.scan(ctx)
	got := find(r.latest(), "web-node-a")
	if got == nil || got.UID == good.UID || got.Spec.Containers[0].Image != "nginx:3" {
		t.Fatalf("fixed file not delivered: %v", names(r.latest()))
	}
	if len(s.Errors()) != 0 {
		t.Fatalf("Errors() = %v after the fix", s.Errors())
	}

	// Removed: gone, even though it had a good version.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s.scan(ctx)
	if len(r.latest()) != 0 {
		t.Fatalf("pods after removal = %v", names(r.latest()))
	}
}

func TestScanLogsEachBadContentOnce(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	write(t, path, malformed)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	s := New(dir, node, time.Minute, newRecorder().sink)

	count := func() int {
		n := 0
		for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
			if strings.HasPrefix(e.Message, "Invalid static pod manifest") {
				n++
				if len(e.ParameterKVList) < 2 || fmt.Sprint(e.ParameterKVList[:2]) != fmt.Sprint([]any{"file", path}) || e.Err == nil {
					t.Errorf("log entry keys %v err %v", e.ParameterKVList, e.Err)
				}
			}
		}
		return n
	}
	steps := []struct {
		content string // "" keeps the file as is
		want    int
	}{
		{"", 1},
		{"", 1},
		{"", 1},
		{malformed + "# edited\n", 2},
		{manifestFor("ok", "busybox"), 2},
		{malformed, 3},
	}
	for i, st := range steps {
		if st.content != "" {
			write(t, path, st.content)
		}
		s.scan(ctx)
		if got := count(); got != st.want {
			t.Fatalf("step %d: logged %d times, want %d", i, got, st.want)
		}
	}
}

func TestUIDStableAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), manifestFor("a", "busybox"))
	uid := func(nodeName string) string {
		r := newRecorder()
		New(dir, nodeName, time.Minute, r.sink).scan(testContext(t))
		if len(r.latest()) != 1 {
			t.Fatalf("pods = %v", names(r.latest()))
		}
		return string(r.latest()[0].UID)
	}
	first, second, other := uid(node), uid(node), uid("node-b")
	if first != second {
		t.Errorf("UID changed across restarts: %s vs %s", first, second)
	}
	if first == other {
		t.Errorf("UID does not depend on the node: %s", first)
	}
}

func TestSinkOwnsDeliveredPods(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), manifestFor("a", "busybox"))
	write(t, filepath.Join(dir, "b.yaml"), manifestFor("b", "busybox"))
	r := newRecorder()
	s := New(dir, node, time.Minute, r.sink)
	s.scan(testContext(t))
	r.latest()[0].Spec.Containers[0].Image = "mutated"
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	s.scan(testContext(t))
	if img := r.latest()[0].Spec.Containers[0].Image; img != "busybox" {
		t.Fatalf("mutation by the sink leaked into the source: %q", img)
	}
}

// TestWatch drives a running source through file system changes.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	r := newRecorder()
	s := New(dir, node, time.Hour, r.sink) // resync out of the way: changes come from fsnotify
	start(t, s)
	r.waitFor(t, "initial empty set", hasNames())

	a := filepath.Join(dir, "a.yaml")
	write(t, a, manifestFor("a", "busybox:1"))
	first := find(r.waitFor(t, "a added", hasNames("a-node-a")), "a-node-a")

	write(t, a, manifestFor("a", "busybox:2"))
	second := find(r.waitFor(t, "a modified", func(p []*v1.Pod) bool {
		return len(p) == 1 && p[0].UID != first.UID
	}), "a-node-a")
	if second.Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("modified pod image = %q", second.Spec.Containers[0].Image)
	}

	// Editor-style save: write a temporary dot file, rename over the target.
	b := filepath.Join(dir, "b.yaml")
	tmp := filepath.Join(dir, ".b.yaml.tmp")
	write(t, tmp, manifestFor("b", "busybox:1"))
	if err := os.Rename(tmp, b); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "b added by rename", hasNames("a-node-a", "b-node-a"))

	// A malformed file next to good ones changes nothing but is reported.
	bad := filepath.Join(dir, "bad.yaml")
	write(t, bad, malformed)
	poll(t, "error for bad.yaml", func() bool { return strings.Contains(s.Errors()[bad], imageMissing) })
	if got := names(r.latest()); fmt.Sprint(got) != "[a-node-a b-node-a]" {
		t.Fatalf("pods after malformed file = %v", got)
	}

	// Good becomes malformed: the last good version is kept.
	write(t, a, "apiVersion: v1\nkind: Pod\nmetadata: {name: a\n")
	poll(t, "error for a.yaml", func() bool { return s.Errors()[a] != "" })
	if p := find(r.latest(), "a-node-a"); p == nil || p.UID != second.UID {
		t.Fatalf("last good version of a not kept: %v", names(r.latest()))
	}

	// Removal.
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "b removed", hasNames("a-node-a"))
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "a removed", hasNames())
	poll(t, "a's error cleared", func() bool { _, ok := s.Errors()[a]; return !ok })
}

// TestDirectoryDisappears checks that pods survive the directory going
// away and that the source picks it up again when it returns.
func TestDirectoryDisappears(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.yaml"), manifestFor("a", "busybox"))
	r := newRecorder()
	s := New(dir, node, time.Hour, r.sink)
	s.retry = 20 * time.Millisecond
	start(t, s)
	r.waitFor(t, "a", hasNames("a-node-a"))

	// Renaming removes the directory with its files in one step.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	poll(t, "directory error", func() bool { return s.Errors()[dir] != "" })
	calls := r.calls()

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), manifestFor("b", "busybox"))
	r.waitFor(t, "b after the directory returned", hasNames("b-node-a"))
	for i, set := range r.since(calls - 1) {
		if len(set) == 0 {
			t.Fatalf("delivery %d after removal was empty: pods were dropped while the directory was missing", i)
		}
	}
	// The new directory is watched: a change shows up without a resync.
	write(t, filepath.Join(dir, "c.yaml"), manifestFor("c", "busybox"))
	r.waitFor(t, "c in the new directory", hasNames("b-node-a", "c-node-a"))
	if _, ok := s.Errors()[dir]; ok {
		t.Fatal("directory error not cleared")
	}
}

// TestResync checks the periodic rescan: a symlink's target changes outside
// the watched directory, which only a rescan notices.
func TestResync(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "a.yaml")
	write(t, target, manifestFor("a", "busybox:1"))
	if err := os.Symlink(target, filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	fc := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	r := newRecorder()
	s := New(dir, node, 20*time.Second, r.sink)
	s.clock = fc
	start(t, s)
	first := r.waitFor(t, "a", hasNames("a-node-a"))[0]
	if seen := first.Annotations[podconfig.AnnotationConfigSeen]; seen != "2025-01-01T00:00:00Z" {
		t.Errorf("config.seen = %q, want the injected clock's time", seen)
	}

	write(t, target, manifestFor("a", "busybox:2"))
	fc.Step(20 * time.Second)
	got := r.waitFor(t, "a changed by resync", func(p []*v1.Pod) bool { return len(p) == 1 && p[0].UID != first.UID })
	if got[0].Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("image = %q", got[0].Spec.Containers[0].Image)
	}
}
