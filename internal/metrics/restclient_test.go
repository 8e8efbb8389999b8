package metrics

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's hooks feed heartlet's registry under the upstream names.
func TestRESTClientMetrics(t *testing.T) {
	clientmetrics.RequestResult.Increment(context.Background(), "200", "GET", "127.0.0.1:6443")
	clientmetrics.RequestLatency.Observe(context.Background(), "GET", url.URL{Host: "127.0.0.1:6443"}, 30*time.Millisecond)
	if got := testutil.ToFloat64(RESTClientRequests.WithLabelValues("200", "GET", "127.0.0.1:6443")); got != 1 {
		t.Errorf("rest_client_requests_total = %v, want 1", got)
	}
	want := `
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 1
`
	if err := testutil.GatherAndCompare(Registry, strings.NewReader(want), "rest_client_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(RESTClientRequestDuration); n != 1 {
		t.Errorf("rest_client_request_duration_seconds has %d series, want 1", n)
	}
}
