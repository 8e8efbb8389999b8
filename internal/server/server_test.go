package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func testPods() []*v1.Pod {
	return []*v1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "u1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
			Status: v1.PodStatus{
				Phase: v1.PodRunning, PodIP: "10.88.0.4",
				ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, ContainerID: "containerd://c1"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", UID: "u2"},
			Status:     v1.PodStatus{Phase: v1.PodPending},
		},
	}
}

// startServer listens on 127.0.0.1:0, runs s until the test ends, and
// returns its base URL.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	if err := s.Listen(); err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	return "http://" + s.Addr()
}

func do(t *testing.T, method, target string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// switchable is a health check whose result the test sets.
type switchable struct{ err atomic.Pointer[error] }

func (s *switchable) set(err error) { s.err.Store(&err) }
func (s *switchable) check() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

func TestReadOnlyServer(t *testing.T) {
	pleg := &switchable{}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "kubelet_running_pods 2\n")
	})
	s := NewReadOnly("127.0.0.1:0", testPods, metrics,
		HealthCheck{Name: "ping", Check: func() error { return nil }},
		HealthCheck{Name: "pleg", Check: pleg.check})
	base := startServer(t, s)

	tests := []struct {
		name      string
		plegErr   error
		method    string
		path      string
		wantCode  int
		wantBody  string // exact when wantExact, else substrings separated by "|"
		wantExact bool
		notBody   string
	}{
		{name: "healthz ok", method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok", wantExact: true},
		{name: "healthz verbose", method: "GET", path: "/healthz?verbose", wantCode: 200,
			wantBody: "[+]ping ok\n[+]pleg ok\nhealthz check passed\n", wantExact: true},
		{name: "healthz failing", plegErr: errors.New("pleg was last seen active 5m ago"), method: "GET", path: "/healthz",
			wantCode: 500, wantBody: "[+]ping ok\n[-]pleg failed: reason withheld\nhealthz check failed", notBody: "5m ago"},
		{name: "healthz failing check excluded", plegErr: errors.New("down"), method: "GET", path: "/healthz?exclude=pleg&verbose",
			wantCode: 200, wantBody: "[+]pleg excluded: ok|healthz check passed"},
		{name: "healthz exclude unknown", method: "GET", path: "/healthz?exclude=nope&verbose",
			wantCode: 200, wantBody: `warn: some health checks cannot be excluded: no matches for "nope"`},
		{name: "single check ok", method: "GET", path: "/healthz/ping", wantCode: 200, wantBody: "ok", wantExact: true},
		{name: "single check failing shows the error", plegErr: errors.New("relist stuck"), method: "GET", path: "/healthz/pleg",
			wantCode: 500, wantBody: "internal server error: relist stuck"},
		{name: "unknown check", method: "GET", path: "/healthz/nope", wantCode: 404},
		{name: "metrics", method: "GET", path: "/metrics", wantCode: 200, wantBody: "kubelet_running_pods 2\n", wantExact: true},
		{name: "head pods", method: "HEAD", path: "/pods", wantCode: 200, wantBody: "", wantExact: true},
		{name: "post pods", method: "POST", path: "/pods", wantCode: 405},
		{name: "delete healthz", method: "DELETE", path: "/healthz", wantCode: 405},
		{name: "put metrics", method: "PUT", path: "/metrics", wantCode: 405},
		{name: "unknown path", method: "GET", path: "/nope", wantCode: 404},
		{name: "below pods", method: "GET", path: "/pods/a", wantCode: 404},
		{name: "root", method: "GET", path: "/", wantCode: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pleg.set(tt.plegErr)
			resp, body := do(t, tt.method, base+tt.path)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d; body %q", resp.StatusCode, tt.wantCode, body)
			}
			if tt.wantExact && body != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
			if !tt.wantExact && tt.wantBody != "" {
				for _, part := range strings.Split(tt.wantBody, "|") {
					if !strings.Contains(body, part) {
						t.Errorf("body = %q, want it to contain %q", body, part)
					}
				}
			}
			if tt.notBody != "" && strings.Contains(body, tt.notBody) {
				t.Errorf("body = %q, must not contain %q", body, tt.notBody)
			}
			if resp.StatusCode == 405 && !strings.Contains(resp.Header.Get("Allow"), "GET") {
				t.Errorf("Allow = %q, want GET", resp.Header.Get("Allow"))
			}
		})
	}
}

func TestReadOnlyPods(t *testing.T) {
	tests := []struct {
		name      string
		pods      PodLister
		wantNames []string
	}{
		{"two pods", testPods, []string{"a", "b"}},
		{"no pods", func() []*v1.Pod { return nil }, nil},
		{"nil lister", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := startServer(t, NewReadOnly("127.0.0.1:0", tt.pods, nil))
			resp, body := do(t, "GET", base+"/pods")
			if resp.StatusCode != 200 {
				t.Fatalf("status = %d; body %q", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type = %q", ct)
			}
			var list v1.PodList
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatalf("decode %q: %v", body, err)
			}
			if list.Kind != "PodList" || list.APIVersion != "v1" {
				t.Errorf("kind/apiVersion = %q/%q", list.Kind, list.APIVersion)
			}
			if !strings.Contains(body, `"items":[`) {
				t.Errorf("items is not a JSON array: %s", body)
			}
			var names []string
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
				t.Errorf("names = %v, want %v", names, tt.wantNames)
			}
			if len(list.Items) > 0 {
				st := list.Items[0].Status
				if st.Phase != v1.PodRunning || st.PodIP != "10.88.0.4" || len(st.ContainerStatuses) != 1 || !st.ContainerStatuses[0].Ready {
					t.Errorf("status not carried: %+v", st)
				}
			}
		})
	}
}

