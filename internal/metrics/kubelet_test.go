package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// Every metric passes Prometheus' own lint rules (promtool's).
func TestLint(t *testing.T) {
	touchAll()
	for name, reg := range map[string]*prometheus.Registry{"Registry": Registry, "ProbesRegistry": ProbesRegistry} {
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range problems {
			if p.Metric == "kubelet_evictions" && strings.Contains(p.Text, `"_total" suffix`) {
				// Upstream's name, kept for compatibility.
				continue
			}
			if strings.HasPrefix(p.Metric, "kubelet_evented_pleg_connection_") && strings.HasSuffix(p.Metric, "_count") {
				// Upstream's names (counters ending in _count), kept for
				// compatibility.
				continue
			}
			if p.Metric == "kubelet_pod_resize_duration_milliseconds" && strings.Contains(p.Text, "base unit") {
				// Upstream's unit, kept for compatibility.
				continue
			}
			t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
		}
	}
}

// touchAll creates a series of every vector so that it is gathered.
func touchAll() {
	RuntimeOperations.WithLabelValues("lint")
	RuntimeOperationsErrors.WithLabelValues("lint")
	RuntimeOperationsDuration.WithLabelValues("lint")
	RunningContainers.WithLabelValues("lint")
	PodWorkerDuration.WithLabelValues("lint")
	PodResizeDuration.WithLabelValues("lint")
	ContainerRequestedResizes.WithLabelValues("lint", "lint", "lint")
	PodInfeasibleResizes.WithLabelValues("lint")
	PodDeferredAcceptedResizes.WithLabelValues("lint")
	StartedContainers.WithLabelValues("lint")
	StartedContainersErrors.WithLabelValues("lint", "lint")
	RunPodSandboxDuration.WithLabelValues("lint")
	RunPodSandboxErrors.WithLabelValues("lint")
	Evictions.WithLabelValues("lint")
	ImagePullDuration.WithLabelValues("lint")
	HTTPRequests.WithLabelValues("GET", "lint", "readonly", "false")
	HTTPRequestsDuration.WithLabelValues("GET", "lint", "readonly", "false")
	HTTPInflightRequests.WithLabelValues("GET", "lint", "readonly", "false")
	SetPodCounts(PodCounts{})
	SetNodeName("lint")
	ProbeResults.WithLabelValues("Liveness", "successful", "c", "p", "ns", "uid")
	ProbeDuration.WithLabelValues("Liveness", "c", "p", "ns")
}

