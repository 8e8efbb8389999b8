package criclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// runtimeService is the criapi.RuntimeService of one connection.
type runtimeService struct {
	conn    *grpc.ClientConn
	client  runtimeapi.RuntimeServiceClient
	timeout time.Duration
	// containers and sandboxes keep the last full lists (see listCache).
	containers *listCache[*runtimeapi.Container]
	sandboxes  *listCache[*runtimeapi.PodSandbox]
}

var _ criapi.RuntimeService = (*runtimeService)(nil)

// NewRuntimeService connects to the CRI v1 runtime service at endpoint
// (unix:///path) and checks that it answers the Version call within
// timeout. timeout also bounds every later call but those that document
// otherwise. On error nothing is left open; a gRPC status (Unimplemented
// from a peer that is not a CRI v1 runtime, DeadlineExceeded, Unavailable)
// stays in the chain.
func NewRuntimeService(ctx context.Context, endpoint string, timeout time.Duration) (criapi.RuntimeService, error) {
	conn, err := dial(endpoint, timeout)
	if err != nil {
		return nil, fmt.Errorf("CRI runtime service: %w", err)
	}
	s := &runtimeService{
		conn:       conn,
		client:     runtimeapi.NewRuntimeServiceClient(conn),
		timeout:    timeout,
		containers: newListCache(func() *runtimeapi.Container { return &runtimeapi.Container{} }),
		sandboxes:  newListCache(func() *runtimeapi.PodSandbox { return &runtimeapi.PodSandbox{} }),
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := s.client.Version(cctx, &runtimeapi.VersionRequest{}); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("CRI v1 runtime service: %w", fail(ctx, "Version", err))
	}
	klog.FromContext(ctx).V(4).Info("Connected to CRI v1 runtime service", "endpoint", endpoint)
	return s, nil
}

// Close closes the connection.
func (s *runtimeService) Close(context.Context) error {
	return s.conn.Close()
}

// bound returns ctx bounded by the client timeout.
func (s *runtimeService) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Version returns the runtime's name and version and its CRI API version;
// a response without any of them is an error.
func (s *runtimeService) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Version(cctx, &runtimeapi.VersionRequest{Version: apiVersion})
	if err != nil {
		return nil, fail(ctx, "Version", err)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"Version", resp.Version},
		{"RuntimeName", resp.RuntimeName},
		{"RuntimeApiVersion", resp.RuntimeApiVersion},
		{"RuntimeVersion", resp.RuntimeVersion},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, invalid(ctx, "Version", "%s not set", strings.Join(missing, ", "))
	}
	return resp, nil
}

// RunPodSandbox creates and starts a pod sandbox and returns its ID. It is
// bounded by twice the client timeout, as sandbox creation includes the
// network setup.
func (s *runtimeService) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*s.timeout)
	defer cancel()
	resp, err := s.client.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", fail(ctx, "RunPodSandbox", err)
	}
	if resp.PodSandboxId == "" {
		return "", invalid(ctx, "RunPodSandbox", "no sandbox ID for %s/%s", config.GetMetadata().GetNamespace(), config.GetMetadata().GetName())
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox and its containers.
func (s *runtimeService) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID}); err != nil {
		return fail(ctx, "StopPodSandbox", err)
	}
	return nil
}

// RemovePodSandbox removes a sandbox and its containers.
func (s *runtimeService) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID}); err != nil {
		return fail(ctx, "RemovePodSandbox", err)
	}
	return nil
}

// PodSandboxStatus returns a sandbox's status (and the runtime's verbose
// info when verbose is set). A status lacking its ID, metadata or creation
// time is an error; a response without a status is returned as it is.
func (s *runtimeService) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
	if err != nil {
		return nil, fail(ctx, "PodSandboxStatus", err)
	}
	if st := resp.Status; st != nil {
		md := st.Metadata
		switch {
		case st.Id == "":
			return nil, invalid(ctx, "PodSandboxStatus", "status of %s has no ID", podSandboxID)
		case md == nil || md.Name == "" || md.Namespace == "" || md.Uid == "":
			return nil, invalid(ctx, "PodSandboxStatus", "status of %s lacks the name, namespace or UID of its metadata", podSandboxID)
		case st.CreatedAt == 0:
			return nil, invalid(ctx, "PodSandboxStatus", "status of %s has no creation time", podSandboxID)
		}
	}
	return resp, nil
}

