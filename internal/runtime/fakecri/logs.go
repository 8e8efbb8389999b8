package fakecri

import (
	"context"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ReopenedLogs returns the IDs of the containers whose log was reopened,
// in call order.
func (s *Server) ReopenedLogs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reopened...)
}

// ReopenContainerLog creates the container's log file anew when it is
// missing, as a runtime reopening its log writer would. Only running
// containers with a log path can reopen their log.
func (r *runtimeServer) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ReopenContainerLog"); err != nil {
		return nil, err
	}
	c := s.containers[req.GetContainerId()]
	if c == nil {
		return nil, notFound("container %q not found", req.GetContainerId())
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is not running", c.ID)
	}
	if c.LogPath != "" {
		f, err := os.OpenFile(c.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "reopen %s: %v", c.LogPath, err)
		}
		f.Close()
	}
	s.reopened = append(s.reopened, c.ID)
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
