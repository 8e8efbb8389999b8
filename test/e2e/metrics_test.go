//go:build e2e

package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
)

// promtoolCheck lints an exposition with the library that `promtool check
// metrics` runs (client_golang's promlint): it must parse and report no
// problem.
func promtoolCheck(t *testing.T, what string, exposition []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(exposition)).Lint()
	if err != nil {
		t.Errorf("lint metrics on %s: %v", what, err)
		return
	}
	for _, p := range problems {
		if p.Metric == "kubelet_pod_resize_duration_milliseconds" && strings.Contains(p.Text, "base unit") {
			// Upstream's unit, kept for compatibility.
			continue
		}
		if strings.HasPrefix(p.Metric, "kubelet_evented_pleg_connection_") && strings.HasSuffix(p.Metric, "_count") {
			// Upstream's names (counters ending in _count), kept for
			// compatibility.
			continue
		}
		t.Errorf("lint metrics on %s: %s: %s", what, p.Metric, p.Text)
	}
}

// scrape GETs url with c and returns the body of a 200 answer.
func scrape(t *testing.T, c *http.Client, url string) []byte {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %.300q (%v)", url, resp.StatusCode, body, err)
	}
	return body
}

// families parses a text exposition.
func families(t *testing.T, exposition []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(exposition))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return mfs
}

// sample is the value of the series of family name whose labels include
// labels (name=value pairs), summed over the matching series; for a
// histogram, its sample count. ok is false when no series matches.
func sample(mfs map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		ok = true
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v += m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v += float64(m.GetHistogram().GetSampleCount())
		default:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// insecureClient talks to the kubelet API's self-signed HTTPS port.
func insecureClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
}

