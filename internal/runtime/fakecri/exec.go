package fakecri

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecFunc answers an ExecSync call: what the command printed and its exit
// code. A non-nil error is returned to the client as is (use a gRPC status
// error such as codes.DeadlineExceeded to simulate a timeout).
type ExecFunc func(containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int32, err error)

// SetExec sets how ExecSync answers. Without it every command exits 0
// with no output.
func (s *Server) SetExec(f ExecFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exec = f
}

func (r *runtimeServer) ExecSync(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	s := r.s
	s.mu.Lock()
	if err := s.begin("ExecSync"); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		s.mu.Unlock()
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		s.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running", c.ID)
	}
	f := s.exec
	s.mu.Unlock()
	if f == nil {
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	// The handler runs without the lock so it may call the Server.
	stdout, stderr, code, err := f(req.GetContainerId(), req.GetCmd(), time.Duration(req.GetTimeout())*time.Second)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: code}, nil
}