// ListPodSandbox lists the sandboxes that match filter. Without a filter,
// the sandboxes unchanged since the last such list are the same objects
// (see listCache): callers must not modify them.
func (s *runtimeService) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if filter == nil {
		reply := &cachedList[*runtimeapi.PodSandbox]{cache: s.sandboxes}
		if err := s.conn.Invoke(cctx, runtimeapi.RuntimeService_ListPodSandbox_FullMethodName, &runtimeapi.ListPodSandboxRequest{}, reply); err != nil {
			return nil, fail(ctx, "ListPodSandbox", err)
		}
		return reply.items, nil
	}
	resp, err := s.client.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, fail(ctx, "ListPodSandbox", err)
	}
	return resp.Items, nil
}

// PortForward returns the streaming URL of a port forward into a sandbox.
func (s *runtimeService) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.PortForward(cctx, req)
	if err != nil {
		return nil, fail(ctx, "PortForward", err)
	}
	if resp.Url == "" {
		return nil, invalid(ctx, "PortForward", "no URL")
	}
	return resp, nil
}

// UpdatePodSandboxResources updates a sandbox's pod-level resources.
func (s *runtimeService) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.UpdatePodSandboxResources(cctx, req)
	if err != nil {
		return nil, fail(ctx, "UpdatePodSandboxResources", err)
	}
	return resp, nil
}

// CheckpointPod checkpoints a sandbox. It is bounded by ctx's deadline, or
// by the client timeout when ctx has none.
func (s *runtimeService) CheckpointPod(ctx context.Context, req *runtimeapi.CheckpointPodRequest) error {
	if req == nil {
		return fail(ctx, "CheckpointPod", errors.New("no request"))
	}
	cctx, cancel := s.boundUnlessDeadline(ctx)
	defer cancel()
	if _, err := s.client.CheckpointPod(cctx, req); err != nil {
		return fail(ctx, "CheckpointPod", err)
	}
	return nil
}

// RestorePod restores a sandbox from a checkpoint. It is bounded by ctx's
// deadline, or by the client timeout when ctx has none.
func (s *runtimeService) RestorePod(ctx context.Context, req *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	if req == nil {
		return nil, fail(ctx, "RestorePod", errors.New("no request"))
	}
	cctx, cancel := s.boundUnlessDeadline(ctx)
	defer cancel()
	resp, err := s.client.RestorePod(cctx, req)
	if err != nil {
		return nil, fail(ctx, "RestorePod", err)
	}
	return resp, nil
}

// boundUnlessDeadline returns ctx as it is when it has a deadline, else
// bounded by the client timeout.
func (s *runtimeService) boundUnlessDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return s.bound(ctx)
}

// CreateContainer creates a container in a sandbox and returns its ID.
func (s *runtimeService) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  podSandboxID,
		Config:        config,
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		return "", fail(ctx, "CreateContainer", err)
	}
	if resp.ContainerId == "" {
		return "", invalid(ctx, "CreateContainer", "no container ID for %s in sandbox %s", config.GetMetadata().GetName(), podSandboxID)
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (s *runtimeService) StartContainer(ctx context.Context, containerID string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: containerID}); err != nil {
		return fail(ctx, "StartContainer", err)
	}
	return nil
}

// StopContainer stops a container, giving it timeout seconds between the
// stop signal and SIGKILL. It is bounded by the client timeout plus that
// grace period.
func (s *runtimeService) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout+time.Duration(timeout)*time.Second)
	defer cancel()
	if _, err := s.client.StopContainer(cctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout}); err != nil {
		return fail(ctx, "StopContainer", err)
	}
	return nil
}

// RemoveContainer removes a container.
func (s *runtimeService) RemoveContainer(ctx context.Context, containerID string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.RemoveContainer(cctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID}); err != nil {
		return fail(ctx, "RemoveContainer", err)
	}
	return nil
}