// Names, types, label names and buckets are upstream's
// (pkg/kubelet/metrics/metrics.go and pkg/kubelet/server/metrics).
func TestUpstreamShapes(t *testing.T) {
	touchAll()
	startup := []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	def := prometheus.DefBuckets
	tests := []struct {
		name    string
		typ     dto.MetricType
		labels  []string
		buckets []float64
	}{
		{"kubelet_node_name", dto.MetricType_GAUGE, []string{"node"}, nil},
		{"kubelet_pleg_last_seen_seconds", dto.MetricType_GAUGE, nil, nil},
		{"kubelet_evented_pleg_connection_error_count", dto.MetricType_COUNTER, nil, nil},
		{"kubelet_evented_pleg_connection_success_count", dto.MetricType_COUNTER, nil, nil},
		{"kubelet_pleg_relist_duration_seconds", dto.MetricType_HISTOGRAM, nil, def},
		{"kubelet_pleg_relist_interval_seconds", dto.MetricType_HISTOGRAM, nil, def},
		{"kubelet_pod_start_duration_seconds", dto.MetricType_HISTOGRAM, nil, startup},
		{"kubelet_pod_start_sli_duration_seconds", dto.MetricType_HISTOGRAM, nil, startup},
		{"kubelet_pod_start_total_duration_seconds", dto.MetricType_HISTOGRAM, nil, startup},
		{"kubelet_pod_worker_duration_seconds", dto.MetricType_HISTOGRAM, []string{"operation_type"}, def},
		{"kubelet_started_pods_total", dto.MetricType_COUNTER, nil, nil},
		{"kubelet_started_pods_errors_total", dto.MetricType_COUNTER, nil, nil},
		{"kubelet_started_containers_total", dto.MetricType_COUNTER, []string{"container_type"}, nil},
		{"kubelet_started_containers_errors_total", dto.MetricType_COUNTER, []string{"code", "container_type"}, nil},
		{"kubelet_run_podsandbox_duration_seconds", dto.MetricType_HISTOGRAM, []string{"runtime_handler"}, def},
		{"kubelet_run_podsandbox_errors_total", dto.MetricType_COUNTER, []string{"runtime_handler"}, nil},
		{"kubelet_evictions", dto.MetricType_COUNTER, []string{"eviction_signal"}, nil},
		{"kubelet_desired_pods", dto.MetricType_GAUGE, []string{"static"}, nil},
		{"kubelet_active_pods", dto.MetricType_GAUGE, []string{"static"}, nil},
		{"kubelet_mirror_pods", dto.MetricType_GAUGE, nil, nil},
		{"kubelet_working_pods", dto.MetricType_GAUGE, []string{"config", "lifecycle", "static"}, nil},
		{"kubelet_image_pull_duration_seconds", dto.MetricType_HISTOGRAM, []string{"image_size_in_bytes"},
			[]float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}},
		{"kubelet_pod_status_sync_duration_seconds", dto.MetricType_HISTOGRAM, nil, []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 20, 30, 45, 60}},
		{"kubelet_runtime_operations_total", dto.MetricType_COUNTER, []string{"operation_type"}, nil},
		{"kubelet_runtime_operations_errors_total", dto.MetricType_COUNTER, []string{"operation_type"}, nil},
		{"kubelet_runtime_operations_duration_seconds", dto.MetricType_HISTOGRAM, []string{"operation_type"}, prometheus.ExponentialBuckets(.005, 2.5, 14)},
		{"kubelet_running_pods", dto.MetricType_GAUGE, nil, nil},
		{"kubelet_running_containers", dto.MetricType_GAUGE, []string{"container_state"}, nil},
		{"kubelet_http_requests_total", dto.MetricType_COUNTER, []string{"long_running", "method", "path", "server_type"}, nil},
		{"kubelet_http_requests_duration_seconds", dto.MetricType_HISTOGRAM, []string{"long_running", "method", "path", "server_type"}, def},
		{"kubelet_http_inflight_requests", dto.MetricType_GAUGE, []string{"long_running", "method", "path", "server_type"}, nil},
	}
	byName := gatherByName(t)
	for _, tt := range tests {
		mf := byName[tt.name]
		if mf == nil {
			t.Errorf("%s: not registered", tt.name)
			continue
		}
		if mf.GetType() != tt.typ {
			t.Errorf("%s: type %v, want %v", tt.name, mf.GetType(), tt.typ)
		}
		m := mf.GetMetric()[0]
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName())
		}
		if !slices.Equal(labels, tt.labels) {
			t.Errorf("%s: labels %v, want %v", tt.name, labels, tt.labels)
		}
		if tt.buckets != nil {
			var got []float64
			for _, b := range m.GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			if !slices.Equal(got, tt.buckets) {
				t.Errorf("%s: buckets %v, want %v", tt.name, got, tt.buckets)
			}
		}
	}
}

func TestImageSizeBucket(t *testing.T) {
	tests := []struct {
		size uint64
		want string
	}{
		{0, "N/A"},
		{1, "0-10MB"},
		{10 << 20, "0-10MB"},
		{10<<20 + 1, "10MB-100MB"},
		{300 << 20, "100MB-500MB"},
		{600 << 20, "500MB-1GB"},
		{2 << 30, "1GB-5GB"},
		{50 << 30, "40GB-60GB"},
		{200 << 30, "GT100GB"},
	}
	for _, tt := range tests {
		if got := ImageSizeBucket(tt.size); got != tt.want {
			t.Errorf("ImageSizeBucket(%d) = %q, want %q", tt.size, got, tt.want)
		}
	}
}

