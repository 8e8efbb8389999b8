package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

var (
	// RESTClientRequests counts the API server requests client-go made, by
	// HTTP status code, method and host, as upstream components do.
	RESTClientRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})

	// RESTClientRequestDuration observes API request latency by verb and
	// host.
	RESTClientRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds. Broken down by verb, and host.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0},
	}, []string{"verb", "host"})
)

type requestResult struct{}

func (requestResult) Increment(_ context.Context, code, method, host string) {
	RESTClientRequests.WithLabelValues(code, method, host).Inc()
}

type requestLatency struct{}

func (requestLatency) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	RESTClientRequestDuration.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

func init() {
	Registry.MustRegister(RESTClientRequests, RESTClientRequestDuration)
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestResult:  requestResult{},
		RequestLatency: requestLatency{},
	})
}