// ListContainers lists the containers that match filter. Without a
// filter, the containers unchanged since the last such list are the same
// objects (see listCache): callers must not modify them.
func (s *runtimeService) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if filter == nil {
		reply := &cachedList[*runtimeapi.Container]{cache: s.containers}
		if err := s.conn.Invoke(cctx, runtimeapi.RuntimeService_ListContainers_FullMethodName, &runtimeapi.ListContainersRequest{}, reply); err != nil {
			return nil, fail(ctx, "ListContainers", err)
		}
		return reply.items, nil
	}
	resp, err := s.client.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: filter})
	if err != nil {
		return nil, fail(ctx, "ListContainers", err)
	}
	return resp.Containers, nil
}

// ContainerStatus returns a container's status (and the runtime's verbose
// info when verbose is set). A status lacking its ID, name, creation time,
// image or image reference is an error; a response without a status is
// returned as it is.
func (s *runtimeService) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
	if err != nil {
		return nil, fail(ctx, "ContainerStatus", err)
	}
	if st := resp.Status; st != nil {
		switch {
		case st.Id == "":
			return nil, invalid(ctx, "ContainerStatus", "status of %s has no ID", containerID)
		case st.Metadata.GetName() == "":
			return nil, invalid(ctx, "ContainerStatus", "status of %s has no name in its metadata", containerID)
		case st.CreatedAt == 0:
			return nil, invalid(ctx, "ContainerStatus", "status of %s has no creation time", containerID)
		case st.Image.GetImage() == "":
			return nil, invalid(ctx, "ContainerStatus", "status of %s has no image", containerID)
		case st.ImageRef == "":
			return nil, invalid(ctx, "ContainerStatus", "status of %s has no image reference", containerID)
		}
	}
	return resp, nil
}

// UpdateContainerResources updates a running container's resources.
func (s *runtimeService) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.UpdateContainerResources(cctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: containerID,
		Linux:       resources.GetLinux(),
		Windows:     resources.GetWindows(),
	}); err != nil {
		return fail(ctx, "UpdateContainerResources", err)
	}
	return nil
}

// ExecSync runs cmd in a container and waits for it. The runtime stops the
// command after timeout (whole seconds; 0 is no limit); the call is bounded
// by timeout plus the client timeout, so that the runtime has time to clean
// up, and not at all for 0. A call that ends with DeadlineExceeded returns
// ErrCommandTimedOut (the gRPC status stays in the chain). A command that
// exits non-zero returns its output and a utilexec.CodeExitError with the
// exit code.
func (s *runtimeService) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error) {
	var cctx context.Context
	var cancel context.CancelFunc
	if timeout != 0 {
		cctx, cancel = context.WithTimeout(ctx, s.timeout+timeout)
	} else {
		cctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := s.client.ExecSync(cctx, &runtimeapi.ExecSyncRequest{
		ContainerId: containerID,
		Cmd:         cmd,
		Timeout:     int64(timeout.Seconds()),
	})
	if err != nil {
		if status.Code(err) == codes.DeadlineExceeded {
			err = fmt.Errorf("%w: %q did not finish within %s: %w", ErrCommandTimedOut, strings.Join(cmd, " "), timeout, err)
		}
		return nil, nil, fail(ctx, "ExecSync", err)
	}
	if resp.ExitCode != 0 {
		err = utilexec.CodeExitError{
			Err:  fmt.Errorf("command %q exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, err
}

// Exec returns the streaming URL of a command to run in a container.
func (s *runtimeService) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Exec(cctx, req)
	if err != nil {
		return nil, fail(ctx, "Exec", err)
	}
	if resp.Url == "" {
		return nil, invalid(ctx, "Exec", "no URL")
	}
	return resp, nil
}

// Attach returns the streaming URL of an attach to a container.
func (s *runtimeService) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Attach(cctx, req)
	if err != nil {
		return nil, fail(ctx, "Attach", err)
	}
	if resp.Url == "" {
		return nil, invalid(ctx, "Attach", "no URL")
	}
	return resp, nil
}

// ReopenContainerLog asks the runtime to reopen a container's log file.
func (s *runtimeService) ReopenContainerLog(ctx context.Context, containerID string) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.ReopenContainerLog(cctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID}); err != nil {
		return fail(ctx, "ReopenContainerLog", err)
	}
	return nil
}

