package server

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestParseLogOptions(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Validation as upstream pkg/apis/core/validation ValidatePodLogOptions;
	// the "tail" alias as upstream pkg/kubelet/server getContainerLogs.
	tests := []struct {
		query   string
		want    LogOptions
		wantErr string
	}{
		{"", LogOptions{}, ""},
		{"follow=true&previous=1&timestamps=true", LogOptions{Follow: true, Previous: true, Timestamps: true}, ""},
		{"follow", LogOptions{Follow: true}, ""},
		{"follow=false", LogOptions{}, ""},
		{"follow=yes", LogOptions{}, "follow"},
		{"tailLines=10", LogOptions{TailLines: ptr.To[int64](10)}, ""},
		{"tailLines=0", LogOptions{TailLines: ptr.To[int64](0)}, ""},
		{"tailLines=-1", LogOptions{}, "tailLines: must be greater than or equal to 0"},
		{"tailLines=x", LogOptions{}, "tailLines"},
		{"tail=5", LogOptions{TailLines: ptr.To[int64](5)}, ""},
		{"tail=all&tailLines=3", LogOptions{}, ""},
		{"limitBytes=100", LogOptions{LimitBytes: ptr.To[int64](100)}, ""},
		{"limitBytes=0", LogOptions{}, "limitBytes"},
		{"sinceSeconds=30", LogOptions{SinceSeconds: ptr.To[int64](30)}, ""},
		{"sinceSeconds=0", LogOptions{}, "sinceSeconds"},
		{"sinceTime=2026-01-02T03:04:05Z", LogOptions{SinceTime: &since}, ""},
		{"sinceTime=yesterday", LogOptions{}, "sinceTime"},
		{"sinceTime=2026-01-02T03:04:05Z&sinceSeconds=3", LogOptions{}, "at most one of sinceTime or sinceSeconds"},
		{"stream=Stdout", LogOptions{Stream: "Stdout"}, ""},
		{"stream=stdout", LogOptions{}, "stream"},
		{"stream=Stderr&tailLines=1", LogOptions{}, "tailLines is not supported"},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseLogOptions(q)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseLogOptions(%q) error = %v, want %q", tt.query, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseLogOptions(%q): %v", tt.query, err)
			continue
		}
		if !equalLogOptions(got, &tt.want) {
			t.Errorf("ParseLogOptions(%q) = %+v, want %+v", tt.query, got, tt.want)
		}
	}
}

func equalLogOptions(a, b *LogOptions) bool {
	eqInt := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqTime := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.Follow == b.Follow && a.Previous == b.Previous && a.Timestamps == b.Timestamps &&
		eqInt(a.TailLines, b.TailLines) && eqInt(a.LimitBytes, b.LimitBytes) && eqInt(a.SinceSeconds, b.SinceSeconds) &&
		eqTime(a.SinceTime, b.SinceTime) && a.Stream == b.Stream
}

func FuzzParseLogOptions(f *testing.F) {
	for _, s := range []string{"", "follow=true&tailLines=3", "tail=all", "sinceTime=2026-01-02T03:04:05Z",
		"limitBytes=9223372036854775807", "sinceSeconds=-1", "stream=Stderr", "previous=&timestamps=0", "tailLines=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		o, err := ParseLogOptions(q)
		if err != nil {
			if o != nil {
				t.Fatalf("ParseLogOptions(%q) returned options with error %v", raw, err)
			}
			return
		}
		// Accepted options satisfy the API's validation.
		if o.TailLines != nil && *o.TailLines < 0 {
			t.Errorf("negative tailLines accepted from %q", raw)
		}
		if o.LimitBytes != nil && *o.LimitBytes < 1 {
			t.Errorf("limitBytes < 1 accepted from %q", raw)
		}
		if o.SinceSeconds != nil && *o.SinceSeconds < 1 {
			t.Errorf("sinceSeconds < 1 accepted from %q", raw)
		}
		if o.SinceSeconds != nil && o.SinceTime != nil {
			t.Errorf("both since options accepted from %q", raw)
		}
		_ = o.since(time.Unix(0, 0))
	})
}

