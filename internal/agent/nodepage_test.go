package agent

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMeanDuration(t *testing.T) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_seconds"}, []string{"verb"})
	if _, ok := meanDuration(h); ok {
		t.Error("mean of nothing observed")
	}
	h.WithLabelValues("GET").Observe(0.010)
	h.WithLabelValues("GET").Observe(0.030)
	h.WithLabelValues("PATCH").Observe(0.050)
	d, ok := meanDuration(h)
	if !ok || d.Round(time.Millisecond) != 30*time.Millisecond {
		t.Errorf("mean = %v %v, want 30ms over every series", d, ok)
	}
}
