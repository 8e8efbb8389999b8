package stats

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

func get(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/x", nil).WithContext(context.Background()))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	b, err := io.ReadAll(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestResourceMetrics(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	snap, err := p.collect(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative CPU time consumed by the container, in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="c",namespace="default",pod="b"} 2 @T
container_cpu_usage_seconds_total{container="main",namespace="default",pod="a"} 4 @T
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container, in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="c",namespace="default",pod="b"} 3.145728e+06 @T
container_memory_working_set_bytes{container="main",namespace="default",pod="a"} 6.8e+07 @T
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative CPU time consumed by the node, in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 100 @T
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node, in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.5e+09 @T
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative CPU time consumed by the pod, in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="a"} 5 @T
pod_cpu_usage_seconds_total{namespace="default",pod="b"} 2 @T
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod, in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="a"} 7.9e+07 @T
pod_memory_working_set_bytes{namespace="default",pod="b"} 3.145728e+06 @T
# HELP resource_scrape_error [STABLE] 1 if getting the container metrics failed, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] 1 if getting the container metrics failed, 0 otherwise (deprecated: use resource_scrape_error)
# TYPE scrape_error gauge
scrape_error 0
`
	want = strings.ReplaceAll(want, "@T", strconv.FormatInt(epoch.UnixMilli(), 10))
	c := &resourceCollector{snap: snap}
	names := []string{
		"container_cpu_usage_seconds_total", "container_memory_working_set_bytes", "node_cpu_usage_seconds_total",
		"node_memory_working_set_bytes", "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes",
		"resource_scrape_error", "scrape_error",
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "container_start_time_seconds"); n != 2 {
		t.Errorf("container_start_time_seconds: %d series, want 2", n)
	}

	// Usage samples carry the time they were read (milliseconds), the
	// start times none, as the kubelet serves them.
	out := get(t, p.ResourceMetricsHandler())
	ms := epoch.UnixMilli()
	for _, line := range []string{
		fmt.Sprintf("node_cpu_usage_seconds_total 100 %d\n", ms),
		fmt.Sprintf("node_memory_working_set_bytes 1.5e+09 %d\n", ms),
		fmt.Sprintf(`container_cpu_usage_seconds_total{container="main",namespace="default",pod="a"} 4 %d`+"\n", ms),
		fmt.Sprintf(`pod_memory_working_set_bytes{namespace="default",pod="a"} 7.9e+07 %d`+"\n", ms),
		"resource_scrape_error 0\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("/metrics/resource lacks %q:\n%s", line, out)
		}
	}
	if !strings.Contains(out, `container_start_time_seconds{container="main",namespace="default",pod="a"} `) {
		t.Errorf("/metrics/resource lacks the start time of main:\n%s", out)
	}
}

func TestResourceMetricsScrapeError(t *testing.T) {
	want := `
# HELP resource_scrape_error [STABLE] 1 if getting the container metrics failed, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	c := &resourceCollector{}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "resource_scrape_error"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c); n != 2 {
		t.Errorf("a failed collection yields %d series, want the 2 error gauges", n)
	}

	f := newFixture(t)
	p := f.provider()
	f.srv.InjectError("ListPodSandbox", errInjected)
	if out := get(t, p.ResourceMetricsHandler()); !strings.Contains(out, "resource_scrape_error 1\n") {
		t.Errorf("/metrics/resource after a runtime failure:\n%s", out)
	}
}

func TestCadvisorMetrics(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	out := get(t, p.CadvisorMetricsHandler())
	ms := epoch.UnixMilli()
	ctrA := "/" + podCgA + "/" + f.ctrA
	labels := func(container, id, image, name, namespace, pod string, extra ...string) string {
		l := []string{
			fmt.Sprintf("container=%q", container), fmt.Sprintf("id=%q", id), fmt.Sprintf("image=%q", image),
			fmt.Sprintf("name=%q", name), fmt.Sprintf("namespace=%q", namespace), fmt.Sprintf("pod=%q", pod),
		}
		for i := 0; i+1 < len(extra); i += 2 {
			l = append(l, fmt.Sprintf("%s=%q", extra[i], extra[i+1]))
		}
		sort.Strings(l) // the text format sorts labels by name
		return strings.Join(l, ",")
	}
	mainLabels := labels("main", ctrA, testImage, f.ctrA, "default", "a")
	mainFs := labels("main", ctrA, testImage, f.ctrA, "default", "a", "device", fakecri.ImageFsMountpoint)
	cLabels := labels("c", "/"+f.ctrB, testImage, f.ctrB, "default", "b")
	podLabels := labels("", "/"+podCgA, "", "", "default", "a")
	sbEth0 := labels("POD", "/"+podCgA+"/"+f.sbA, "", f.sbA, "default", "a", "interface", "eth0")
	nodeLabels := labels("", "/", "", "", "", "")
	nodeEth0 := labels("", "/", "", "", "", "", "interface", "eth0")
	for _, line := range []string{
		fmt.Sprintf("container_cpu_usage_seconds_total{%s} 4 %d", mainLabels, ms),
		fmt.Sprintf("container_memory_working_set_bytes{%s} 6.8e+07 %d", mainLabels, ms),
		fmt.Sprintf("container_memory_usage_bytes{%s} 7e+07 %d", mainLabels, ms),
		fmt.Sprintf("container_memory_rss{%s} 6.7108864e+07 %d", mainLabels, ms),
		fmt.Sprintf("container_spec_memory_limit_bytes{%s} 1.34217728e+08", mainLabels),
		fmt.Sprintf(`container_fs_usage_bytes{%s} 4096 %d`, mainFs, ms),
		fmt.Sprintf("container_cpu_usage_seconds_total{%s} 2 %d", cLabels, ms),
		fmt.Sprintf("container_cpu_usage_seconds_total{%s} 5 %d", podLabels, ms),
		fmt.Sprintf("container_memory_working_set_bytes{%s} 7.9e+07 %d", podLabels, ms),
		fmt.Sprintf(`container_network_receive_bytes_total{%s} 1000 %d`, sbEth0, ms),
		fmt.Sprintf(`container_network_transmit_bytes_total{%s} 2000 %d`, sbEth0, ms),
		fmt.Sprintf(`container_network_receive_packets_total{%s} 10 %d`, sbEth0, ms),
		fmt.Sprintf(`container_network_transmit_errors_total{%s} 2 %d`, sbEth0, ms),
		fmt.Sprintf(`container_cpu_usage_seconds_total{%s} 100 %d`, nodeLabels, ms),
		fmt.Sprintf(`container_network_receive_bytes_total{%s} 2.38735394e+08 %d`, nodeEth0, ms),
		"container_scrape_error 0",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("/metrics/cadvisor lacks %q", line)
		}
	}
	if t.Failed() {
		t.Logf("/metrics/cadvisor:\n%s", out)
	}
	// The loopback interface is left out.
	if strings.Contains(out, `interface="lo"`) {
		t.Error("/metrics/cadvisor reports the loopback interface")
	}
}

func TestImageNames(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	names := p.imageNames(context.Background())
	var id string
	for _, im := range f.srv.Images() {
		id = im.ID
	}
	tests := []struct{ image, want string }{
		{id, testImage},                      // containerd lists containers by image ID
		{testImage, testImage},               // a reference stays as it is
		{"sha256:unknown", "sha256:unknown"}, // an image gone from the runtime
	}
	for _, tt := range tests {
		if got := imageName(tt.image, names); got != tt.want {
			t.Errorf("imageName(%q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}
