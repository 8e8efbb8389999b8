package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Values of the container_type label of the started containers metrics, as
// upstream: sidecars are init containers.
const (
	ContainerTypeContainer = "container"
	ContainerTypeInit      = "init_container"
	ContainerTypeEphemeral = "ephemeral_container"
)

// Bucket boundaries of upstream's pod startup and image pull histograms.
var (
	podStartupDurationBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	imagePullDurationBuckets  = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	podStatusSyncBuckets      = []float64{0.010, 0.050, 0.100, 0.500, 1, 5, 10, 20, 30, 45, 60}
)

var (
	// NodeName is 1 with the node's name as its label.
	NodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "node_name",
		Help:      "The node's name. The count is always 1.",
	}, []string{"node"})

	// PLEGLastSeen is the Unix time of the start of the last successful
	// relist, for alerts on time() - kubelet_pleg_last_seen_seconds.
	PLEGLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "pleg_last_seen_seconds",
		Help:      "Timestamp in seconds when PLEG was last seen active.",
	})

	// EventedPLEGConnError counts failures of the container runtime's
	// event stream (CRI GetContainerEvents) the PLEG follows.
	EventedPLEGConnError = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "evented_pleg_connection_error_count",
		Help:      "Failures of the container runtime's event stream (CRI GetContainerEvents) followed by the PLEG.",
	})
	// EventedPLEGConnSuccess counts the container event streams opened.
	EventedPLEGConnSuccess = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "evented_pleg_connection_success_count",
		Help:      "Container runtime event streams (CRI GetContainerEvents) opened by the PLEG.",
	})

	// PodStartDuration observes the time from heartlet first seeing a pod to
	// the pod's phase becoming Running.
	PodStartDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_start_duration_seconds",
		Help:      "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
		Buckets:   podStartupDurationBuckets,
	})

	// PodStartSLIDuration observes the time from a pod's creation to all
	// its containers running, less image pulls and init containers; pods
	// with volumes other than secrets, config maps, downward API, emptyDir
	// and projected volumes are left out, as upstream.
	PodStartSLIDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_start_sli_duration_seconds",
		Help:      "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		Buckets:   podStartupDurationBuckets,
	})

	// PodStartTotalDuration observes the time from a pod's creation to all
	// its containers running, image pulls included.
	PodStartTotalDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_start_total_duration_seconds",
		Help:      "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		Buckets:   podStartupDurationBuckets,
	})

	// StartedPods counts pod sandboxes heartlet tried to create.
	StartedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "started_pods_total",
		Help:      "Cumulative number of pods started",
	})

	// StartedPodsErrors counts pod sandboxes that failed to be created.
	StartedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "started_pods_errors_total",
		Help:      "Cumulative number of errors when starting pods",
	})

	// StartedContainers counts containers heartlet tried to start (image
	// pull, create, start), by container_type.
	StartedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "started_containers_total",
		Help:      "Cumulative number of containers started",
	}, []string{"container_type"})

	// StartedContainersErrors counts failed container starts by
	// container_type and code, the waiting reason (ErrImagePull,
	// CreateContainerError, RunContainerError, ...).
	StartedContainersErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "started_containers_errors_total",
		Help:      "Cumulative number of errors when starting containers",
	}, []string{"container_type", "code"})

	// RunPodSandboxDuration observes RunPodSandbox calls by runtime_handler.
	RunPodSandboxDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "run_podsandbox_duration_seconds",
		Help:      "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.",
		Buckets:   prometheus.DefBuckets,
	}, []string{"runtime_handler"})

	// RunPodSandboxErrors counts failed RunPodSandbox calls by
	// runtime_handler.
	RunPodSandboxErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "run_podsandbox_errors_total",
		Help:      "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.",
	}, []string{"runtime_handler"})

	// Evictions counts pod evictions by eviction_signal (internal/eviction);
	// a signal has a series from its first eviction on.
	Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "evictions",
		Help:      "Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})

	// DesiredPods is the number of pods the sources ask for, by static
	// ("true" for static pods, "" for API pods).
	DesiredPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "desired_pods",
		Help:      "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.",
	}, []string{"static"})

	// ActivePods is the number of admitted desired pods that have not
	// terminated, by static.
	ActivePods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "active_pods",
		Help:      "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.",
	}, []string{"static"})

	// MirrorPods is the number of mirror pods in the API for this node.
	MirrorPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "mirror_pods",
		Help:      "The number of mirror pods the kubelet will try to create (one per admitted static pod)",
	})

	// WorkingPods is the number of pods the pod workers know, by lifecycle
	// (sync, terminating, terminated), config (desired, orphan,
	// runtime_only) and static.
	WorkingPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "working_pods",
		Help:      "Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.",
	}, []string{"lifecycle", "config", "static"})

	// ImagePullDuration observes successful image pulls by the image's
	// size bucket.
	ImagePullDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "image_pull_duration_seconds",
		Help:      "Duration in seconds to pull an image.",
		Buckets:   imagePullDurationBuckets,
	}, []string{"image_size_in_bytes"})

	// PodStatusSyncDuration observes the time from a pod status change to
	// its successful write to the API server.
	PodStatusSyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_status_sync_duration_seconds",
		Help:      "Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is successfully updated for that pod, even if multiple intevening changes to pod status occur.",
		Buckets:   podStatusSyncBuckets,
	})
)

