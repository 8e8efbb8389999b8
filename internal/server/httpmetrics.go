package server

import (
	"net/http"
	"strconv"
	"strings"

	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/metrics"
)

// metricPaths are the path labels of the HTTP request metrics: the
// kubelet's endpoint roots. Any other path is counted as "other", as
// upstream does, so that request paths cannot grow the label set.
var metricPaths = map[string]bool{
	"healthz": true, "pods": true, "runningpods": true, "configz": true,
	"metrics": true, "metrics/cadvisor": true, "metrics/probes": true, "metrics/resource": true,
	"stats": true, "spec": true, "logs": true, "debug": true, "containerLogs": true,
	"run": true, "exec": true, "attach": true, "portForward": true, "checkpoint": true,
	"flagz": true, "statusz": true,
}

// metricMethods are the method labels; any other method is "other".
var metricMethods = map[string]bool{
	http.MethodOptions: true, http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodDelete: true, http.MethodTrace: true, http.MethodConnect: true,
}

// longRunning are the path labels of long-running requests, as upstream
// (debug is /debug/pprof, whose profiles take seconds).
var longRunning = map[string]bool{"exec": true, "attach": true, "portForward": true, "debug": true}

// metricPath is the path label of a request path: its first element, or
// metrics/<name> under /metrics/, "other" when not a kubelet endpoint.
func metricPath(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	root := parts[0]
	if root == "metrics" && len(parts) > 1 {
		root += "/" + parts[1]
	}
	if metricPaths[root] {
		return root
	}
	return "other"
}

func metricMethod(method string) string {
	if metricMethods[method] {
		return method
	}
	return "other"
}

// instrument counts and times every request in the kubelet_http_* metrics
// with the given server_type.
func instrument(next http.Handler, serverType string, clk clock.PassiveClock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path := metricMethod(r.Method), metricPath(r.URL.Path)
		labels := []string{method, path, serverType, strconv.FormatBool(longRunning[path])}
		metrics.HTTPRequests.WithLabelValues(labels...).Inc()
		inflight := metrics.HTTPInflightRequests.WithLabelValues(labels...)
		inflight.Inc()
		defer inflight.Dec()
		start := clk.Now()
		defer func() {
			metrics.HTTPRequestsDuration.WithLabelValues(labels...).Observe(clk.Since(start).Seconds())
		}()
		next.ServeHTTP(w, r)
	})
}
