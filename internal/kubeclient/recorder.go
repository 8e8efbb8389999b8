package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeapi"
)

// EventComponent is the source component of heartlet's events. It is the
// upstream kubelet's, so that tools filtering on it keep working.
const EventComponent = "kubelet"

// eventLogVerbosity is the log level at which every recorded event is also
// logged.
const eventLogVerbosity = 3

const (
	// maxQueuedEvents bounds the events waiting to be handed to the
	// watchers, and those waiting to be written; more are dropped.
	maxQueuedEvents = 1000
	// maxTriesPerEvent is how often an event is tried before it is given
	// up.
	maxTriesPerEvent = 12
	// eventRetryDelay is the wait between two tries of an event; the first
	// wait is a random fraction of it, so that agents that lost the API
	// server together do not come back together.
	eventRetryDelay = 10 * time.Second
)

// EventRecorder records events about API objects. Its methods never
// block: an event that cannot be queued is dropped.
type EventRecorder interface {
	// Event records an event of type eventtype (v1.EventTypeNormal or
	// v1.EventTypeWarning) about object.
	Event(object runtime.Object, eventtype, reason, message string)
	// Eventf is Event with a message formatted as fmt.Sprintf does.
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
	// AnnotatedEventf is Eventf with annotations on the event.
	AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// NewEventRecorder returns a recorder whose events go to the API server
// (aggregated, deduplicated and spam-filtered as the upstream kubelet's,
// see correlator) with source {kubelet, nodeName}, and are logged at
// -v=3; every watcher also gets each event as it is recorded (before the
// aggregation). Call the returned function at shutdown: it stops the
// recorder and waits for its goroutines; events still queued are dropped.
// Canceling ctx stops it too.
func NewEventRecorder(ctx context.Context, kube Interface, nodeName string, watchers ...func(*v1.Event)) (EventRecorder, func()) {
	r := newEventRecorder(ctx, eventSink{kube.CoreV1()}, nodeName, clock.RealClock{}, watchers...)
	return r, r.start()
}

// eventWriter writes events to the API server.
type eventWriter interface {
	Create(ctx context.Context, ev *v1.Event) (*v1.Event, error)
	Patch(ctx context.Context, ev *v1.Event, data []byte) (*v1.Event, error)
}

// eventSink writes events to the API server, each in its own namespace.
type eventSink struct{ core kubeapi.CoreV1Interface }

func (s eventSink) Create(ctx context.Context, ev *v1.Event) (*v1.Event, error) {
	return s.core.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}

// Patch sends data, a strategic merge patch, to ev's event.
func (s eventSink) Patch(ctx context.Context, ev *v1.Event, data []byte) (*v1.Event, error) {
	return s.core.Events(ev.Namespace).Patch(ctx, ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}

// eventRecorder is the EventRecorder of NewEventRecorder. Recording
// queues the event (incoming); one goroutine logs it, hands it to the
// watchers and queues it for writing (toWrite); another correlates it
// and writes it, trying again on errors that may pass, so that a slow API
// server delays neither the callers nor the watchers.
type eventRecorder struct {
	source   v1.EventSource
	clock    clock.Clock
	sink     eventWriter
	watchers []func(*v1.Event)
	log      klog.Logger
	corr     *correlator

	ctx    context.Context // done when the recorder stops
	cancel context.CancelFunc

	incoming chan *v1.Event
	toWrite  chan *v1.Event

	// retryDelay is eventRetryDelay; jitter returns the fraction of it
	// waited before the second try, in [0, 1).
	retryDelay time.Duration
	jitter     func() float64

	wg sync.WaitGroup
}

func newEventRecorder(ctx context.Context, sink eventWriter, nodeName string, clk clock.Clock, watchers ...func(*v1.Event)) *eventRecorder {
	ctx, cancel := context.WithCancel(ctx)
	return &eventRecorder{
		source:     v1.EventSource{Component: EventComponent, Host: nodeName},
		clock:      clk,
		sink:       sink,
		watchers:   watchers,
		log:        klog.FromContext(ctx),
		corr:       newCorrelator(clk),
		ctx:        ctx,
		cancel:     cancel,
		incoming:   make(chan *v1.Event, maxQueuedEvents),
		toWrite:    make(chan *v1.Event, maxQueuedEvents),
		retryDelay: eventRetryDelay,
		jitter:     rand.Float64,
	}
}

// start starts the recorder's goroutines and returns the function that
// stops them.
func (r *eventRecorder) start() func() {
	r.wg.Add(2)
	go r.dispatch()
	go r.write()
	return func() {
		r.cancel()
		r.wg.Wait()
	}
}

func (r *eventRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.record(object, nil, eventtype, reason, message)
}

func (r *eventRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.record(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *eventRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.record(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// record makes the event and queues it, or drops it when the queue is
// full or the recorder stopped.
func (r *eventRecorder) record(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := reference.GetReference(kubeapi.Scheme, object)
	if err != nil {
		r.log.Error(err, "Could not construct reference, will not report event", "object", object, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	if eventtype != v1.EventTypeNormal && eventtype != v1.EventTypeWarning {
		r.log.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	ev := r.makeEvent(ref, annotations, eventtype, reason, message)
	if r.ctx.Err() != nil {
		r.log.V(4).Info("Event recorder stopped, dropped event", "event", klog.KObj(ev), "reason", reason)
		return
	}
	select {
	case r.incoming <- ev:
	default:
		r.log.Error(nil, "Unable to record event: too many queued events, dropped event", "event", ev)
	}
}

// makeEvent returns the event as client-go's recorder makes it: named
// after the object and the time, in the object's namespace (default when
// it has none), counted once.
func (r *eventRecorder) makeEvent(ref *v1.ObjectReference, annotations map[string]string, eventtype, reason, message string) *v1.Event {
	now := metav1.Time{Time: r.clock.Now()}
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        eventName(ref.Name, now.UnixNano()),
			Namespace:   namespace,
			Annotations: annotations,
		},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventtype,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
}

// eventName is <object name>.<unix nanos in hex>, or a random UUID when
// that is not a valid name.
func eventName(objectName string, unixNano int64) string {
	name := fmt.Sprintf("%s.%x", objectName, unixNano)
	if errs := apivalidation.NameIsDNSSubdomain(name, false); len(errs) > 0 {
		name = uuid.New().String()
	}
	return name
}

// dispatch logs each queued event, hands it to the watchers, then queues
// a copy of it for writing, dropping that copy when the write queue is
// full.
func (r *eventRecorder) dispatch() {
	defer r.wg.Done()
	logV := r.log.V(eventLogVerbosity)
	for {
		if r.ctx.Err() != nil {
			return
		}
		var ev *v1.Event
		select {
		case <-r.ctx.Done():
			return
		case ev = <-r.incoming:
		}
		logV.Info("Event occurred", "object", klog.KRef(ev.InvolvedObject.Namespace, ev.InvolvedObject.Name), "fieldPath", ev.InvolvedObject.FieldPath, "kind", ev.InvolvedObject.Kind, "apiVersion", ev.InvolvedObject.APIVersion, "type", ev.Type, "reason", ev.Reason, "message", ev.Message)
		toWrite := ev.DeepCopy()
		for _, w := range r.watchers {
			w(ev)
		}
		select {
		case r.toWrite <- toWrite:
		default:
			r.log.Error(nil, "Unable to write event: too many queued events, dropped event", "event", ev)
		}
	}
}

// write correlates each event queued for writing and writes the result.
func (r *eventRecorder) write() {
	defer r.wg.Done()
	for {
		if r.ctx.Err() != nil {
			return
		}
		select {
		case <-r.ctx.Done():
			return
		case ev := <-r.toWrite:
			r.writeEvent(ev)
		}
	}
}

// writeEvent correlates ev and writes the result, up to maxTriesPerEvent
// times eventRetryDelay apart (the first wait a random fraction of it)
// while the error may pass.
func (r *eventRecorder) writeEvent(ev *v1.Event) {
	out, patch, skip := r.corr.correlate(ev)
	if skip {
		return
	}
	for tries := 1; ; tries++ {
		if r.tryWrite(out, patch) {
			return
		}
		if tries >= maxTriesPerEvent {
			r.log.Error(nil, "Unable to write event (retry limit exceeded!)", "event", ev)
			return
		}
		delay := r.retryDelay
		if tries == 1 {
			delay = time.Duration(float64(delay) * r.jitter())
		}
		select {
		case <-r.ctx.Done():
			r.log.Error(nil, "Unable to write event (recorder stopped)", "event", ev)
			return
		case <-r.clock.After(delay):
		}
	}
}

// tryWrite writes ev once: a seen event (count above 1) is patched, and
// created anew when the API server no longer has it; a new one is
// created. It reports whether ev is done with: written, or refused for a
// reason another try would not change.
func (r *eventRecorder) tryWrite(ev *v1.Event, patch []byte) bool {
	var (
		written *v1.Event
		err     error
	)
	seen := ev.Count > 1
	if seen {
		written, err = r.sink.Patch(r.ctx, ev, patch)
	}
	if !seen || isNotFound(err) {
		ev.ResourceVersion = ""
		written, err = r.sink.Create(r.ctx, ev)
	}
	if err == nil {
		r.corr.written(written)
		return true
	}
	var (
		construction *rest.RequestConstructionError
		status       *apierrors.StatusError
	)
	switch {
	case errors.As(err, &construction):
		r.log.Error(err, "Unable to construct event (will not retry!)", "event", ev)
		return true
	case errors.As(err, &status):
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			r.log.V(5).Info("Server rejected event (will not retry!)", "event", ev, "err", err)
		} else {
			r.log.Error(err, "Server rejected event (will not retry!)", "event", ev)
		}
		return true
	}
	r.log.Error(err, "Unable to write event (may retry after sleeping)", "event", ev)
	return false
}

// isNotFound reports whether err is the API server's 404.
func isNotFound(err error) bool {
	var status *apierrors.StatusError
	return errors.As(err, &status) && status.Status().Code == http.StatusNotFound
}
