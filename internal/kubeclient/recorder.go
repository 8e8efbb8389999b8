package kubeclient

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/heartlet/heartlet/internal/kubeapi"
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
	b.StartRecordingToSink(eventSink{kube.CoreV1()})
	rec := b.NewRecorder(kubeapi.Scheme, v1.EventSource{Component: EventComponent, Host: nodeName})
	return rec, b.Shutdown
}

// eventSink writes a recorder's events to the API server, each in its own
// namespace, as client-go's sink for the typed core client does.
type eventSink struct{ core kubeapi.CoreV1Interface }

func (s eventSink) Create(ev *v1.Event) (*v1.Event, error) {
	return s.core.Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
}

func (s eventSink) Update(ev *v1.Event) (*v1.Event, error) {
	return s.core.Events(ev.Namespace).Update(context.Background(), ev, metav1.UpdateOptions{})
}

func (s eventSink) Patch(ev *v1.Event, data []byte) (*v1.Event, error) {
	return s.core.Events(ev.Namespace).Patch(context.Background(), ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
