package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets of upstream's kubelet_pod_resize_duration_milliseconds.
var podResizeDurationBuckets = []float64{10, 50, 100, 500, 1000, 2000, 5000, 10000, 20000, 30000, 60000, 120000, 300000, 600000}

// The in-place resize metrics, with upstream's names, labels and buckets.
var (
	// ContainerRequestedResizes counts the changes of a container's cpu
	// or memory request or limit that resizes asked for.
	ContainerRequestedResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "container_requested_resizes_total",
		Help:      "Number of requested resizes, counted at the container level. Different resources on the same container are counted separately. The 'requirement' label refers to 'limits' or 'requests'; the 'operation' label can be one of 'add', 'remove', 'increase' or 'decrease'.",
	}, []string{"resource", "requirement", "operation"})

	// PodResizeDuration observes the time to apply an accepted resize, in
	// milliseconds (upstream's unit), by success.
	PodResizeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "pod_resize_duration_milliseconds",
		Help:      "Duration in milliseconds to actuate a pod resize",
		Buckets:   podResizeDurationBuckets,
	}, []string{"success"})

	// PodPendingResizes is the number of pods whose resize is pending,
	// by reason ("deferred" or "infeasible").
	PodPendingResizes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "pod_pending_resizes",
		Help:      "Number of pending resizes for pods.",
	}, []string{"reason"})

	// PodInfeasibleResizes counts the resizes found infeasible, by
	// upstream's reason_detail.
	PodInfeasibleResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "pod_infeasible_resizes_total",
		Help:      "Number of infeasible resizes for pods.",
	}, []string{"reason_detail"})

	// PodInProgressResizes is the number of pods whose resize is in
	// progress.
	PodInProgressResizes = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "pod_in_progress_resizes",
		Help:      "Number of in-progress resizes for pods.",
	})

	// PodDeferredAcceptedResizes counts the deferred resizes accepted
	// later, by what retried them.
	PodDeferredAcceptedResizes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "pod_deferred_accepted_resizes_total",
		Help:      "Cumulative number of resizes that were accepted after being deferred.",
	}, []string{"retry_trigger"})
)

func init() {
	Registry.MustRegister(ContainerRequestedResizes, PodResizeDuration, PodPendingResizes,
		PodInfeasibleResizes, PodInProgressResizes, PodDeferredAcceptedResizes)
}

// Resize records in-place resizes in the metrics above (resize.Metrics).
// Its zero value is ready; it is safe for concurrent use.
type Resize struct {
	mu sync.Mutex // orders the pending gauge's updates
}

// RequestedResize counts one changed request or limit of a container.
func (*Resize) RequestedResize(resource, requirement, operation string) {
	ContainerRequestedResizes.WithLabelValues(resource, requirement, operation).Inc()
}

// ResizeDuration observes one attempt to apply a resize.
func (*Resize) ResizeDuration(d time.Duration, success bool) {
	s := "false"
	if success {
		s = "true"
	}
	PodResizeDuration.WithLabelValues(s).Observe(float64(d.Milliseconds()))
}

// InfeasibleResize counts an infeasible resize.
func (*Resize) InfeasibleResize(reasonDetail string) {
	PodInfeasibleResizes.WithLabelValues(reasonDetail).Inc()
}

// DeferredAccepted counts a deferred resize accepted by trigger.
func (*Resize) DeferredAccepted(trigger string) {
	PodDeferredAcceptedResizes.WithLabelValues(trigger).Inc()
}

// SetPending sets the numbers of pending resizes; a reason without any
// has no series.
func (r *Resize) SetPending(deferred, infeasible int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for reason, n := range map[string]int{"deferred": deferred, "infeasible": infeasible} {
		if n == 0 {
			PodPendingResizes.DeleteLabelValues(reason)
			continue
		}
		PodPendingResizes.WithLabelValues(reason).Set(float64(n))
	}
}

// SetInProgress sets the number of resizes in progress.
func (*Resize) SetInProgress(n int) {
	PodInProgressResizes.Set(float64(n))
}
