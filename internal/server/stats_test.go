package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fakeSummary records the onlyCPUAndMemory argument of its calls.
type fakeSummary struct {
	only []bool
	err  error
}

func (f *fakeSummary) Summary(_ context.Context, only bool) (*statsapi.Summary, error) {
	f.only = append(f.only, only)
	if f.err != nil {
		return nil, f.err
	}
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-a"}, Pods: []statsapi.PodStats{}}, nil
}

func text(s string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, s) })
}

func TestStatsEndpoints(t *testing.T) {
	sum := &fakeSummary{}
	var authed []string
	api := NewKubeletAPI(KubeletAPIOptions{
		Addr: "127.0.0.1:0",
		Auth: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				authed = append(authed, r.URL.Path)
				next.ServeHTTP(w, r)
			})
		},
		Metrics: text("kubelet_metric 1\n"),
		Stats:   StatsHandlers{Summary: sum, ResourceMetrics: text("resource 1\n"), CadvisorMetrics: text("cadvisor 1\n")},
	})
	ro := NewReadOnly("127.0.0.1:0", nil, text("kubelet_metric 1\n"))
	ro.InstallStats(StatsHandlers{Summary: sum, ResourceMetrics: text("resource 1\n"), CadvisorMetrics: text("cadvisor 1\n")})

	tests := []struct {
		method, path string
		code         int
		body         string
		only         []bool // the summary calls it makes
	}{
		{"GET", "/stats/summary", 200, `"nodeName":"node-a"`, []bool{false}},
		{"GET", "/stats/summary?only_cpu_and_memory=true", 200, `"pods":[]`, []bool{true}},
		{"GET", "/stats/summary?only_cpu_and_memory=false", 200, `"node"`, []bool{false}},
		{"GET", "/metrics/resource", 200, "resource 1", nil},
		{"GET", "/metrics/cadvisor", 200, "cadvisor 1", nil},
		{"GET", "/metrics", 200, "kubelet_metric 1", nil},
		{"POST", "/stats/summary", 405, "", nil},
		{"GET", "/stats/container", 404, "", nil},
	}
	for name, s := range map[string]*Server{"kubelet API": api, "read-only": ro} {
		for _, tt := range tests {
			sum.only = nil
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("%s: %s %s = %d %q, want %d containing %q", name, tt.method, tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
			if strings.Join(boolStrings(sum.only), ",") != strings.Join(boolStrings(tt.only), ",") {
				t.Errorf("%s: %s %s: summary calls (onlyCPUAndMemory) %v, want %v", name, tt.method, tt.path, sum.only, tt.only)
			}
		}
	}
	if len(authed) != len(tests) {
		t.Errorf("%d of %d kubelet API requests went through the auth filter", len(authed), len(tests))
	}

	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/stats/summary", nil))
	var got statsapi.Summary
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Node.NodeName != "node-a" {
		t.Errorf("/stats/summary = %s (%v), want a summary of node-a", rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}

	sum.err = errors.New("runtime down")
	rec = httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/stats/summary", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "runtime down") {
		t.Errorf("/stats/summary with a failing provider = %d %q, want 500 naming the error", rec.Code, rec.Body.String())
	}
}

func TestStatsEndpointsLeftOut(t *testing.T) {
	api := NewKubeletAPI(KubeletAPIOptions{Addr: "127.0.0.1:0"})
	for _, p := range []string{"/stats/summary", "/metrics/resource", "/metrics/cadvisor"} {
		rec := httptest.NewRecorder()
		api.Handler().ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without stats = %d, want 404", p, rec.Code)
		}
	}
}

func boolStrings(bs []bool) []string {
	var out []string
	for _, b := range bs {
		if b {
			out = append(out, "true")
		} else {
			out = append(out, "false")
		}
	}
	return out
}
