package kubeclient

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventComponent is the source component of heartlet's events. It is the
// upstream kubelet's, so that tools filtering on it keep working.
const EventComponent = "kubelet"

// eventLogVerbosity is the log level at which every recorded event is also
// logged.
const eventLogVerbosity = 3

// NewEventRecorder returns a recorder whose events go to the API server
// (with client-go's aggregation, spam filtering and rate limiting) with
// source {kubelet, nodeName}, and are logged at -v=3; every watcher also
// gets each event as it is recorded (before the API server's aggregation).
// Call the returned function at shutdown: it stops the broadcaster; events
// still queued are dropped.
func NewEventRecorder(ctx context.Context, kube Interface, nodeName string, watchers ...func(*v1.Event)) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(eventLogVerbosity)
	for _, w := range watchers {
		b.StartEventWatcher(w)
	}
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: EventComponent, Host: nodeName})
	return rec, b.Shutdown
}