func TestReadOnlyWithoutMetricsHandler(t *testing.T) {
	base := startServer(t, NewReadOnly("127.0.0.1:0", testPods, nil))
	if resp, _ := do(t, "GET", base+"/metrics"); resp.StatusCode != 404 {
		t.Errorf("/metrics status = %d, want 404 without a handler", resp.StatusCode)
	}
}

func TestHealthzServer(t *testing.T) {
	tests := []struct {
		name     string
		checks   []HealthCheck
		path     string
		wantCode int
		wantBody string
	}{
		{"default ping", nil, "/healthz?verbose", 200, "[+]ping ok\nhealthz check passed\n"},
		{"failing", []HealthCheck{{Name: "syncloop", Check: func() error { return errors.New("stuck") }}}, "/healthz", 500,
			"[-]syncloop failed: reason withheld\nhealthz check failed\n"},
		{"no pods endpoint", nil, "/pods", 404, "404 page not found\n"},
		{"no metrics endpoint", nil, "/metrics", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := startServer(t, NewHealthz("127.0.0.1:0", tt.checks...))
			resp, body := do(t, "GET", base+tt.path)
			if resp.StatusCode != tt.wantCode || body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestRunPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()

	tests := []struct {
		name   string
		server *Server
		prefix string
	}{
		{"healthz", NewHealthz(addr), "healthz server: listen tcp " + addr + ": "},
		{"read-only", NewReadOnly(addr, testPods, nil), "read-only server: listen tcp " + addr + ": "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.server.Run(context.Background())
			if err == nil {
				t.Fatal("Run succeeded on a port in use")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tt.prefix) || !strings.HasSuffix(msg, "address already in use") {
				t.Errorf("error = %q, want %q...address already in use", msg, tt.prefix)
			}
			if tt.server.Addr() != "" {
				t.Errorf("Addr = %q after a failed listen", tt.server.Addr())
			}
		})
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	s := NewHealthz("127.0.0.1:0")
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatalf("second Listen: %v", err)
	}
	addr := s.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr = %q, want the bound port", addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	if resp, body := do(t, "GET", "http://"+addr+"/healthz"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("healthz = %d %q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("still accepting connections after shutdown")
	}
}

func TestHandlerWithoutListening(t *testing.T) {
	h := NewReadOnly("127.0.0.1:0", testPods, nil).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/pods", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"kind":"PodList"`) {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
}

func FuzzHealthzQuery(f *testing.F) {
	for _, q := range []string{"", "verbose", "exclude=pleg", "exclude=pleg&exclude=ping&verbose=1", "exclude=%zz", ";;&&==", "exclude=a%2Cb"} {
		f.Add(q)
	}
	checks := []HealthCheck{
		{Name: "ping", Check: func() error { return nil }},
		{Name: "pleg", Check: func() error { return errors.New("down") }},
	}
	h := NewHealthz("127.0.0.1:0", checks...).Handler()
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		values, _ := url.ParseQuery(query)
		plegExcluded := false
		for _, v := range values["exclude"] {
			if strings.TrimSpace(v) == "pleg" {
				plegExcluded = true
			}
		}
		_, verbose := values["verbose"]
		switch {
		case !plegExcluded:
			if rec.Code != 500 || !strings.Contains(body, "[-]pleg failed: reason withheld") || !strings.HasSuffix(body, "healthz check failed\n") {
				t.Fatalf("query %q: got %d %q, want 500 naming pleg", query, rec.Code, body)
			}
		case verbose:
			if rec.Code != 200 || !strings.Contains(body, "[+]pleg excluded: ok\n") || !strings.HasSuffix(body, "healthz check passed\n") {
				t.Fatalf("query %q: got %d %q, want verbose 200", query, rec.Code, body)
			}
		default:
			if rec.Code != 200 || body != "ok" {
				t.Fatalf("query %q: got %d %q, want 200 ok", query, rec.Code, body)
			}
		}
	})
}

func TestRequestsLoggedAtV4(t *testing.T) {
	tests := []struct {
		verbosity int
		want      bool
	}{
		{verbosity: 4, want: true},
		{verbosity: 3, want: false},
	}
	for _, tt := range tests {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(tt.verbosity), ktesting.BufferLogs(true)))
		s := NewHealthz("127.0.0.1:0")
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		do(t, "GET", "http://"+s.Addr()+"/nope")
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		found := strings.Contains(logs, `HTTP request server="healthz server" verb="GET" URI="/nope" status=404`)
		if found != tt.want {
			t.Errorf("verbosity %d: request logged = %v, want %v; logs:\n%s", tt.verbosity, found, tt.want, logs)
		}
	}
}

func TestReadOnlyHandleAddsPath(t *testing.T) {
	s := NewReadOnly("127.0.0.1:0", nil, nil)
	s.Handle("GET /metrics/probes", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("prober_probe_total 1\n"))
	}))
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/probes", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "prober_probe_total 1\n" {
		t.Fatalf("GET /metrics/probes = %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/other", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics/other = %d, want 404", rec.Code)
	}
}
