package fakecri

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// watcher is one open GetContainerEvents stream.
type watcher struct {
	events chan *runtimeapi.ContainerEventResponse
	broken chan error // closed (after err is set) to end the stream
	err    error
}

// watcherBuffer is how many events a stream holds before the fake ends it
// as a runtime would end a stream whose client does not keep up.
const watcherBuffer = 256

// BreakEventStreams ends every open GetContainerEvents stream with err.
// Inject an error for "GetContainerEvents" to refuse new streams (e.g.
// codes.Unimplemented, as containerd 1.x answers).
func (s *Server) BreakEventStreams(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watchers {
		w.err = err
		close(w.broken)
	}
	s.watchers = nil
}

// WaitEventStreams waits until at least n GetContainerEvents streams are
// open on the server side. A client's stream can be established before
// the server's handler has registered it; events emitted in between are
// not delivered to it, so tests wait for this before acting.
func (s *Server) WaitEventStreams(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		open, changed := len(s.watchers), s.watchersChanged
		s.mu.Unlock()
		if open >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d event streams (%d open): %w", n, open, ctx.Err())
		}
	}
}

// watchersUpdated wakes WaitEventStreams. Callers hold s.mu.
func (s *Server) watchersUpdated() {
	close(s.watchersChanged)
	s.watchersChanged = make(chan struct{})
}

// EventStreams returns how many GetContainerEvents streams are open.
func (s *Server) EventStreams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// emit sends an event for c to every open stream, with c's sandbox and
// all containers of that sandbox, as containerd does. Callers hold s.mu.
func (s *Server) emit(c *container, t runtimeapi.ContainerEventType) {
	if len(s.watchers) == 0 {
		return
	}
	resp := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.ID,
		ContainerEventType: t,
		CreatedAt:          toNanos(s.peek()),
	}
	if sb := s.sandboxes[c.SandboxID]; sb != nil {
		resp.PodSandboxStatus = &runtimeapi.PodSandboxStatus{
			Id:          sb.ID,
			Metadata:    proto.Clone(sb.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata),
			State:       sb.State,
			CreatedAt:   toNanos(sb.CreatedAt),
			Labels:      sb.Config.GetLabels(),
			Annotations: sb.Config.GetAnnotations(),
		}
	}
	for _, o := range s.sortedContainers() {
		if o.SandboxID == c.SandboxID {
			resp.ContainersStatuses = append(resp.ContainersStatuses, o.status())
		}
	}
	kept := s.watchers[:0]
	for _, w := range s.watchers {
		select {
		case w.events <- resp:
			kept = append(kept, w)
		default:
			w.err = errSlowWatcher
			close(w.broken)
		}
	}
	s.watchers = kept
}

func (r *runtimeServer) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	s := r.s
	s.mu.Lock()
	if err := s.begin("GetContainerEvents"); err != nil {
		s.mu.Unlock()
		return err
	}
	w := &watcher{events: make(chan *runtimeapi.ContainerEventResponse, watcherBuffer), broken: make(chan error)}
	s.watchers = append(s.watchers, w)
	s.watchersUpdated()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, o := range s.watchers {
			if o == w {
				s.watchers = append(s.watchers[:i], s.watchers[i+1:]...)
				break
			}
		}
	}()
	for {
		// Events queued before a break are still delivered first.
		select {
		case e := <-w.events:
			if err := stream.Send(e); err != nil {
				return err
			}
			continue
		default:
		}
		select {
		case e := <-w.events:
			if err := stream.Send(e); err != nil {
				return err
			}
		case <-w.broken:
			return w.err
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

var errSlowWatcher = status.Error(codes.ResourceExhausted, "fakecri: event stream reader too slow")
