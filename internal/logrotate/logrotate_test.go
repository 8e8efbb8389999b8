package logrotate

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/runtime"
)

type fakeRuntime struct {
	pod       *runtime.PodStatus
	reopenErr error
	reopened  []string
	// attempts records the clock's time of every reopen asked for, when
	// clk is set.
	clk      *testclock.FakeClock
	attempts []time.Time
	// statusReads counts GetPodStatus calls.
	statusReads int
}

func (f *fakeRuntime) ListPods(context.Context) ([]*runtime.PodStatus, error) {
	return []*runtime.PodStatus{f.pod}, nil
}
func (f *fakeRuntime) GetPodStatus(context.Context, types.UID) (*runtime.PodStatus, error) {
	f.statusReads++
	return f.pod, nil
}
func (f *fakeRuntime) ReopenContainerLog(_ context.Context, id string) error {
	if f.clk != nil {
		f.attempts = append(f.attempts, f.clk.Now())
	}
	if f.reopenErr != nil {
		return f.reopenErr
	}
	f.reopened = append(f.reopened, id)
	c := f.pod.Containers[0]
	return os.WriteFile(c.LogPath, nil, 0o644)
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestRotate follows upstream pkg/kubelet/logs container_log_manager.go:
// at most MaxFiles files, the newest rotated one plain, older ones .gz.
func TestRotate(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{pod: &runtime.PodStatus{UID: "u", Name: "p", Namespace: "ns",
		Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "c", State: runtime.ContainerRunning, LogPath: log}}}}
	clk := testclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := New(rt, Options{MaxSize: 10, MaxFiles: 3, MaxWorkers: 2, Interval: 3 * time.Second, Clock: clk})
	ctx := context.Background()
	for i := range 5 {
		if err := os.WriteFile(log, []byte(strings.Repeat("x", 20)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.RotateAll(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Step(3 * time.Second)
		got := files(t, dir)
		if len(got) > 3 {
			t.Fatalf("pass %d: %d files %v, want <= 3", i, len(got), got)
		}
	}
	got := files(t, dir)
	// With MaxFiles 3 upstream keeps one rotated file, which stays plain.
	want := []string{"0.log", "0.log.20260102-030414", "0.log.20260102-030417"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files %v, want %v", got, want)
	}
	if len(rt.reopened) != 5 {
		t.Errorf("reopened %d times, want 5", len(rt.reopened))
	}
	// Under the limit: nothing happens.
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rt.reopened) != 5 {
		t.Errorf("small log rotated")
	}
}

// TestRotateAllReadsStatusOfNewContainersOnly: a pod's full status (for
// its containers' log paths) is read when it has a running container not
// watched yet, not on every pass: a log path never changes.
func TestRotateAllReadsStatusOfNewContainersOnly(t *testing.T) {
	dir := t.TempDir()
	c1 := &runtime.ContainerStatus{ID: "c1", Name: "a", State: runtime.ContainerRunning, LogPath: filepath.Join(dir, "a.log")}
	c2 := &runtime.ContainerStatus{ID: "c2", Name: "b", State: runtime.ContainerRunning, LogPath: filepath.Join(dir, "b.log")}
	rt := &fakeRuntime{pod: &runtime.PodStatus{UID: "u", Name: "p", Namespace: "ns", Containers: []*runtime.ContainerStatus{c1}}}
	m := New(rt, Options{MaxSize: 1 << 20, MaxFiles: 3, MaxWorkers: 2, Interval: 3 * time.Second, Clock: testclock.NewFakeClock(time.Now())})
	ctx := context.Background()
	steps := []struct {
		name       string
		containers []*runtime.ContainerStatus
		reads      int
		targets    []string
	}{
		{"first pass", []*runtime.ContainerStatus{c1}, 1, []string{"c1"}},
		{"same container", []*runtime.ContainerStatus{c1}, 1, []string{"c1"}},
		{"a new container", []*runtime.ContainerStatus{c1, c2}, 2, []string{"c1", "c2"}},
		{"both watched", []*runtime.ContainerStatus{c1, c2}, 2, []string{"c1", "c2"}},
		{"one exited", []*runtime.ContainerStatus{c1, {ID: "c2", Name: "b", State: runtime.ContainerExited, LogPath: c2.LogPath}}, 2, []string{"c1"}},
	}
	for _, st := range steps {
		rt.pod.Containers = st.containers
		if err := m.RotateAll(ctx); err != nil {
			t.Fatal(err)
		}
		if rt.statusReads != st.reads {
			t.Errorf("%s: %d status reads, want %d", st.name, rt.statusReads, st.reads)
		}
		m.mu.Lock()
		var got []string
		for id := range m.watch {
			got = append(got, id)
		}
		m.mu.Unlock()
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(st.targets, ",") {
			t.Errorf("%s: watching %v, want %v", st.name, got, st.targets)
		}
	}
}

// TestReopenFailsRenamesBack: upstream renames the rotated file back.
func TestReopenFailsRenamesBack(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{reopenErr: errors.New("boom"), pod: &runtime.PodStatus{UID: "u",
		Containers: []*runtime.ContainerStatus{{ID: "c1", State: runtime.ContainerRunning, LogPath: log}}}}
	m := New(rt, Options{MaxSize: 1, MaxFiles: 2, Clock: testclock.NewFakeClock(time.Unix(0, 0))})
	if err := os.WriteFile(log, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 1 || got[0] != "0.log" {
		t.Errorf("files %v, want [0.log]", got)
	}
}

// newWatched returns a manager (MaxSize 1000, CheckPeriod 50ms) that has
// made one pass over a container whose log holds 100 bytes.
func newWatched(t *testing.T) (*Manager, *fakeRuntime, *testclock.FakeClock, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{pod: &runtime.PodStatus{UID: "u", Name: "p", Namespace: "ns",
		Containers: []*runtime.ContainerStatus{{ID: "c1", Name: "c", State: runtime.ContainerRunning, LogPath: log}}}}
	clk := testclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	m := New(rt, Options{MaxSize: 1000, MaxFiles: 5, Interval: 10 * time.Second, CheckPeriod: 50 * time.Millisecond, Clock: clk})
	writeSize(t, log, 100)
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rt.reopened) != 0 {
		t.Fatalf("a 100-byte log was rotated")
	}
	return m, rt, clk, log
}

func writeSize(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Repeat("x", n)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckGrowth: between passes, a log is checked again by its growth
// rate and rotated as soon as a check finds it over MaxSize.
func TestCheckGrowth(t *testing.T) {
	tests := []struct {
		name string
		// steps: time passed and the log's size before each check
		steps       []time.Duration
		sizes       []int
		wantReopens []int // reopen count after each check
		wantNext    time.Duration
	}{
		{
			name:  "fast writer is rotated at the first check over the limit",
			steps: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond},
			sizes: []int{600, 1200}, wantReopens: []int{0, 1},
			wantNext: 50 * time.Millisecond, // after a rotation: CheckPeriod
		},
		{
			name:  "quiet log: the wait doubles",
			steps: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
			sizes: []int{100, 100, 100}, wantReopens: []int{0, 0, 0}, // checks at 50 and 150 ms
			wantNext: 200 * time.Millisecond,
		},
		{
			name:  "quiet log is rotated at its next check after a burst",
			steps: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
			sizes: []int{100, 2000, 2000}, wantReopens: []int{0, 0, 1}, // not due at 100 ms
			wantNext: 50 * time.Millisecond,
		},
		{
			name:  "quiet log is checked at least every second",
			steps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond},
			sizes: []int{100, 100, 100, 100, 100}, wantReopens: []int{0, 0, 0, 0, 0},
			wantNext: time.Second,
		},
		{
			name:  "log rotated by a pass since the last check: grown from zero",
			steps: []time.Duration{50 * time.Millisecond, 50 * time.Millisecond},
			sizes: []int{900, 500}, wantReopens: []int{0, 0}, // 10 kB/s from 0: 500 B left, 25 ms
			wantNext: 50 * time.Millisecond,
		},
		{
			name:  "slow writer: the wait at most doubles",
			steps: []time.Duration{50 * time.Millisecond},
			sizes: []int{110}, wantReopens: []int{0}, // 200 B/s: 890 B left, 2.2 s
			wantNext: 100 * time.Millisecond,
		},
		{
			name:  "writer near the limit is checked again after CheckPeriod",
			steps: []time.Duration{50 * time.Millisecond},
			sizes: []int{900}, wantReopens: []int{0}, // 16 kB/s: 100 B left, 3 ms
			wantNext: 50 * time.Millisecond,
		},
		{
			name:  "steady writer: half the time to the limit at its rate",
			steps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
			sizes: []int{200, 400}, wantReopens: []int{0, 0}, // 2 kB/s: 600 B left, 0.3 s
			wantNext: 150 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt, clk, log := newWatched(t)
			for i, d := range tt.steps {
				clk.Step(d)
				writeSize(t, log, tt.sizes[i])
				m.CheckGrowth(context.Background())
				if got := len(rt.reopened); got != tt.wantReopens[i] {
					t.Fatalf("check %d: reopened %d times, want %d", i, got, tt.wantReopens[i])
				}
			}
			if got := m.untilNextCheck(); got != tt.wantNext {
				t.Errorf("next check in %v, want %v", got, tt.wantNext)
			}
		})
	}
}