// CheckpointContainer checkpoints a container. The request's timeout
// (seconds) bounds the call when it exceeds the client timeout; otherwise
// the client timeout does, and is what the runtime is sent. req is not
// modified.
func (s *runtimeService) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	if req == nil {
		return fail(ctx, "CheckpointContainer", errors.New("no request"))
	}
	if req.Timeout < 0 {
		return fail(ctx, "CheckpointContainer", fmt.Errorf("negative timeout %d", req.Timeout))
	}
	bound := s.timeout
	if def := int64(s.timeout / time.Second); req.Timeout > def {
		bound = time.Duration(req.Timeout) * time.Second
	} else {
		req = proto.CloneOf(req)
		req.Timeout = def
	}
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if _, err := s.client.CheckpointContainer(cctx, req); err != nil {
		return fail(ctx, "CheckpointContainer", err)
	}
	return nil
}

// GetContainerEvents opens the runtime's container event stream, calls
// connected (if not nil) once it is open, and sends every event on ch until
// the stream ends or ctx is done. It always returns an error: the stream's
// (io.EOF in the chain when the runtime ends it) or ctx's. It is bounded by
// ctx only.
func (s *runtimeService) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := s.client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return fail(ctx, "GetContainerEvents", err)
	}
	if connected != nil {
		connected(stream)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fail(ctx, "GetContainerEvents", fmt.Errorf("stream ended by the runtime: %w", err))
		}
		if err != nil {
			return fail(ctx, "GetContainerEvents", err)
		}
		select {
		case ch <- resp:
		case <-ctx.Done():
			return fail(ctx, "GetContainerEvents", context.Cause(ctx))
		}
	}
}

// ContainerStats returns a container's stats.
func (s *runtimeService) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ContainerStats(cctx, &runtimeapi.ContainerStatsRequest{ContainerId: containerID})
	if err != nil {
		return nil, fail(ctx, "ContainerStats", err)
	}
	return resp.GetStats(), nil
}

// ListContainerStats returns the stats of the containers that match filter.
func (s *runtimeService) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ListContainerStats(cctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, fail(ctx, "ListContainerStats", err)
	}
	return resp.GetStats(), nil
}

// PodSandboxStats returns a sandbox's stats.
func (s *runtimeService) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.PodSandboxStats(cctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID})
	if err != nil {
		return nil, fail(ctx, "PodSandboxStats", err)
	}
	return resp.GetStats(), nil
}

// ListPodSandboxStats returns the stats of the sandboxes that match filter.
func (s *runtimeService) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ListPodSandboxStats(cctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err != nil {
		return nil, fail(ctx, "ListPodSandboxStats", err)
	}
	return resp.GetStats(), nil
}

// ListMetricDescriptors returns the descriptors of the metrics
// ListPodSandboxMetrics returns.
func (s *runtimeService) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ListMetricDescriptors(cctx, &runtimeapi.ListMetricDescriptorsRequest{})
	if err != nil {
		return nil, fail(ctx, "ListMetricDescriptors", err)
	}
	return resp.GetDescriptors(), nil
}

// ListPodSandboxMetrics returns the metrics of every sandbox.
func (s *runtimeService) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.ListPodSandboxMetrics(cctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	if err != nil {
		return nil, fail(ctx, "ListPodSandboxMetrics", err)
	}
	return resp.GetPodMetrics(), nil
}

// UpdateRuntimeConfig sends the runtime configuration (the node's pod
// CIDR).
func (s *runtimeService) UpdateRuntimeConfig(ctx context.Context, config *runtimeapi.RuntimeConfig) error {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.UpdateRuntimeConfig(cctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: config}); err != nil {
		return fail(ctx, "UpdateRuntimeConfig", err)
	}
	return nil
}

// Status returns the runtime's conditions (and its verbose info when
// verbose is set). A status without at least two conditions (RuntimeReady
// and NetworkReady) is an error.
func (s *runtimeService) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Status(cctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, fail(ctx, "Status", err)
	}
	if len(resp.GetStatus().GetConditions()) < 2 {
		return nil, invalid(ctx, "Status", "the RuntimeReady or NetworkReady condition is not set")
	}
	return resp, nil
}

// RuntimeConfig returns the runtime's configuration (its cgroup driver).
func (s *runtimeService) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.RuntimeConfig(cctx, &runtimeapi.RuntimeConfigRequest{})
	if err != nil {
		return nil, fail(ctx, "RuntimeConfig", err)
	}
	return resp, nil
}
