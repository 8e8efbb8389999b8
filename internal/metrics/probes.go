package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of ProbeResults, as upstream.
const (
	ProbeResultSuccessful = "successful"
	ProbeResultFailed     = "failed"
	ProbeResultUnknown    = "unknown"
)

var (
	// ProbeResults counts container probes by probe_type (Liveness,
	// Readiness, Startup), result (successful, failed, unknown) and the
	// container's identity.
	ProbeResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober",
		Name:      "probe_total",
		Help:      "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})

	// ProbeDuration observes how long probes that did not fail took, by
	// probe_type and the container's identity.
	ProbeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "prober",
		Name:      "probe_duration_seconds",
		Help:      "Duration in seconds for a probe response.",
		Buckets:   prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})

	processStartTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "process_start_time_seconds",
		Help: "Start time of the process since unix epoch in seconds.",
	})
)

// ProbesRegistry is served on /metrics/probes, apart from Registry, as
// upstream serves its prober metrics.
var ProbesRegistry = prometheus.NewRegistry()

func init() {
	processStartTime.Set(float64(time.Now().UnixNano()) / 1e9)
	ProbesRegistry.MustRegister(ProbeResults, ProbeDuration, processStartTime)
}
