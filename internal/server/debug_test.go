package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heartlet/heartlet/internal/errdefs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// debugServer is a kubelet API handler with the debugging endpoints as o
// configures them and every request let through.
func debugServer(o DebugOptions) http.Handler {
	return NewKubeletAPI(KubeletAPIOptions{
		Addr:        "127.0.0.1:0",
		Debug:       &o,
		RunningPods: func(context.Context) ([]*v1.Pod, error) { return nil, nil },
		Logs: func(context.Context, string, string, string, bool) (LogFile, error) {
			return LogFile{}, fmt.Errorf("no such pod: %w", errdefs.ErrNotFound)
		},
		Streaming: &fakeStreamer{},
	}).Handler()
}

func serve(h http.Handler, method, target string, body io.Reader) (int, string) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, "http://node"+target, body)
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// logDir makes a node log directory with a file, a subdirectory and
// symbolic links out of it, next to a secret that must never be served.
func logDir(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "log")
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "syslog"), "node log line\n")
	write(filepath.Join(dir, "pods", "a.log"), "pod log line\n")
	write(filepath.Join(base, "secret"), "SECRET\n")
	if err := os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("syslog", filepath.Join(dir, "inside")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestNodeLogs(t *testing.T) {
	h := debugServer(DebugOptions{EnableDebuggingHandlers: true, EnableSystemLogHandler: true, LogDir: logDir(t)})
	tests := []struct {
		target   string
		code     int // 0: anything but 200
		contains string
	}{
		{"/logs/", http.StatusOK, `<a href="syslog">syslog</a>`},
		{"/logs/syslog", http.StatusOK, "node log line"},
		{"/logs/pods/", http.StatusOK, `<a href="a.log">a.log</a>`},
		{"/logs/pods/a.log", http.StatusOK, "pod log line"},
		{"/logs/pods", http.StatusMovedPermanently, ""},
		{"/logs/inside", http.StatusOK, "node log line"},
		{"/logs/missing", http.StatusNotFound, ""},
		// Symbolic links leading out of the directory are not followed.
		{"/logs/escape", http.StatusForbidden, ""},
		{"/logs/up/secret", http.StatusForbidden, ""},
		// ".." never climbs out: the server redirects to the cleaned path
		// (outside /logs/) or finds nothing.
		{"/logs/../secret", 0, ""},
		{"/logs/pods/../../secret", 0, ""},
		{"/logs/%2e%2e/secret", 0, ""},
		{"/logs/pods/%2e%2e%2f%2e%2e%2fsecret", 0, ""},
		{"/logs/..%5csecret", 0, ""},
	}
	for _, tt := range tests {
		code, body := serve(h, http.MethodGet, tt.target, nil)
		if strings.Contains(body, "SECRET") {
			t.Errorf("GET %s served the file outside the log directory", tt.target)
		}
		if (tt.code == 0 && code == http.StatusOK) || (tt.code != 0 && code != tt.code) {
			t.Errorf("GET %s = %d, want %d; body %q", tt.target, code, tt.code, body)
		}
		if !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s body %q, want it to contain %q", tt.target, body, tt.contains)
		}
	}
	if code, _ := serve(h, http.MethodPost, "/logs/syslog", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /logs/syslog = %d, want 405", code)
	}
}

// No request path reaches a file outside the log directory.
func FuzzNodeLogsPath(f *testing.F) {
	for _, s := range []string{"syslog", "../secret", "..%2fsecret", "up/secret", "escape", "pods/../../secret", "%2e%2e/secret", "./../secret", "//secret", "\\..\\secret"} {
		f.Add(s)
	}
	dir := logDir(f)
	h := http.StripPrefix("/logs", nodeLogs(dir))
	f.Fuzz(func(t *testing.T, p string) {
		u, err := url.Parse("http://node/logs/" + p)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "http://node/", nil)
		req.URL = u
		h.ServeHTTP(rec, req)
		if strings.Contains(rec.Body.String(), "SECRET") {
			t.Fatalf("path %q served a file outside the log directory", p)
		}
	})
}