// TestMetrics runs a standalone heartlet with two static pods (one
// pulling its image) and checks /metrics and /metrics/probes on both
// ports and the kubelet API's /metrics/resource and /metrics/cadvisor:
// promtool finds nothing to complain about, and the kubelet's series count
// what happened.
func TestMetrics(t *testing.T) {
	h := startHeartlet(t)
	for _, name := range []string{"metrics-a", "metrics-b"} {
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			c := shContainer("main", sleeper)
			if name == "metrics-b" {
				c.ImagePullPolicy = v1.PullAlways
			}
			p.Spec.Containers = []v1.Container{c}
		}))
	}
	h.waitRunning(t, "metrics-a")
	h.waitRunning(t, "metrics-b")

	ro := fmt.Sprintf("http://127.0.0.1:%d", h.roPort)
	api := fmt.Sprintf("https://127.0.0.1:%d", h.apiPort)
	plain, tlsClient := &http.Client{Timeout: 30 * time.Second}, insecureClient()

	// The pod gauges are set by housekeeping every 2 s.
	var mfs map[string]*dto.MetricFamily
	waitFor(t, 30*time.Second, "the pod gauges to count both pods", func() (bool, string) {
		mfs = families(t, scrape(t, plain, ro+"/metrics"))
		desired, _ := sample(mfs, "kubelet_desired_pods", "static", "true")
		active, _ := sample(mfs, "kubelet_active_pods", "static", "true")
		working, _ := sample(mfs, "kubelet_working_pods", "lifecycle", "sync", "config", "desired", "static", "true")
		return desired == 2 && active == 2 && working == 2, fmt.Sprintf("desired %v active %v working %v", desired, active, working)
	})

	t.Run("promtool", func(t *testing.T) {
		promtoolCheck(t, "the read-only /metrics", scrape(t, plain, ro+"/metrics"))
		promtoolCheck(t, "the read-only /metrics/probes", scrape(t, plain, ro+"/metrics/probes"))
		promtoolCheck(t, "the kubelet API /metrics", scrape(t, tlsClient, api+"/metrics"))
		promtoolCheck(t, "the kubelet API /metrics/probes", scrape(t, tlsClient, api+"/metrics/probes"))
		promtoolCheck(t, "the kubelet API /metrics/resource", scrape(t, tlsClient, api+"/metrics/resource"))
		promtoolCheck(t, "the kubelet API /metrics/cadvisor", scrape(t, tlsClient, api+"/metrics/cadvisor"))
	})

	t.Run("values", func(t *testing.T) {
		// A last scrape after the others, so the HTTP metrics count them.
		mfs := families(t, scrape(t, tlsClient, api+"/metrics"))
		atLeast := func(min float64, name string, labels ...string) {
			t.Helper()
			if v, ok := sample(mfs, name, labels...); !ok || v < min {
				t.Errorf("%s%v = %v (present %v), want at least %v", name, labels, v, ok, min)
			}
		}
		equal := func(want float64, name string, labels ...string) {
			t.Helper()
			if v, ok := sample(mfs, name, labels...); !ok || v != want {
				t.Errorf("%s%v = %v (present %v), want %v", name, labels, v, ok, want)
			}
		}
		equal(1, "kubelet_node_name", "node", nodeName)
		atLeast(2, "kubelet_started_pods_total")
		equal(0, "kubelet_started_pods_errors_total")
		atLeast(2, "kubelet_started_containers_total", "container_type", "container")
		atLeast(2, "kubelet_run_podsandbox_duration_seconds", "runtime_handler", "")
		atLeast(2, "kubelet_runtime_operations_total", "operation_type", "run_podsandbox")
		atLeast(2, "kubelet_pod_start_duration_seconds")
		atLeast(2, "kubelet_pod_start_total_duration_seconds")
		atLeast(2, "kubelet_pod_start_sli_duration_seconds")
		atLeast(1, "kubelet_image_pull_duration_seconds")
		equal(2, "kubelet_desired_pods", "static", "true")
		equal(0, "kubelet_desired_pods", "static", "")
		equal(2, "kubelet_active_pods", "static", "true")
		equal(0, "kubelet_mirror_pods")
		equal(2, "kubelet_working_pods", "lifecycle", "sync", "config", "desired", "static", "true")
		atLeast(2, "kubelet_running_pods")
		atLeast(1, "kubelet_http_requests_total", "method", "GET", "path", "metrics", "server_type", "readonly", "long_running", "false")
		atLeast(1, "kubelet_http_requests_total", "method", "GET", "path", "metrics/probes", "server_type", "readonly")
		atLeast(1, "kubelet_http_requests_total", "method", "GET", "path", "metrics", "server_type", "readwrite")
		atLeast(1, "kubelet_http_requests_duration_seconds", "path", "metrics", "server_type", "readwrite")
		// This very request is in flight while the exposition is written.
		equal(1, "kubelet_http_inflight_requests", "method", "GET", "path", "metrics", "server_type", "readwrite")
		if _, ok := sample(mfs, "kubelet_evictions"); ok {
			t.Error("kubelet_evictions has series, but no pod was evicted")
		}
		mean := func(name string) float64 {
			mf := mfs[name]
			if mf == nil || len(mf.GetMetric()) == 0 {
				return math.NaN()
			}
			hg := mf.GetMetric()[0].GetHistogram()
			return hg.GetSampleSum() / float64(hg.GetSampleCount())
		}
		// The pod start durations are those of pods starting here: more
		// than nothing, less than the wait for them; the SLI excludes
		// the pull, so it is not longer than the total.
		for _, name := range []string{"kubelet_pod_start_duration_seconds", "kubelet_pod_start_total_duration_seconds", "kubelet_pod_start_sli_duration_seconds"} {
			if m := mean(name); !(m > 0 && m < podStartTimeout.Seconds()) {
				t.Errorf("mean %s %v, want between 0 and %v", name, m, podStartTimeout.Seconds())
			}
		}
		if sli, total := mean("kubelet_pod_start_sli_duration_seconds"), mean("kubelet_pod_start_total_duration_seconds"); sli > total {
			t.Errorf("mean SLI start %v s > mean total start %v s", sli, total)
		}
		t.Logf("mean pod start %.3f s, total %.3f s, SLI %.3f s; image pull %.3f s", mean("kubelet_pod_start_duration_seconds"),
			mean("kubelet_pod_start_total_duration_seconds"), mean("kubelet_pod_start_sli_duration_seconds"), mean("kubelet_image_pull_duration_seconds"))
		// The process and Go runtime series every component serves.
		atLeast(1<<20, "process_resident_memory_bytes")
		atLeast(3, "process_open_fds")
		atLeast(1, "go_goroutines")
		atLeast(1, "go_memstats_alloc_bytes_total")
		atLeast(1, "go_gc_cycles_total_gc_cycles_total")
		if v, ok := sample(mfs, "kubelet_pleg_last_seen_seconds"); !ok || math.Abs(float64(time.Now().Unix())-v) > 30 {
			t.Errorf("kubelet_pleg_last_seen_seconds = %v (present %v), want within 30 s of now", v, ok)
		}
	})
}

