package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/errdefs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func TestKubeletAPIHandlers(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "0.log")
	if err := os.WriteFile(logPath, []byte("2026-01-02T03:04:00Z stdout F hello\n2026-01-02T03:04:01Z stdout F world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
	var sawPrevious bool
	locate := func(_ context.Context, ns, name, ctr string, previous bool) (LogFile, error) {
		sawPrevious = sawPrevious || previous
		switch {
		case name != "web":
			return LogFile{}, fmt.Errorf("pod %q does not exist: %w", name, errdefs.ErrNotFound)
		case previous:
			return LogFile{}, fmt.Errorf("previous terminated container %q in pod %q not found: %w", ctr, name, ErrBadRequest)
		case ctr == "broken":
			return LogFile{}, errors.New("runtime down")
		}
		return LogFile{Path: logPath}, nil
	}
	var authed []string
	s := NewKubeletAPI(KubeletAPIOptions{
		Addr: "127.0.0.1:0",
		Auth: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				authed = append(authed, r.URL.Path)
				next.ServeHTTP(w, r)
			})
		},
		Pods: func() []*v1.Pod { return []*v1.Pod{pod} },
		RunningPods: func(context.Context) ([]*v1.Pod, error) {
			return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "running"}}}, nil
		},
		Config:       map[string]any{"port": 10250},
		Metrics:      http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metric 1\n") }),
		ProbeMetrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "probe 1\n") }),
		Logs:         locate,
		Clock:        testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)),
	})
	tests := []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/healthz", 200, "ok"},
		{"GET", "/pods", 200, `"name":"web"`},
		{"GET", "/runningpods/", 200, `"name":"running"`},
		// upstream wraps the configuration as {"kubeletconfig": ...}
		// (pkg/kubelet/kubelet.go: configz.New("kubeletconfig")).
		{"GET", "/configz", 200, `{"kubeletconfig":{"port":10250}}`},
		{"GET", "/metrics", 200, "metric 1"},
		{"GET", "/metrics/probes", 200, "probe 1"},
		{"GET", "/containerLogs/ns/web/main", 200, "hello\nworld\n"},
		{"GET", "/containerLogs/ns/web/main?tailLines=1&timestamps=true", 200, "2026-01-02T03:04:01Z world\n"},
		{"GET", "/containerLogs/ns/web/main?tailLines=-1", 400, "Invalid request"},
		{"GET", "/containerLogs/ns/nope/main", 404, `pod "nope" does not exist`},
		{"GET", "/containerLogs/ns/web/main?previous=true", 400, "previous terminated container"},
		{"GET", "/containerLogs/ns/web/broken", 500, "runtime down"},
		{"POST", "/containerLogs/ns/web/main", 405, ""},
		{"POST", "/pods", 405, ""},
		{"GET", "/containerLogs/ns/web", 404, ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
			t.Errorf("%s %s = %d %q, want %d containing %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
		}
	}
	if !sawPrevious {
		t.Error("previous=true did not reach the locator")
	}
	if len(authed) != len(tests) {
		t.Errorf("%d of %d requests went through the auth filter", len(authed), len(tests))
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/runningpods/", nil))
	var list v1.PodList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 {
		t.Errorf("/runningpods/ = %s (%v), want a v1 PodList of one pod", rec.Body.String(), err)
	}
}
