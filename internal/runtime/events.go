package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// ErrEventsUnimplemented is returned by WatchContainerEvents when the
// runtime does not implement the CRI GetContainerEvents stream (containerd
// 1.x, for one).
var ErrEventsUnimplemented = errors.New("runtime does not implement GetContainerEvents")

// ContainerEventType is the kind of change a container event reports.
type ContainerEventType string

// The CRI container event types.
const (
	ContainerCreatedEvent ContainerEventType = "ContainerCreated"
	ContainerStartedEvent ContainerEventType = "ContainerStarted"
	ContainerStoppedEvent ContainerEventType = "ContainerStopped"
	ContainerDeletedEvent ContainerEventType = "ContainerDeleted"
)

// ContainerEvent is one change of a container pushed by the runtime, with
// the state of its pod at the time of the event.
type ContainerEvent struct {
	ContainerID string
	Type        ContainerEventType
	// CreatedAt is the runtime's time of the event.
	CreatedAt time.Time
	// Pod is the pod's sandbox and containers as the event reports them,
	// in ListPods' form (states, IDs, names). Its UID is empty when the
	// event carries nothing labelled with a pod UID.
	Pod *PodStatus
}

// WatchContainerEvents opens the runtime's container event stream and
// calls connected once it is open, then f for every event, from the
// calling goroutine, until the stream fails or ctx is done. It returns
// ErrEventsUnimplemented (wrapped) when the runtime does not offer the
// stream, ctx.Err() when ctx ends it, else the stream's error.
func (r *Runtime) WatchContainerEvents(ctx context.Context, connected func(), f func(ContainerEvent)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse)
	done := make(chan error, 1)
	go func() {
		done <- r.rs.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			if connected != nil {
				connected()
			}
		})
	}()
	logger := klog.FromContext(ctx)
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if status.Code(err) == codes.Unimplemented {
				return fmt.Errorf("%w: %w", ErrEventsUnimplemented, err)
			}
			if err == nil {
				err = errors.New("container event stream ended")
			}
			return fmt.Errorf("container event stream: %w", err)
		case resp := <-ch:
			r.learnEvent(resp)
			f(decodeContainerEvent(logger, resp))
		}
	}
}

// learnEvent records in the index the states and statuses an event
// reports, so that the pod's next GetPodStatus reports them without
// waiting for the next full list.
func (r *Runtime) learnEvent(resp *runtimeapi.ContainerEventResponse) {
	if resp.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		// Forgotten first: the index ignores the state of an object it
		// does not know.
		r.idx.remove(resp.GetContainerId())
	}
	if sb := resp.GetPodSandboxStatus(); sb != nil {
		// Only the state: a runtime may leave out of an event's sandbox
		// status what its status call reports (the IPs).
		r.idx.setSandboxState(sb.GetId(), sb.GetState())
	}
	for _, st := range resp.GetContainersStatuses() {
		r.idx.setContainerState(st.GetId(), st.GetState(), st)
	}
}

// decodeContainerEvent converts one CRI container event.
func decodeContainerEvent(logger klog.Logger, resp *runtimeapi.ContainerEventResponse) ContainerEvent {
	e := ContainerEvent{
		ContainerID: resp.GetContainerId(),
		Type:        containerEventType(resp.GetContainerEventType()),
		CreatedAt:   fromNanos(resp.GetCreatedAt()),
	}
	p := &PodStatus{}
	setLabels := func(labels map[string]string) {
		if p.UID == "" && labels[LabelPodUID] != "" {
			p.UID = types.UID(labels[LabelPodUID])
			p.Name, p.Namespace = labels[LabelPodName], labels[LabelPodNamespace]
		}
	}
	sandboxID := ""
	if sb := resp.GetPodSandboxStatus(); sb != nil {
		sandboxID = sb.GetId()
		setLabels(sb.GetLabels())
		p.Sandboxes = append(p.Sandboxes, decodeSandboxStatus(sb))
	}
	for _, st := range resp.GetContainersStatuses() {
		if st == nil {
			continue
		}
		setLabels(st.GetLabels())
		cs := decodeContainerStatus(st, &runtimeapi.Container{PodSandboxId: sandboxID})
		applyAnnotations(logger, cs)
		p.Containers = append(p.Containers, cs)
	}
	sortNewestFirst(p)
	e.Pod = p
	return e
}

func containerEventType(t runtimeapi.ContainerEventType) ContainerEventType {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		return ContainerCreatedEvent
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return ContainerStartedEvent
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return ContainerStoppedEvent
	default:
		return ContainerDeletedEvent
	}
}