// TestHealthzChecks checks the sub-checks of /healthz on the healthz port
// and the kubelet API.
func TestHealthzChecks(t *testing.T) {
	h := startHeartlet(t)
	checks := []string{"ping", "log", "syncloop", "pleg", "runtime"}
	for _, base := range []string{fmt.Sprintf("http://127.0.0.1:%d", h.healthzPort), fmt.Sprintf("https://127.0.0.1:%d", h.apiPort)} {
		c := insecureClient()
		waitFor(t, 30*time.Second, base+"/healthz?verbose to pass", func() (bool, string) {
			resp, err := c.Get(base + "/healthz?verbose")
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			for _, name := range checks {
				if !strings.Contains(string(body), "[+]"+name+" ok\n") {
					return false, fmt.Sprintf("%d %q", resp.StatusCode, body)
				}
			}
			return resp.StatusCode == http.StatusOK && strings.HasSuffix(string(body), "healthz check passed\n"), fmt.Sprintf("%d %q", resp.StatusCode, body)
		})
		for _, name := range checks {
			if body := scrape(t, c, base+"/healthz/"+name); string(body) != "ok" {
				t.Errorf("GET %s/healthz/%s = %q, want ok", base, name, body)
			}
		}
	}
}

// TestDebugHandlers checks /logs/, /debug/pprof/ and /debug/flags/v on the
// kubelet API of a standalone heartlet (anonymous, AlwaysAllow).
func TestDebugHandlers(t *testing.T) {
	h := startHeartlet(t)
	base := fmt.Sprintf("https://127.0.0.1:%d", h.apiPort)
	c := insecureClient()

	t.Run("logs", func(t *testing.T) {
		dir, err := os.MkdirTemp("/var/log", "heartlet-e2e-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "node.log"), []byte("a node log line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(dir)
		if body := scrape(t, c, base+"/logs/"); !strings.Contains(string(body), `href="`+name+`/"`) {
			t.Errorf("GET /logs/ does not list %s: %.500q", name, body)
		}
		if body := scrape(t, c, base+"/logs/"+name+"/"); !strings.Contains(string(body), `href="node.log"`) {
			t.Errorf("GET /logs/%s/ does not list node.log: %q", name, body)
		}
		if body := scrape(t, c, base+"/logs/"+name+"/node.log"); string(body) != "a node log line\n" {
			t.Errorf("GET /logs/%s/node.log = %q", name, body)
		}
		// Nothing outside /var/log.
		for _, p := range []string{"/logs/../etc/passwd", "/logs/%2e%2e/etc/passwd", "/logs/" + name + "/../../etc/passwd"} {
			resp, err := c.Get(base + p)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "root:") {
				t.Errorf("GET %s = %d %.200q, want no file outside /var/log", p, resp.StatusCode, body)
			}
		}
	})

	t.Run("pprof", func(t *testing.T) {
		if body := scrape(t, c, base+"/debug/pprof/"); !strings.Contains(string(body), "goroutine") {
			t.Errorf("GET /debug/pprof/ = %.300q, want the profile index", body)
		}
		if body := scrape(t, c, base+"/debug/pprof/goroutine?debug=1"); !strings.Contains(string(body), "goroutine profile:") {
			t.Errorf("GET /debug/pprof/goroutine?debug=1 = %.300q", body)
		}
		if body := scrape(t, c, base+"/debug/pprof/profile?seconds=1"); len(body) == 0 {
			t.Error("GET /debug/pprof/profile?seconds=1 returned nothing")
		}
	})

	t.Run("flags", func(t *testing.T) {
		put := func(v string) (int, string) {
			req, _ := http.NewRequest(http.MethodPut, base+"/debug/flags/v", strings.NewReader(v))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, body := put("6"); code != http.StatusOK || !strings.Contains(body, "successfully set klog.logging.verbosity to 6") {
			t.Errorf("PUT /debug/flags/v 6 = %d %q", code, body)
		}
		// At 4 heartlet logs every HTTP request.
		scrape(t, c, base+"/healthz?flags-e2e")
		waitFor(t, 10*time.Second, "a request logged at verbosity 4", func() (bool, string) {
			return h.logContains("flags-e2e"), "not in the log"
		})
		if code, body := put("2"); code != http.StatusOK {
			t.Errorf("PUT /debug/flags/v 2 = %d %q", code, body)
		}
		if code, _ := put("bad"); code != http.StatusBadRequest {
			t.Errorf("PUT /debug/flags/v bad = %d, want 400", code)
		}
	})
}

// TestDebugHandlersDisabled: with enableDebuggingHandlers false, /logs/,
// /debug/pprof/, /runningpods/ and /containerLogs answer 405 as upstream;
// with only the system log or profiling handler off, that one does.
func TestDebugHandlersDisabled(t *testing.T) {
	tests := []struct {
		config string
		paths  map[string]string
	}{
		{"enableDebuggingHandlers: false\n", map[string]string{
			"/logs/": "Debug endpoints are disabled.", "/debug/pprof/": "Debug endpoints are disabled.",
			"/runningpods/": "Debug endpoints are disabled.", "/containerLogs/default/p/c": "Debug endpoints are disabled.",
		}},
		{"enableSystemLogHandler: false\nenableProfilingHandler: false\n", map[string]string{
			"/logs/": "logs endpoint is disabled.", "/debug/pprof/": "profiling endpoint is disabled.",
		}},
	}
	for _, tt := range tests {
		h := newHeartlet(t, tt.config)
		t.Cleanup(h.cleanup)
		h.start()
		c := insecureClient()
		for p, want := range tt.paths {
			resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d%s", h.apiPort, p))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || strings.TrimSpace(string(body)) != want {
				t.Errorf("%q: GET %s = %d %q, want 405 %q", tt.config, p, resp.StatusCode, body, want)
			}
		}
		h.stop()
	}
}