func init() {
	Registry.MustRegister(
		NodeName,
		PLEGLastSeen,
		EventedPLEGConnError,
		EventedPLEGConnSuccess,
		PodStartDuration,
		PodStartSLIDuration,
		PodStartTotalDuration,
		StartedPods,
		StartedPodsErrors,
		StartedContainers,
		StartedContainersErrors,
		RunPodSandboxDuration,
		RunPodSandboxErrors,
		Evictions,
		DesiredPods,
		ActivePods,
		MirrorPods,
		WorkingPods,
		ImagePullDuration,
		PodStatusSyncDuration,
	)
}

// SetNodeName sets kubelet_node_name{node=name} to 1.
func SetNodeName(name string) {
	NodeName.Reset()
	NodeName.WithLabelValues(name).Set(1)
}

// StaticLabel is the value of the static label: "true" or "".
func StaticLabel(static bool) string {
	if static {
		return "true"
	}
	return ""
}

// imageSizeBuckets are upstream's labels of image_pull_duration_seconds:
// a size above lower gets label.
var imageSizeBuckets = []struct {
	lower uint64
	label string
}{
	{0, "0-10MB"},
	{10 << 20, "10MB-100MB"},
	{100 << 20, "100MB-500MB"},
	{500 << 20, "500MB-1GB"},
	{1 << 30, "1GB-5GB"},
	{5 << 30, "5GB-10GB"},
	{10 << 30, "10GB-20GB"},
	{20 << 30, "20GB-30GB"},
	{30 << 30, "30GB-40GB"},
	{40 << 30, "40GB-60GB"},
	{60 << 30, "60GB-100GB"},
	{100 << 30, "GT100GB"},
}

// ImageSizeBucket is the image_size_in_bytes label of an image of size
// bytes; "N/A" when the size is unknown (0).
func ImageSizeBucket(size uint64) string {
	if size == 0 {
		return "N/A"
	}
	for i := len(imageSizeBuckets) - 1; i >= 0; i-- {
		if size > imageSizeBuckets[i].lower {
			return imageSizeBuckets[i].label
		}
	}
	return ""
}

// WorkingPodKey is one series of kubelet_working_pods.
type WorkingPodKey struct {
	// Lifecycle is "sync", "terminating" or "terminated".
	Lifecycle string
	// Config is "desired", "orphan" or "runtime_only".
	Config string
	// Static is "true", "" or, for runtime_only pods, "unknown".
	Static string
}

// Lifecycle values of WorkingPodKey.
const (
	LifecycleSync        = "sync"
	LifecycleTerminating = "terminating"
	LifecycleTerminated  = "terminated"
)

// Config values of WorkingPodKey.
const (
	ConfigDesired     = "desired"
	ConfigOrphan      = "orphan"
	ConfigRuntimeOnly = "runtime_only"
)

// StaticUnknown is the static label of runtime_only pods.
const StaticUnknown = "unknown"

// PodCounts are the pod gauges of one housekeeping pass.
type PodCounts struct {
	DesiredStatic, DesiredRegular int
	ActiveStatic, ActiveRegular   int
	Mirror                        int
	Working                       map[WorkingPodKey]int
}

// SetPodCounts sets the desired, active, mirror and working pods gauges.
// Every valid working pods series is set, zero when no pod is in it, as
// upstream.
func SetPodCounts(c PodCounts) {
	DesiredPods.WithLabelValues("true").Set(float64(c.DesiredStatic))
	DesiredPods.WithLabelValues("").Set(float64(c.DesiredRegular))
	ActivePods.WithLabelValues("true").Set(float64(c.ActiveStatic))
	ActivePods.WithLabelValues("").Set(float64(c.ActiveRegular))
	MirrorPods.Set(float64(c.Mirror))
	configs := []struct{ config, static string }{
		{ConfigDesired, "true"},
		{ConfigDesired, ""},
		{ConfigOrphan, "true"},
		{ConfigOrphan, ""},
		{ConfigRuntimeOnly, "unknown"},
	}
	for _, cfg := range configs {
		for _, lc := range []string{LifecycleSync, LifecycleTerminating, LifecycleTerminated} {
			n := c.Working[WorkingPodKey{Lifecycle: lc, Config: cfg.config, Static: cfg.static}]
			WorkingPods.WithLabelValues(lc, cfg.config, cfg.static).Set(float64(n))
		}
	}
}