func TestSetPodCounts(t *testing.T) {
	SetPodCounts(PodCounts{
		DesiredStatic: 2, DesiredRegular: 3, ActiveStatic: 1, ActiveRegular: 3, Mirror: 2,
		Working: map[WorkingPodKey]int{
			{Lifecycle: LifecycleSync, Config: ConfigDesired, Static: "true"}:               1,
			{Lifecycle: LifecycleSync, Config: ConfigDesired, Static: ""}:                   3,
			{Lifecycle: LifecycleTerminating, Config: ConfigRuntimeOnly, Static: "unknown"}: 1,
		},
	})
	want := `
# HELP kubelet_desired_pods The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.
# TYPE kubelet_desired_pods gauge
kubelet_desired_pods{static=""} 3
kubelet_desired_pods{static="true"} 2
# HELP kubelet_active_pods The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.
# TYPE kubelet_active_pods gauge
kubelet_active_pods{static=""} 3
kubelet_active_pods{static="true"} 1
# HELP kubelet_mirror_pods The number of mirror pods the kubelet will try to create (one per admitted static pod)
# TYPE kubelet_mirror_pods gauge
kubelet_mirror_pods 2
`
	if err := testutil.GatherAndCompare(Registry, strings.NewReader(want), "kubelet_desired_pods", "kubelet_active_pods", "kubelet_mirror_pods"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(WorkingPods); n != 15 {
		t.Errorf("kubelet_working_pods has %d series, want 15 (every valid combination)", n)
	}
	for _, tt := range []struct {
		lifecycle, config, static string
		want                      float64
	}{
		{"sync", "desired", "true", 1},
		{"sync", "desired", "", 3},
		{"terminating", "runtime_only", "unknown", 1},
		{"terminated", "orphan", "", 0},
	} {
		if got := testutil.ToFloat64(WorkingPods.WithLabelValues(tt.lifecycle, tt.config, tt.static)); got != tt.want {
			t.Errorf("working_pods{%s,%s,%q} = %v, want %v", tt.lifecycle, tt.config, tt.static, got, tt.want)
		}
	}
}

func TestSetNodeName(t *testing.T) {
	SetNodeName("old")
	SetNodeName("node-a")
	want := `
# HELP kubelet_node_name The node's name. The count is always 1.
# TYPE kubelet_node_name gauge
kubelet_node_name{node="node-a"} 1
`
	if err := testutil.GatherAndCompare(Registry, strings.NewReader(want), "kubelet_node_name"); err != nil {
		t.Error(err)
	}
}

// The resize metrics have upstream's names, types, labels and buckets.
func TestResizeMetricsShape(t *testing.T) {
	ContainerRequestedResizes.Reset()
	PodResizeDuration.Reset()
	PodInfeasibleResizes.Reset()
	PodDeferredAcceptedResizes.Reset()
	var r Resize
	r.RequestedResize("cpu", "limits", "increase")
	r.ResizeDuration(42*time.Millisecond, true)
	r.InfeasibleResize("static_pod")
	r.DeferredAccepted("pod_resized")
	r.SetPending(2, 0)
	r.SetInProgress(1)
	want := `
# HELP kubelet_pod_deferred_accepted_resizes_total Cumulative number of resizes that were accepted after being deferred.
# TYPE kubelet_pod_deferred_accepted_resizes_total counter
kubelet_pod_deferred_accepted_resizes_total{retry_trigger="pod_resized"} 1
# HELP kubelet_pod_in_progress_resizes Number of in-progress resizes for pods.
# TYPE kubelet_pod_in_progress_resizes gauge
kubelet_pod_in_progress_resizes 1
# HELP kubelet_pod_infeasible_resizes_total Number of infeasible resizes for pods.
# TYPE kubelet_pod_infeasible_resizes_total counter
kubelet_pod_infeasible_resizes_total{reason_detail="static_pod"} 1
# HELP kubelet_pod_pending_resizes Number of pending resizes for pods.
# TYPE kubelet_pod_pending_resizes gauge
kubelet_pod_pending_resizes{reason="deferred"} 2
`
	if err := testutil.GatherAndCompare(Registry, strings.NewReader(want), "kubelet_pod_deferred_accepted_resizes_total",
		"kubelet_pod_in_progress_resizes", "kubelet_pod_infeasible_resizes_total", "kubelet_pod_pending_resizes"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(ContainerRequestedResizes.WithLabelValues("cpu", "limits", "increase")); got != 1 {
		t.Errorf("requested resizes = %v, want 1", got)
	}
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubelet_pod_resize_duration_milliseconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		var bounds []float64
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if !slices.Equal(bounds, podResizeDurationBuckets) || h.GetSampleSum() != 42 || mf.GetMetric()[0].GetLabel()[0].GetValue() != "true" {
			t.Errorf("duration histogram: bounds %v sum %v labels %v", bounds, h.GetSampleSum(), mf.GetMetric()[0].GetLabel())
		}
	}
	// No deferred resize left: no series for it.
	r.SetPending(0, 0)
	if n := testutil.CollectAndCount(PodPendingResizes); n != 0 {
		t.Errorf("%d pending series with none pending, want 0", n)
	}
}

// gatherByName gathers Registry, by family name.
func gatherByName(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}
