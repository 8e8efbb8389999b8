package fakecri

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultStreamBase is the base of the streaming URLs the fake hands out
// until SetStreamBase; nothing listens there.
const DefaultStreamBase = "http://127.0.0.1:1"

// StreamRequest is one Exec, Attach or PortForward call the fake answered.
type StreamRequest struct {
	Method      string // "Exec", "Attach" or "PortForward"
	ContainerID string // Exec and Attach
	SandboxID   string // PortForward
	Cmd         []string
	Stdin       bool
	Stdout      bool
	Stderr      bool
	TTY         bool
	Ports       []int32
	// URL is what the fake answered: <base>/<method>/<n>, n counting
	// from 1 over all streaming calls.
	URL string
}

// SetStreamBase sets the base URL (scheme://host:port) of the streaming
// URLs handed out, e.g. an httptest server standing in for a runtime's
// stream server.
func (s *Server) SetStreamBase(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamBase = base
}

// StreamRequests returns the streaming calls answered so far, in order.
func (s *Server) StreamRequests() []StreamRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StreamRequest, len(s.streams))
	for i, r := range s.streams {
		r.Cmd = append([]string(nil), r.Cmd...)
		r.Ports = append([]int32(nil), r.Ports...)
		out[i] = r
	}
	return out
}

// addStream records r and returns its URL. Call with s.mu held.
func (s *Server) addStream(r StreamRequest, path string) string {
	r.URL = fmt.Sprintf("%s/%s/%d", s.streamBase, path, len(s.streams)+1)
	s.streams = append(s.streams, r)
	return r.URL
}

// runningContainer is the running container id. Call with s.mu held.
func (s *Server) runningContainer(id string) error {
	c := s.containers[id]
	if c == nil {
		return notFound("container %q not found", id)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return status.Errorf(codes.FailedPrecondition, "container %s is not running", id)
	}
	return nil
}

// Exec answers with a streaming URL for a running container, as a
// runtime with a stream server does; no session is served.
func (r *runtimeServer) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Exec"); err != nil {
		return nil, err
	}
	if err := s.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "cmd must not be empty")
	}
	u := s.addStream(StreamRequest{
		Method: "Exec", ContainerID: req.GetContainerId(), Cmd: req.GetCmd(),
		Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr(), TTY: req.GetTty(),
	}, "exec")
	return &runtimeapi.ExecResponse{Url: u}, nil
}

// Attach answers with a streaming URL for a running container.
func (r *runtimeServer) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Attach"); err != nil {
		return nil, err
	}
	if err := s.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	u := s.addStream(StreamRequest{
		Method: "Attach", ContainerID: req.GetContainerId(),
		Stdin: req.GetStdin(), Stdout: req.GetStdout(), Stderr: req.GetStderr(), TTY: req.GetTty(),
	}, "attach")
	return &runtimeapi.AttachResponse{Url: u}, nil
}

// PortForward answers with a streaming URL for a ready sandbox.
func (r *runtimeServer) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("PortForward"); err != nil {
		return nil, err
	}
	sb := s.sandboxes[req.GetPodSandboxId()]
	if sb == nil {
		return nil, notFound("pod sandbox %q not found", req.GetPodSandboxId())
	}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "pod sandbox %s is not ready", sb.ID)
	}
	u := s.addStream(StreamRequest{Method: "PortForward", SandboxID: sb.ID, Ports: req.GetPort()}, "portforward")
	return &runtimeapi.PortForwardResponse{Url: u}, nil
}
