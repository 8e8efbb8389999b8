package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// secretMarker is in a file beside the node log directory (and behind a
// symbolic link inside it): no answer may ever contain it.
const secretMarker = "SECRET-OUTSIDE-LOG-DIR"

// fuzzAPI is the kubelet API on fakes that never fail, with every
// endpoint on: all debugging handlers except profiling (whose CPU profile
// and trace take seconds by design).
type fuzzAPI struct {
	handler http.Handler
	authed  int
	summary *fakeSummary
}

// fuzzStreamer answers as a runtime that never fails: a missing pod is not
// found, a stopped container a bad request, any other target a stream
// server URL that nothing is asked of (no request is an upgrade).
type fuzzStreamer struct{}

func (fuzzStreamer) answer(t StreamTarget) (*url.URL, error) {
	switch {
	case t.Pod == "missing":
		return nil, fmt.Errorf("pod %q does not exist: %w", t.Pod, errdefs.ErrNotFound)
	case t.Container == "stopped":
		return nil, fmt.Errorf("container %q is not running: %w", t.Container, ErrBadRequest)
	}
	return url.Parse("http://127.0.0.1:1/stream/token")
}

func (s fuzzStreamer) Exec(_ context.Context, t StreamTarget, _ []string, _ StreamOptions) (*url.URL, error) {
	return s.answer(t)
}

func (s fuzzStreamer) Attach(_ context.Context, t StreamTarget, _ StreamOptions) (*url.URL, error) {
	return s.answer(t)
}

func (s fuzzStreamer) PortForward(_ context.Context, t StreamTarget, _ []int32) (*url.URL, error) {
	return s.answer(t)
}

func (s fuzzStreamer) Run(_ context.Context, t StreamTarget, _ []string) ([]byte, error) {
	if _, err := s.answer(t); err != nil {
		return nil, err
	}
	return []byte("ran"), nil
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	dir := f.TempDir()
	logDir := filepath.Join(dir, "log")
	for _, d := range []string{logDir, filepath.Join(logDir, "sub"), filepath.Join(dir, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	secret := filepath.Join(dir, "outside", "secret")
	files := map[string]string{
		filepath.Join(logDir, "syslog"):          "node log\n",
		filepath.Join(logDir, "sub", "kern.log"): "kernel\n",
		secret:                                   secretMarker + "\n",
		filepath.Join(dir, "0.log"):              "2026-01-02T03:04:00Z stdout F hello\n2026-01-02T03:04:01Z stderr P wor\n2026-01-02T03:04:01Z stderr F ld\nnot a cri line\n2026-01-02T03:04:02Z stdout F last\n",
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(logDir, "escape")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "outside"), filepath.Join(logDir, "escapedir")); err != nil {
		f.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	locate := func(_ context.Context, ns, name, ctr string, previous bool) (LogFile, error) {
		switch {
		case ns != "ns" || name != "web":
			return LogFile{}, fmt.Errorf("pod %q does not exist: %w", name, errdefs.ErrNotFound)
		case ctr != "main":
			return LogFile{}, fmt.Errorf("container %q not found in pod %q: %w", ctr, name, errdefs.ErrNotFound)
		case previous:
			return LogFile{}, fmt.Errorf("previous terminated container %q in pod %q not found: %w", ctr, name, ErrBadRequest)
		}
		// Not running: a follow reads to the end and returns.
		return LogFile{Path: filepath.Join(dir, "0.log")}, nil
	}
	a := &fuzzAPI{
		summary: &fakeSummary{},
	}
	ok := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
	}
	s := NewKubeletAPI(KubeletAPIOptions{
		Addr: "127.0.0.1:0",
		Auth: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				a.authed++
				next.ServeHTTP(w, r)
			})
		},
		Pods: func() []*v1.Pod { return []*v1.Pod{pod} },
		RunningPods: func(context.Context) ([]*v1.Pod, error) {
			return []*v1.Pod{pod}, nil
		},
		Config:       map[string]any{"port": 10250},
		Metrics:      ok("metric 1\n"),
		ProbeMetrics: ok("probe 1\n"),
		Checks:       []HealthCheck{{Name: "ping", Check: func() error { return nil }}},
		Logs:         locate,
		Streaming:    fuzzStreamer{},
		Clock:        instantClock{},
		Debug: &DebugOptions{
			EnableDebuggingHandlers: true,
			EnableSystemLogHandler:  true,
			LogDir:                  logDir,
			EnableDebugFlagsHandler: true,
		},
		Stats: StatsHandlers{Summary: a.summary, ResourceMetrics: ok("resource 1\n"), CadvisorMetrics: ok("cadvisor 1\n")},
	})
	a.handler = s.Handler()
	return a
}

// instantClock lets every wait of a log follow end at once: a followed
// log whose container does not run ends at its first idle poll.
type instantClock struct{ clock.RealClock }

func (instantClock) After(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Now()
	return c
}

var fuzzMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodOptions, http.MethodPatch, "PROPFIND"}

