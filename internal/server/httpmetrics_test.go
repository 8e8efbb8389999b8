package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
)

func TestMetricPath(t *testing.T) {
	// Expected values: upstream getURLRootPath and its buckets.
	tests := []struct{ path, want string }{
		{"/healthz", "healthz"},
		{"/healthz/pleg", "healthz"},
		{"/pods", "pods"},
		{"/runningpods/", "runningpods"},
		{"/metrics", "metrics"},
		{"/metrics/probes", "metrics/probes"},
		{"/metrics/cadvisor", "metrics/cadvisor"},
		{"/metrics/unknown", "other"},
		{"/logs/syslog", "logs"},
		{"/debug/pprof/heap", "debug"},
		{"/containerLogs/ns/pod/c", "containerLogs"},
		{"/configz", "configz"},
		{"/", "other"},
		{"/no/such/path", "other"},
		{"/a-random-string-" + time.Now().String(), "other"},
	}
	for _, tt := range tests {
		if got := metricPath(tt.path); got != tt.want {
			t.Errorf("metricPath(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestLongRunning(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/exec/ns/pod/c", true},
		{"/attach/ns/pod/c", true},
		{"/portForward/ns/pod", true},
		{"/debug/pprof/profile", true},
		{"/run/ns/pod/c", false},
		{"/containerLogs/ns/pod/c", false},
		{"/stats/summary", false},
	}
	for _, tt := range tests {
		if got := longRunning[metricPath(tt.path)]; got != tt.want {
			t.Errorf("long running %q = %v, want %v", tt.path, got, tt.want)
		}
	}
	for method, want := range map[string]string{"GET": "GET", "PUT": "PUT", "PROPFIND": "other"} {
		if got := metricMethod(method); got != want {
			t.Errorf("metricMethod(%q) = %q, want %q", method, got, want)
		}
	}
}

func TestInstrument(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var inflight float64
	h := instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight = testutil.ToFloat64(metrics.HTTPInflightRequests.WithLabelValues("GET", "debug", "test", "true"))
		clk.Step(300 * time.Millisecond)
	}), "test", clk)
	// The registry is global: the durations start afresh when the test
	// runs again (go test -count).
	metrics.HTTPRequestsDuration.DeleteLabelValues("GET", "debug", "test", "true")
	requests := metrics.HTTPRequests.WithLabelValues("GET", "debug", "test", "true")
	before := testutil.ToFloat64(requests)
	for range 2 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil))
	}
	if got := testutil.ToFloat64(requests) - before; got != 2 {
		t.Errorf("requests counted = %v, want 2", got)
	}
	if inflight != 1 {
		t.Errorf("in-flight during the request = %v, want 1", inflight)
	}
	if got := testutil.ToFloat64(metrics.HTTPInflightRequests.WithLabelValues("GET", "debug", "test", "true")); got != 0 {
		t.Errorf("in-flight after = %v, want 0", got)
	}
	want := `
# HELP kubelet_http_requests_duration_seconds Duration in seconds to serve http requests
# TYPE kubelet_http_requests_duration_seconds histogram
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.005"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.01"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.025"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.05"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.1"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.25"} 0
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="0.5"} 2
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="1"} 2
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="2.5"} 2
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="5"} 2
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="10"} 2
kubelet_http_requests_duration_seconds_bucket{long_running="true",method="GET",path="debug",server_type="test",le="+Inf"} 2
kubelet_http_requests_duration_seconds_sum{long_running="true",method="GET",path="debug",server_type="test"} 0.6
kubelet_http_requests_duration_seconds_count{long_running="true",method="GET",path="debug",server_type="test"} 2
`
	if err := testutil.GatherAndCompare(onlyServerType(t, "test"), strings.NewReader(want), "kubelet_http_requests_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// onlyServerType gathers heartlet's registry keeping the series of one
// server_type.
func onlyServerType(t *testing.T, serverType string) prometheus.Gatherer {
	t.Helper()
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := metrics.Registry.Gather()
		for _, mf := range mfs {
			var keep []*dto.Metric
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "server_type" && l.GetValue() == serverType {
						keep = append(keep, m)
					}
				}
			}
			mf.Metric = keep
		}
		return mfs, err
	})
}
