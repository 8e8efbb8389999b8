package metrics

import "github.com/prometheus/client_golang/prometheus"

// Server types of the HTTP metrics, as upstream: the read-only port and
// the authenticated kubelet API port.
const (
	ServerTypeReadOnly  = "readonly"
	ServerTypeReadWrite = "readwrite"
)

var httpLabels = []string{"method", "path", "server_type", "long_running"}

var (
	// HTTPRequests counts requests to the kubelet's HTTP servers by method,
	// path (the first path element, or metrics/<name>), server_type and
	// long_running.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "http_requests_total",
		Help:      "Number of the http requests received since the server started",
	}, httpLabels)

	// HTTPRequestsDuration observes the time to serve requests.
	HTTPRequestsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "http_requests_duration_seconds",
		Help:      "Duration in seconds to serve http requests",
		Buckets:   prometheus.DefBuckets,
	}, httpLabels)

	// HTTPInflightRequests is the number of requests being served.
	HTTPInflightRequests = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "http_inflight_requests",
		Help:      "Number of the inflight http requests",
	}, httpLabels)
)

func init() {
	Registry.MustRegister(HTTPRequests, HTTPRequestsDuration, HTTPInflightRequests)
}
