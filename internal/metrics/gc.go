package metrics

import "github.com/prometheus/client_golang/prometheus"

// Values of the reason label of ImageGarbageCollected, as upstream.
const (
	ImageGCReasonAge   = "age"
	ImageGCReasonSpace = "space"
)

// ImageGarbageCollected counts the images image garbage collection
// removed, by reason: "age" (unused longer than imageMaximumGCAge) or
// "space" (the image filesystem was above imageGCHighThresholdPercent).
var ImageGarbageCollected = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: subsystem,
	Name:      "image_garbage_collected_total",
	Help:      "Total number of images garbage collected by the kubelet, whether through disk usage or image age.",
}, []string{"reason"})

func init() {
	Registry.MustRegister(ImageGarbageCollected)
}
