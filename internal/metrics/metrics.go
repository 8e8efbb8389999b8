// Package metrics holds heartlet's Prometheus registry and every metric it
// exports. Names, types and labels follow the upstream kubelet so existing
// dashboards and alerts keep working.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

const subsystem = "kubelet"

// Operation types for PodWorkerDuration, as upstream.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpSync   = "sync"
	OpKill   = "kill"
)

var (
	// RuntimeOperations counts CRI calls by operation_type (the CRI method
	// name in snake_case, e.g. "run_podsandbox", "create_container").
	RuntimeOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "runtime_operations_total",
		Help:      "Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})

	// RuntimeOperationsErrors counts failed CRI calls by operation_type.
	RuntimeOperationsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "runtime_operations_errors_total",
		Help:      "Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})

	// RuntimeOperationsDuration observes CRI call latency by operation_type.
	RuntimeOperationsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "runtime_operations_duration_seconds",
		Help:      "Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets:   prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"})

	// RunningPods is the number of pods that have a running sandbox.
	RunningPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "running_pods",
		Help:      "Number of pods that have a running pod sandbox",
	})

	// RunningContainers counts containers by container_state
	// (created, running, exited, unknown).
	RunningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "running_containers",
		Help:      "Number of containers currently running",
	}, []string{"container_state"})

	// PLEGRelistDuration observes the duration of one PLEG relist.
	PLEGRelistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pleg_relist_duration_seconds",
		Help:      "Duration in seconds for relisting pods in PLEG.",
		Buckets:   prometheus.DefBuckets,
	})

	// PLEGRelistInterval observes the time between the starts of two relists.
	PLEGRelistInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pleg_relist_interval_seconds",
		Help:      "Interval in seconds between relisting in PLEG.",
		Buckets:   prometheus.DefBuckets,
	})

	// PodWorkerDuration observes one pod sync by operation_type
	// (create, update, sync, kill).
	PodWorkerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_worker_duration_seconds",
		Help:      "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets:   prometheus.DefBuckets,
	}, []string{"operation_type"})
)

// Registry is heartlet's one registry; /metrics serves it.
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(
		RuntimeOperations,
		RuntimeOperationsErrors,
		RuntimeOperationsDuration,
		RunningPods,
		RunningContainers,
		PLEGRelistDuration,
		PLEGRelistInterval,
		PodWorkerDuration,
	)
}