// TestRotateTwiceInOneSecond: rotations within one second get counters,
// and the oldest are removed first.
func TestRotateTwiceInOneSecond(t *testing.T) {
	m, _, clk, log := newWatched(t)
	m.opts.MaxFiles = 4
	for range 5 {
		writeSize(t, log, 2000)
		clk.Step(100 * time.Millisecond)
		m.CheckGrowth(context.Background())
	}
	got := files(t, filepath.Dir(log))
	want := []string{"0.log", "0.log.20260102-030405.2.gz", "0.log.20260102-030405.3", "0.log.20260102-030405.4"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files %v, want %v", got, want)
	}
}

func TestSortRotated(t *testing.T) {
	logs := []string{"0.log.20260102-030406", "0.log.20260102-030405.10", "0.log.20260102-030405.2.gz",
		"0.log.20260102-030405.gz", "0.log.20260102-030405.1"}
	sortRotated(logs)
	want := []string{"0.log.20260102-030405.gz", "0.log.20260102-030405.1", "0.log.20260102-030405.2.gz",
		"0.log.20260102-030405.10", "0.log.20260102-030406"}
	if strings.Join(logs, ",") != strings.Join(want, ",") {
		t.Errorf("sorted %v, want %v", logs, want)
	}
}

// TestCheckGrowthSharesWakeUps: a check of a log that is due also checks
// those due within a quarter of their wait (at most maxCheckSlack), not
// the others.
func TestCheckGrowthSharesWakeUps(t *testing.T) {
	m, _, clk, log := newWatched(t) // CheckPeriod 50 ms
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	m.watch = map[string]*watched{}
	m.ContainerStarted(pod, "c", "due", log)
	m.watchStarted()
	start := clk.Now()
	quiet := func(id string, wait, in time.Duration) {
		m.watch[id] = &watched{target: m.watch["due"].target, at: start, size: 100, wait: wait, next: start.Add(in)}
	}
	quiet("near", time.Second, 140*time.Millisecond)           // slack 100 ms: from 40 ms
	quiet("far", time.Second, 160*time.Millisecond)            // slack 100 ms: from 60 ms
	quiet("short", 200*time.Millisecond, 110*time.Millisecond) // slack 50 ms: from 60 ms
	clk.Step(50 * time.Millisecond)
	m.CheckGrowth(context.Background())
	checked := map[string]bool{}
	for id, w := range m.watch {
		checked[id] = w.at.Equal(clk.Now())
	}
	want := map[string]bool{"due": true, "near": true, "far": false, "short": false}
	if !maps.Equal(checked, want) {
		t.Errorf("checked %v, want %v", checked, want)
	}
}