// testLog is a CRI log: a burst at t0, t0+1s, ... with partial lines and
// an unparsable line.
const testLog = `2026-01-02T03:04:00.000000001Z stdout F one
2026-01-02T03:04:01Z stderr F two
not a cri line
2026-01-02T03:04:02Z stdout P thr
2026-01-02T03:04:02.5Z stdout F ee
2026-01-02T03:04:03Z stdout F
2026-01-02T03:04:04Z stderr F five
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLog(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sinceTime := time.Date(2026, 1, 2, 3, 4, 2, 0, time.UTC)
	// Expected output as upstream pkg/kubelet/kuberuntime/logs ReadLogs:
	// partial lines joined, timestamps in RFC 3339 nano per message, tail
	// counted in file lines, limitBytes cutting mid-line.
	tests := []struct {
		name string
		opts LogOptions
		want string
	}{
		{"all", LogOptions{}, "one\ntwo\nthree\n\nfive\n"},
		{"timestamps", LogOptions{Timestamps: true},
			"2026-01-02T03:04:00.000000001Z one\n2026-01-02T03:04:01Z two\n2026-01-02T03:04:02Z thr2026-01-02T03:04:02.5Z ee\n2026-01-02T03:04:03Z \n2026-01-02T03:04:04Z five\n"},
		{"tail 2", LogOptions{TailLines: ptr.To[int64](2)}, "\nfive\n"},
		{"tail 4 starts at a partial line", LogOptions{TailLines: ptr.To[int64](4)}, "three\n\nfive\n"},
		{"tail 0", LogOptions{TailLines: ptr.To[int64](0)}, ""},
		{"tail more than lines", LogOptions{TailLines: ptr.To[int64](100)}, "one\ntwo\nthree\n\nfive\n"},
		{"limit", LogOptions{LimitBytes: ptr.To[int64](6)}, "one\ntw"},
		{"limit exact", LogOptions{LimitBytes: ptr.To[int64](4)}, "one\n"},
		{"since seconds", LogOptions{SinceSeconds: ptr.To[int64](2)}, "\nfive\n"},
		{"since time", LogOptions{SinceTime: &sinceTime}, "three\n\nfive\n"},
		{"stdout", LogOptions{Stream: "Stdout"}, "one\nthree\n\n"},
		{"stderr", LogOptions{Stream: "Stderr"}, "two\nfive\n"},
	}
	path := writeLog(t, testLog)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			clk := testingclock.NewFakeClock(now)
			if err := ReadLog(context.Background(), LogFile{Path: path}, &tt.opts, &out, clk); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("ReadLog = %q, want %q", out.String(), tt.want)
			}
		})
	}
}

func TestReadLogMissingFile(t *testing.T) {
	err := ReadLog(context.Background(), LogFile{Path: "/nonexistent/0.log"}, &LogOptions{}, &bytes.Buffer{}, testingclock.NewFakeClock(time.Now()))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/0.log") {
		t.Errorf("ReadLog of a missing file: %v, want an error naming it", err)
	}
}

// syncBuffer is a buffer that signals every write.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// followHarness runs ReadLog with Follow on a fake clock.
type followHarness struct {
	t       *testing.T
	clk     *testingclock.FakeClock
	out     *syncBuffer
	running atomic.Bool
	done    chan error
}

func startFollow(t *testing.T, path string, opts LogOptions) *followHarness {
	h := &followHarness{t: t, clk: testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)),
		out: &syncBuffer{wrote: make(chan struct{}, 1)}, done: make(chan error, 1)}
	h.running.Store(true)
	opts.Follow = true
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := LogFile{Path: path, Running: func(context.Context) (bool, error) { return h.running.Load(), nil }}
	go func() { h.done <- ReadLog(ctx, f, &opts, h.out, h.clk) }()
	return h
}

// tick waits until the reader waits on the clock, then advances it one
// poll period.
func (h *followHarness) tick() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !h.clk.HasWaiters() {
		select {
		case err := <-h.done:
			h.done <- err
			return
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatal("ReadLog never waited on the clock")
		}
		<-time.After(time.Millisecond)
	}
	h.clk.Step(followPoll)
}

// waitOutput advances the clock whenever the reader waits on it, until
// the output is want.
func (h *followHarness) waitOutput(want string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.out.String() != want {
		if time.Now().After(deadline) {
			h.t.Fatalf("output = %q, want %q", h.out.String(), want)
		}
		if h.clk.HasWaiters() {
			h.clk.Step(followPoll)
			continue
		}
		select {
		case <-h.out.wrote:
		case <-time.After(time.Millisecond):
		}
	}
}

// waitDone advances the clock whenever the reader waits on it, until
// ReadLog returns.
func (h *followHarness) waitDone() error {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-h.done:
			return err
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatal("following did not end")
		}
		if h.clk.HasWaiters() {
			h.clk.Step(followPoll)
			continue
		}
		<-time.After(time.Millisecond)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func TestReadLogFollow(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:00Z stdout F one\n")
	h := startFollow(t, path, LogOptions{TailLines: ptr.To[int64](1)})
	h.waitOutput("one\n")

	// A line written in two pieces appears once complete.
	appendFile(t, path, "2026-01-02T03:04:01Z stdout F tw")
	h.tick()
	appendFile(t, path, "o\n")
	h.tick()
	h.waitOutput("one\ntwo\n")

	// Rotation: the path is replaced by a new file; the rest of the old
	// one is read first, then the new one from its start.
	appendFile(t, path, "2026-01-02T03:04:02Z stdout F three\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("2026-01-02T03:04:03Z stderr F four\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.waitOutput("one\ntwo\nthree\nfour\n")

	// The container stops after one more line: following ends with it.
	appendFile(t, path, "2026-01-02T03:04:04Z stdout F five\n")
	h.running.Store(false)
	if err := h.waitDone(); err != nil {
		t.Fatal(err)
	}
	if got := h.out.String(); got != "one\ntwo\nthree\nfour\nfive\n" {
		t.Errorf("output = %q", got)
	}
}

func TestReadLogFollowLimit(t *testing.T) {
	path := writeLog(t, "2026-01-02T03:04:00Z stdout F one\n")
	h := startFollow(t, path, LogOptions{LimitBytes: ptr.To[int64](7)})
	h.waitOutput("one\n")
	appendFile(t, path, "2026-01-02T03:04:01Z stdout F two\n")
	if err := h.waitDone(); err != nil {
		t.Fatal(err)
	}
	if got := h.out.String(); got != "one\ntwo" {
		t.Errorf("output = %q, want %q", got, "one\ntwo")
	}
}

func TestReadLogFollowFinishedContainer(t *testing.T) {
	// Following the log of a container that has already exited ends at
	// the end of its file (upstream kuberuntime/logs ReadLogs returns once
	// the container is not running).
	path := writeLog(t, "2026-01-02T03:04:00Z stdout F last words\n")
	h := startFollow(t, path, LogOptions{})
	h.running.Store(false)
	if err := h.waitDone(); err != nil {
		t.Fatal(err)
	}
	if got := h.out.String(); got != "last words\n" {
		t.Errorf("output = %q", got)
	}
	if n := h.clk.Since(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)); n > followPoll {
		t.Errorf("following a finished container took %v of clock time, want at most one poll (%v)", n, followPoll)
	}
}

// TestReadLogFollowEndsOnRepeatedErrors: a follow whose running check
// keeps failing ends with that error after maxRunningErrors checks; a
// check that answers in between starts the count over.
func TestReadLogFollowEndsOnRepeatedErrors(t *testing.T) {
	errDown := errors.New("runtime down")
	path := writeLog(t, "2026-01-02T03:04:00Z stdout F one\n")
	var calls atomic.Int32
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC))
	h := &followHarness{t: t, clk: clk, out: &syncBuffer{wrote: make(chan struct{}, 1)}, done: make(chan error, 1)}
	f := LogFile{Path: path, Running: func(context.Context) (bool, error) {
		// Fails, except the third check: 2 + maxRunningErrors failures.
		if calls.Add(1) == 3 {
			return true, nil
		}
		return false, errDown
	}}
	go func() { h.done <- ReadLog(t.Context(), f, &LogOptions{Follow: true}, h.out, clk) }()
	err := h.waitDone()
	if !errors.Is(err, errDown) {
		t.Fatalf("follow ended with %v, want the running check's error", err)
	}
	if got, want := calls.Load(), int32(3+maxRunningErrors); got != want {
		t.Errorf("running checked %d times, want %d", got, want)
	}
	if got := h.out.String(); got != "one\n" {
		t.Errorf("output = %q", got)
	}
}