// FuzzKubeletAPI sends requests with arbitrary methods, paths, queries
// and bodies to every endpoint of the kubelet API on fakes. Properties:
// nothing panics; no answer is a server error (the fakes never fail, so a
// 5xx is a bug of the server); every request passes the authorization
// filter exactly once; nothing outside the node log directory is served
// by /logs/; /containerLogs honours limitBytes; the streaming endpoints
// never answer 200 to a request that is no upgrade, except /run.
func FuzzKubeletAPI(f *testing.F) {
	seeds := []struct {
		method      byte
		path, query string
		body        string
	}{
		{0, "/healthz", "", ""},
		{0, "/healthz/ping", "verbose", ""},
		{0, "/healthz", "exclude=ping&verbose=1", ""},
		{0, "/pods", "", ""},
		{0, "/runningpods/", "", ""},
		{0, "/configz", "", ""},
		{0, "/metrics", "", ""},
		{0, "/metrics/probes", "", ""},
		{0, "/metrics/resource", "", ""},
		{0, "/metrics/cadvisor", "", ""},
		{0, "/stats/summary", "only_cpu_and_memory=true", ""},
		{0, "/stats/summary", "only_cpu_and_memory=1", ""},
		{0, "/containerLogs/ns/web/main", "", ""},
		{0, "/containerLogs/ns/web/main", "tailLines=1&timestamps=true", ""},
		{0, "/containerLogs/ns/web/main", "follow=true&limitBytes=3", ""},
		{0, "/containerLogs/ns/web/main", "tail=all&stream=Stderr&sinceTime=2026-01-02T03:04:01Z", ""},
		{0, "/containerLogs/ns/web/main", "sinceSeconds=1&previous=1", ""},
		{0, "/containerLogs/ns/web/main", "tailLines=-1", ""},
		{0, "/containerLogs/ns/nope/main", "", ""},
		{0, "/containerLogs/ns/web", "", ""},
		{0, "/containerLogs/ns/web/main/extra", "", ""},
		{1, "/exec/ns/web/main", "command=ls&output=1", ""},
		{0, "/exec/ns/web/u1/main", "command=ls&command=-l&input=1&tty=1", ""},
		{1, "/exec/ns/missing/main", "command=ls&output=1", ""},
		{1, "/exec/ns/web/main", "output=1", ""},
		{0, "/attach/ns/web/main", "output=1&error=1", ""},
		{1, "/attach/ns/web/u1/stopped", "input=1", ""},
		{0, "/portForward/ns/web", "port=80", ""},
		{1, "/portForward/ns/web/u1", "port=80,8080", ""},
		{1, "/run/ns/web/main", "cmd=ls%20-l", ""},
		{1, "/run/ns/web/u1/main", "cmd=", ""},
		{0, "/run/ns/web/main", "cmd=ls", ""},
		{1, "/run/ns/web/stopped", "cmd=ls", ""},
		{0, "/logs/", "", ""},
		{0, "/logs/syslog", "", ""},
		{0, "/logs/sub/", "", ""},
		{0, "/logs/escape", "", ""},
		{0, "/logs/escapedir/secret", "", ""},
		{0, "/logs/../outside/secret", "", ""},
		{0, "/logs/%2e%2e/outside/secret", "", ""},
		{0, "/logs//sub/../../outside/secret", "", ""},
		{2, "/debug/flags/v", "", "3"},
		{2, "/debug/flags/v", "", "-1"},
		{2, "/debug/flags/v", "", "99999999999999999999"},
		{0, "/debug/flags/v", "", ""},
		{0, "/debug/pprof/", "", ""},
		{0, "/nope", "a=%zz", ""},
		{3, "//pods/../configz", ";;", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, []byte(s.body))
	}
	a := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, m byte, path, query string, body []byte) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		// What net/http's server would accept as a request target.
		u, err := url.ParseRequestURI(target)
		if err != nil || strings.ContainsAny(target, " \r\n\x00") {
			return
		}
		req := httptest.NewRequest(method, "/", bytes.NewReader(body))
		req.URL, req.RequestURI = u, target
		a.authed = 0
		rec := httptest.NewRecorder()
		a.handler.ServeHTTP(rec, req)
		if u.Path == "/debug/flags/v" {
			var l klog.Level
			_ = l.Set("0") // what a PUT set
		}
		a.summary.only = nil

		out := rec.Body.String()
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %q: a server error on fakes that never fail", method, target, rec.Code, out)
		}
		if a.authed != 1 {
			t.Fatalf("%s %q passed the authorization filter %d times, want 1", method, target, a.authed)
		}
		if strings.Contains(out, secretMarker) {
			t.Fatalf("%s %q served a file outside the node log directory: %q", method, target, out)
		}
		if rec.Code == http.StatusOK && strings.HasPrefix(u.Path, "/containerLogs/") {
			q := u.Query()
			if n, err := strconv.ParseInt(q.Get("limitBytes"), 10, 64); err == nil && int64(len(out)) > n {
				t.Fatalf("%s %q: %d bytes, over limitBytes %d", method, target, len(out), n)
			}
		}
		for _, p := range []string{"/exec/", "/attach/", "/portForward/"} {
			if rec.Code == http.StatusOK && strings.HasPrefix(u.Path, p) {
				t.Fatalf("%s %q: 200 to a streaming request without an upgrade", method, target)
			}
		}
	})
}

