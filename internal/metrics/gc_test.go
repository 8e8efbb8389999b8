package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The image GC counter has upstream's name, type and label, and passes
// Prometheus' lint rules.
func TestImageGarbageCollectedShape(t *testing.T) {
	ImageGarbageCollected.WithLabelValues(ImageGCReasonSpace)
	want := `
# HELP kubelet_image_garbage_collected_total Total number of images garbage collected by the kubelet, whether through disk usage or image age.
# TYPE kubelet_image_garbage_collected_total counter
kubelet_image_garbage_collected_total{reason="space"} 0
`
	before := testutil.ToFloat64(ImageGarbageCollected.WithLabelValues(ImageGCReasonSpace))
	if before != 0 {
		t.Skipf("another test already counted %v space collections", before)
	}
	if err := testutil.GatherAndCompare(Registry, strings.NewReader(want), "kubelet_image_garbage_collected_total"); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(Registry, "kubelet_image_garbage_collected_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