func TestDebugDisabled(t *testing.T) {
	tests := []struct {
		name   string
		o      DebugOptions
		target string
		want   string
	}{
		{"debugging off: logs", DebugOptions{EnableSystemLogHandler: true, EnableProfilingHandler: true}, "/logs/", "Debug endpoints are disabled."},
		{"debugging off: pprof", DebugOptions{EnableSystemLogHandler: true, EnableProfilingHandler: true}, "/debug/pprof/", "Debug endpoints are disabled."},
		{"debugging off: runningpods", DebugOptions{}, "/runningpods/", "Debug endpoints are disabled."},
		{"debugging off: containerLogs", DebugOptions{}, "/containerLogs/ns/pod/c", "Debug endpoints are disabled."},
		{"debugging off: exec", DebugOptions{}, "/exec/ns/pod/c?command=ls&output=1", "Debug endpoints are disabled."},
		{"debugging off: attach", DebugOptions{}, "/attach/ns/pod/uid/c?output=1", "Debug endpoints are disabled."},
		{"debugging off: portForward", DebugOptions{}, "/portForward/ns/pod", "Debug endpoints are disabled."},
		{"system logs off", DebugOptions{EnableDebuggingHandlers: true}, "/logs/syslog", "logs endpoint is disabled."},
		{"profiling off", DebugOptions{EnableDebuggingHandlers: true}, "/debug/pprof/heap", "profiling endpoint is disabled."},
		{"flags off", DebugOptions{EnableDebuggingHandlers: true}, "/debug/flags/v", "flags endpoint is disabled."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := serve(debugServer(tt.o), http.MethodGet, tt.target, nil)
			if code != http.StatusMethodNotAllowed || strings.TrimSpace(body) != tt.want {
				t.Errorf("GET %s = %d %q, want 405 %q", tt.target, code, body, tt.want)
			}
		})
	}
}

func TestProfiling(t *testing.T) {
	h := debugServer(DebugOptions{EnableDebuggingHandlers: true, EnableProfilingHandler: true})
	tests := []struct {
		target, contains string
	}{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/cmdline", "server.test"},
	}
	for _, tt := range tests {
		code, body := serve(h, http.MethodGet, tt.target, nil)
		if code != http.StatusOK || !strings.Contains(body, tt.contains) {
			t.Errorf("GET %s = %d, want 200 containing %q; body %.200q", tt.target, code, tt.contains, body)
		}
	}
	if code, _ := serve(h, http.MethodPost, "/debug/pprof/heap", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /debug/pprof/heap = %d, want 405", code)
	}
	// With debugging on, the other debugging paths are served as usual.
	if code, body := serve(h, http.MethodGet, "/runningpods/", nil); code != http.StatusOK {
		t.Errorf("GET /runningpods/ = %d %q, want 200", code, body)
	}
	if code, body := serve(h, http.MethodGet, "/containerLogs/ns/pod/c", nil); code != http.StatusNotFound {
		t.Errorf("GET /containerLogs/ns/pod/c = %d %q, want 404 from the locator", code, body)
	}
}

func TestDebugFlagsV(t *testing.T) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	old := fs.Lookup("v").Value.String()
	t.Cleanup(func() { _ = fs.Set("v", old) })
	h := debugServer(DebugOptions{EnableDebuggingHandlers: true, EnableDebugFlagsHandler: true})

	tests := []struct {
		method, body string
		code         int
		want         string
		v            string // klog's -v afterwards
	}{
		{http.MethodPut, "5", http.StatusOK, "successfully set klog.logging.verbosity to 5", "5"},
		{http.MethodPut, "2\n", http.StatusOK, "successfully set klog.logging.verbosity to 2", "2"},
		{http.MethodPut, "-1", http.StatusBadRequest, "failed set klog.logging.verbosity -1", "2"},
		{http.MethodPut, "x", http.StatusBadRequest, "failed set klog.logging.verbosity x", "2"},
		{http.MethodGet, "", http.StatusNotAcceptable, "unsupported http method", "2"},
	}
	for _, tt := range tests {
		code, body := serve(h, tt.method, "/debug/flags/v", strings.NewReader(tt.body))
		if code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("%s %q = %d %q, want %d %q", tt.method, tt.body, code, body, tt.code, tt.want)
		}
		if got := fs.Lookup("v").Value.String(); got != tt.v {
			t.Errorf("after %s %q: -v = %s, want %s", tt.method, tt.body, got, tt.v)
		}
	}
}