// TestMetricsCluster checks the cluster-mode series through the API
// server's node proxy (the kubelet-client identity), and /logs/ that way.
func TestMetricsCluster(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("metrics-api", nil))
	waitAPIPodRunning(t, h, "metrics-api")

	var exposition []byte
	waitFor(t, 30*time.Second, "the API pod in the pod gauges and a status write measured", func() (bool, string) {
		out, err := kubectl("get", "--raw", "/api/v1/nodes/"+clusterNode+"/proxy/metrics")
		if err != nil {
			return false, err.Error()
		}
		exposition = []byte(out)
		mfs := families(t, exposition)
		desired, _ := sample(mfs, "kubelet_desired_pods", "static", "")
		synced, _ := sample(mfs, "kubelet_pod_status_sync_duration_seconds")
		return desired >= 1 && synced >= 1, fmt.Sprintf("desired_pods{static=\"\"} %v, status syncs %v", desired, synced)
	})
	promtoolCheck(t, "/metrics through the API server", exposition)
	mfs := families(t, exposition)
	for _, name := range []string{"kubelet_pod_start_sli_duration_seconds", "kubelet_started_pods_total", "rest_client_requests_total"} {
		if v, ok := sample(mfs, name); !ok || v < 1 {
			t.Errorf("%s = %v (present %v), want at least 1", name, v, ok)
		}
	}
	if v, ok := sample(mfs, "kubelet_node_name", "node", clusterNode); !ok || v != 1 {
		t.Errorf("kubelet_node_name{node=%q} = %v (present %v), want 1", clusterNode, v, ok)
	}
	if out, err := kubectl("get", "--raw", "/api/v1/nodes/"+clusterNode+"/proxy/logs/"); err != nil || !strings.Contains(out, "<a href=") {
		t.Errorf("/logs/ through the API server = %.300q (%v), want the /var/log listing", out, err)
	}

	// /logs/ is authorized as nodes/log, /debug/pprof/ as nodes/proxy:
	// kapi-proxy may use nodes/proxy but not nodes/log.
	if _, err := kubectlIn([]byte(proxyOnlyRBAC), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectlIn([]byte(proxyOnlyRBAC), "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Errorf("delete RBAC: %v", err)
		}
	})
	token := strings.TrimSpace(mustKubectl(t, "create", "token", "-n", "default", "kapi-proxy"))
	c := insecureClient()
	for _, r := range []struct {
		path string
		want int
		body string
	}{
		{"/logs/", http.StatusForbidden, "subresource(s)=[log]"},
		{"/debug/pprof/", http.StatusOK, "goroutine"},
	} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", h.apiPort, r.path), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.want || !strings.Contains(string(body), r.body) {
			t.Errorf("kapi-proxy GET %s = %d %.300q, want %d containing %q", r.path, resp.StatusCode, body, r.want, r.body)
		}
	}
}

// proxyOnlyRBAC is a ServiceAccount that may get nodes/proxy only.
const proxyOnlyRBAC = `apiVersion: v1
kind: ServiceAccount
metadata: {name: kapi-proxy, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: heartlet-e2e-kapi-proxy}
rules:
- apiGroups: [""]
  resources: [nodes/proxy]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: heartlet-e2e-kapi-proxy}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: heartlet-e2e-kapi-proxy}
subjects:
- {kind: ServiceAccount, name: kapi-proxy, namespace: default}
`