// TestContainerStarted: a container started between passes is watched
// from CheckPeriod on, and rotated once over MaxSize.
func TestContainerStarted(t *testing.T) {
	m, rt, clk, log := newWatched(t)
	m.watch = map[string]*watched{} // as if c1 had exited
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	m.ContainerStarted(pod, "c", "c2", log)
	select {
	case <-m.wake:
	default:
		t.Error("the run loop was not woken")
	}
	if got := m.untilNextCheck(); got != 50*time.Millisecond {
		t.Errorf("next check in %v, want CheckPeriod", got)
	}
	clk.Step(50 * time.Millisecond)
	writeSize(t, log, 5000)
	m.CheckGrowth(context.Background())
	if len(rt.reopened) != 1 || rt.reopened[0] != "c2" {
		t.Errorf("reopened %v, want [c2]", rt.reopened)
	}

	off := New(rt, Options{Clock: clk}) // no MaxSize: rotation off
	off.ContainerStarted(pod, "c", "c3", log)
	if len(off.started) != 0 {
		t.Errorf("watching %d logs with rotation off", len(off.watch))
	}
}

// TestFailingRotationBacksOff: a log over MaxSize whose rotation keeps
// failing is retried after CheckPeriod, then after twice as long each time
// up to Interval, not every CheckPeriod; a pass that fails too does not
// start the back-off over; a success ends it.
func TestFailingRotationBacksOff(t *testing.T) {
	m, rt, clk, log := newWatched(t) // CheckPeriod 50 ms, Interval 10 s
	rt.clk = clk
	rt.reopenErr = errors.New("runtime unavailable")
	writeSize(t, log, 2000)
	ctx := context.Background()
	check := func(d time.Duration) {
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			clk.Step(m.opts.CheckPeriod)
			m.CheckGrowth(ctx)
		}
	}
	check(30 * time.Second)
	// 50 ms, then 100, 200, ... 6.4 s, then 10 s: 13 tries in 30 s, where
	// retrying every CheckPeriod makes 600.
	if n := len(rt.attempts); n < 5 || n > 14 {
		t.Fatalf("%d rotation attempts in 30 s, want the back-off's 5 to 14", n)
	}
	for i := 2; i < len(rt.attempts); i++ {
		prev, gap := rt.attempts[i-1].Sub(rt.attempts[i-2]), rt.attempts[i].Sub(rt.attempts[i-1])
		if gap < prev || gap > m.opts.Interval {
			t.Fatalf("attempt %d after %v (the one before after %v): want a gap that grows up to the %v interval", i, gap, prev, m.opts.Interval)
		}
	}
	if last := rt.attempts[len(rt.attempts)-1].Sub(rt.attempts[len(rt.attempts)-2]); last != m.opts.Interval {
		t.Errorf("back-off after 30 s = %v, want the interval %v", last, m.opts.Interval)
	}

	// A pass fails as well: the next check keeps the back-off.
	if err := m.RotateAll(ctx); err != nil {
		t.Fatal(err)
	}
	n := len(rt.attempts)
	check(time.Second)
	if got := len(rt.attempts); got != n {
		t.Errorf("%d attempts within a second of a failed pass, want none (back-off kept)", got-n)
	}

	// The runtime recovers: the next try rotates, and the back-off ends.
	rt.reopenErr = nil
	check(m.opts.Interval)
	if len(rt.reopened) != 1 {
		t.Fatalf("reopened %d times after the runtime recovered, want 1", len(rt.reopened))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.watch["c1"]; w == nil || w.retry != 0 {
		t.Errorf("watched log after a successful rotation = %+v, want no back-off", w)
	}
}