// FuzzParseCRILine: parsing never panics; a parsed line's message is the
// end of the line; and a parsed line written back in the CRI format
// parses to the same time, stream, partial flag and message.
func FuzzParseCRILine(f *testing.F) {
	for _, s := range []string{
		"2026-01-02T03:04:05.123456789Z stdout F hello world\n",
		"2026-01-02T03:04:05+02:00 stderr P part",
		"2026-01-02T03:04:05Z stdout F:x:y tagged",
		"2026-01-02T03:04:05Z stdout F",
		"2026-01-02T03:04:05Z stdout X what",
		"2026-01-02T03:04:05Z stdin F nope",
		"not-a-time stdout F x",
		"",
		" ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := parseCRILine(line)
		if err != nil {
			return
		}
		if !bytes.HasSuffix(bytes.TrimSuffix(line, []byte("\n")), l.msg) {
			t.Fatalf("parse(%q): message %q is not the end of the line", line, l.msg)
		}
		tag := "F"
		if l.partial {
			tag = "P"
		}
		written := append([]byte(l.ts.Format(time.RFC3339Nano)+" "+l.stream+" "+tag+" "), l.msg...)
		again, err := parseCRILine(written)
		if err != nil {
			t.Fatalf("parse(%q) ok, its rewrite %q: %v", line, written, err)
		}
		if !again.ts.Equal(l.ts) || again.stream != l.stream || again.partial != l.partial || !bytes.Equal(again.msg, l.msg) {
			t.Fatalf("parse(%q) = %+v, its rewrite %q = %+v", line, l, written, again)
		}
	})
}

// FuzzReadLog reads arbitrary log files with arbitrary options, as
// /containerLogs does. Properties: limitBytes bounds the output and cuts
// it, never changes it (a prefix of the unlimited output); tailLines
// gives an end of the whole output, with at most as many complete lines
// as asked.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte("2026-01-02T03:04:00Z stdout F one\n2026-01-02T03:04:01Z stderr P tw\n2026-01-02T03:04:01Z stderr F o\n"), int64(-1), int64(-1), false, "")
	f.Add([]byte("2026-01-02T03:04:00Z stdout F one\nbad\n\n2026-01-02T03:04:01Z stdout F two"), int64(1), int64(3), true, "Stdout")
	f.Add([]byte("2026-01-02T03:04:00Z stdout F a\n2026-01-02T03:04:00Z stdout F b\n2026-01-02T03:04:00Z stderr F c\n"), int64(0), int64(1), false, "Stderr")
	f.Add(bytes.Repeat([]byte("2026-01-02T03:04:00Z stdout P 0123456789"), 1000), int64(2), int64(-1), true, "All")
	dir := f.TempDir()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC))
	f.Fuzz(func(t *testing.T, data []byte, tail, limit int64, timestamps bool, stream string) {
		path := filepath.Join(dir, "0.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		q := url.Values{}
		if tail >= 0 {
			q.Set("tailLines", strconv.FormatInt(tail, 10))
		}
		if limit >= 0 {
			q.Set("limitBytes", strconv.FormatInt(limit, 10))
		}
		if timestamps {
			q.Set("timestamps", "true")
		}
		if stream != "" {
			q.Set("stream", stream)
		}
		opts, err := ParseLogOptions(q)
		if err != nil {
			return
		}
		read := func(o LogOptions) string {
			var out bytes.Buffer
			if err := ReadLog(context.Background(), LogFile{Path: path}, &o, &out, clk); err != nil {
				t.Fatalf("ReadLog(%+v): %v", o, err)
			}
			return out.String()
		}
		got := read(*opts)
		unlimited := *opts
		unlimited.LimitBytes = nil
		full := read(unlimited)
		if opts.LimitBytes != nil {
			if int64(len(got)) > *opts.LimitBytes {
				t.Fatalf("%d bytes with limitBytes %d", len(got), *opts.LimitBytes)
			}
			if !strings.HasPrefix(full, got) {
				t.Fatalf("limited output %q is not the start of %q", got, full)
			}
		}
		if opts.TailLines != nil {
			whole := unlimited
			whole.TailLines = nil
			all := read(whole)
			if !strings.HasSuffix(all, full) {
				t.Fatalf("tail %q is not the end of the whole output %q", full, all)
			}
			if n := int64(strings.Count(full, "\n")); n > *opts.TailLines {
				t.Fatalf("%d lines with tailLines %d", n, *opts.TailLines)
			}
		}
	})
}
