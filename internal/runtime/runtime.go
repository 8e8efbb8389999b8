package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/criclient"
	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/metrics"
)

// DefaultTimeout is the connection and per-call timeout New uses when given
// zero, as the upstream kubelet's default runtime request timeout.
const DefaultTimeout = 2 * time.Minute

// Runtime is heartlet's client of a CRI runtime and image service. Every
// call is counted in the kubelet_runtime_operations_* metrics. It is safe
// for concurrent use.
type Runtime struct {
	rs    criapi.RuntimeService
	is    criapi.ImageManagerService
	clock clock.PassiveClock
	// idx knows each pod's sandboxes and containers between full lists.
	idx *objectIndex
	// users knows the user of each image ID seen in an image status.
	users imageUsers
}

// Option configures New.
type Option func(*newOptions)

type newOptions struct {
	imageEndpoint string
}

// WithImageEndpoint makes the image service calls (pull, image status,
// list, remove, image filesystem info) go to the CRI image service at
// endpoint instead of the runtime endpoint (imageServiceEndpoint); "" keeps
// them on the runtime endpoint.
func WithImageEndpoint(endpoint string) Option {
	return func(o *newOptions) { o.imageEndpoint = endpoint }
}

// New connects to the CRI runtime at endpoint (unix:///path; a bare path is
// taken as a unix socket) and checks that it answers the CRI v1 Version
// call, and to the image service (the same endpoint unless
// WithImageEndpoint names another) and checks that it answers the CRI v1
// ImageFsInfo call. connTimeout bounds the connections and each later call
// (zero means DefaultTimeout). Errors name the endpoint and whether it is
// the runtime's or the image service's, and say whether the socket is
// missing, the peer does not speak CRI v1, or it did not answer in time.
func New(ctx context.Context, endpoint string, connTimeout time.Duration, opts ...Option) (*Runtime, error) {
	var o newOptions
	for _, opt := range opts {
		opt(&o)
	}
	if connTimeout <= 0 {
		connTimeout = DefaultTimeout
	}
	endpoint, err := checkEndpoint(runtimeEndpointName, endpoint)
	if err != nil {
		return nil, err
	}
	imageEndpoint := endpoint
	if o.imageEndpoint != "" {
		if imageEndpoint, err = checkEndpoint(imageEndpointName, o.imageEndpoint); err != nil {
			return nil, err
		}
	}
	rs, err := criclient.NewRuntimeService(ctx, endpoint, connTimeout)
	if err != nil {
		return nil, connectError(runtimeEndpointName, endpoint, connTimeout, err)
	}
	is, err := criclient.NewImageService(ctx, imageEndpoint, connTimeout)
	if err != nil {
		_ = rs.Close(ctx)
		return nil, connectError(imageEndpointName, imageEndpoint, connTimeout, err)
	}
	r := NewFromServices(rs, is)
	v, err := r.Version(ctx)
	if err != nil {
		_ = r.Close(ctx)
		return nil, connectError(runtimeEndpointName, endpoint, connTimeout, err)
	}
	klog.FromContext(ctx).V(1).Info("Connected to container runtime", "endpoint", endpoint, "imageEndpoint", imageEndpoint,
		"runtimeName", v.RuntimeName, "runtimeVersion", v.RuntimeVersion, "apiVersion", v.RuntimeApiVersion)
	return r, nil
}

// Names of the two endpoints in errors.
const (
	runtimeEndpointName = "container runtime endpoint"
	imageEndpointName   = "image service endpoint"
)

// NewFromServices wraps existing CRI services, e.g. fakes in tests.
func NewFromServices(rs criapi.RuntimeService, is criapi.ImageManagerService) *Runtime {
	return &Runtime{rs: rs, is: is, clock: clock.RealClock{}, idx: newObjectIndex()}
}

// checkEndpoint normalizes endpoint to unix:///path and checks that the
// socket exists, so that the most common mistake gets a clear message
// instead of a gRPC connection error. what names the endpoint in errors.
func checkEndpoint(what, endpoint string) (string, error) {
	if endpoint == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	path := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", what, endpoint, err)
		}
		if u.Scheme != "unix" {
			return "", fmt.Errorf("%s %s: scheme %q not supported, only unix sockets", what, endpoint, u.Scheme)
		}
		path = u.Path
	} else {
		endpoint = "unix://" + endpoint
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", &endpointError{msg: fmt.Sprintf("%s %s: no such socket", what, endpoint), err: err}
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", what, endpoint, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return "", fmt.Errorf("%s %s: %s is not a socket", what, endpoint, path)
	}
	return endpoint, nil
}

// endpointError carries a short message while keeping the cause in the
// chain for errors.Is.
type endpointError struct {
	msg string
	err error
}

func (e *endpointError) Error() string { return e.msg }
func (e *endpointError) Unwrap() error { return e.err }

// connectError explains a failed connection check of the endpoint named
// what.
func connectError(what, endpoint string, timeout time.Duration, err error) error {
	notCRI := "not a CRI v1 runtime (the CRI v1 API is not implemented there)"
	if what == imageEndpointName {
		notCRI = "not a CRI v1 image service (the CRI v1 image API is not implemented there)"
	}
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Errorf("%s %s: %s: %w", what, endpoint, notCRI, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s %s: no answer within %s: %w", what, endpoint, timeout, err)
	case codes.Unavailable:
		return fmt.Errorf("%s %s: unavailable: %w", what, endpoint, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s %s: no answer within %s: %w", what, endpoint, timeout, err)
	}
	return fmt.Errorf("%s %s: %w", what, endpoint, err)
}

// Close closes the connections to the runtime.
func (r *Runtime) Close(ctx context.Context) error {
	return errors.Join(r.rs.Close(ctx), r.is.Close(ctx))
}

// Operation types of the runtime metrics, named as the upstream kubelet's.
const (
	opVersion          = "version"
	opStatus           = "status"
	opRunPodSandbox    = "run_podsandbox"
	opStopPodSandbox   = "stop_podsandbox"
	opRemovePodSandbox = "remove_podsandbox"
	opPodSandboxStatus = "podsandbox_status"
	opListPodSandbox   = "list_podsandbox"
	opCreateContainer  = "create_container"
	opStartContainer   = "start_container"
	opStopContainer    = "stop_container"
	opRemoveContainer  = "remove_container"
	opUpdateContainer  = "update_container"
	opListContainers   = "list_containers"
	opContainerStatus  = "container_status"
	opPullImage        = "pull_image"
	opImageStatus      = "image_status"
	opListImages       = "list_images"
	opRemoveImage      = "remove_image"
	opRuntimeConfig    = "runtime_config"
)

// record counts one CRI call and its latency, and its failure if err is
// set. Call it as `defer r.record(op, r.clock.Now(), &err)`.
func (r *Runtime) record(op string, start time.Time, err *error) {
	metrics.RuntimeOperations.WithLabelValues(op).Inc()
	metrics.RuntimeOperationsDuration.WithLabelValues(op).Observe(r.clock.Since(start).Seconds())
	if *err != nil {
		metrics.RuntimeOperationsErrors.WithLabelValues(op).Inc()
	}
}

// wrap names what failed and puts errdefs.ErrNotFound in the chain for gRPC
// NotFound; the gRPC error stays in the chain too.
func wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if status.Code(err) == codes.NotFound {
		return fmt.Errorf("%s: %w: %w", what, errdefs.ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Version returns the runtime's name and version and its CRI API version.
func (r *Runtime) Version(ctx context.Context) (_ *runtimeapi.VersionResponse, err error) {
	defer r.record(opVersion, r.clock.Now(), &err)
	v, err := r.rs.Version(ctx, "v1")
	if err != nil {
		return nil, wrap(err, "runtime version")
	}
	return v, nil
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (r *Runtime) Status(ctx context.Context) (_ *runtimeapi.StatusResponse, err error) {
	defer r.record(opStatus, r.clock.Now(), &err)
	st, err := r.rs.Status(ctx, false)
	if err != nil {
		return nil, wrap(err, "runtime status")
	}
	return st, nil
}

// StatusInfo returns the runtime's conditions with its verbose info: a map
// of JSON documents the runtime chooses (containerd puts its CRI
// configuration under "config" and the last CNI load result under
// "lastCNILoadStatus").
func (r *Runtime) StatusInfo(ctx context.Context) (_ *runtimeapi.StatusResponse, err error) {
	defer r.record(opStatus, r.clock.Now(), &err)
	st, err := r.rs.Status(ctx, true)
	if err != nil {
		return nil, wrap(err, "runtime status")
	}
	return st, nil
}

// RuntimeConfig returns the runtime's configuration as CRI reports it (the
// cgroup driver on Linux). Runtimes that predate the call answer with gRPC
// Unimplemented, which stays in the error chain.
func (r *Runtime) RuntimeConfig(ctx context.Context) (_ *runtimeapi.RuntimeConfigResponse, err error) {
	defer r.record(opRuntimeConfig, r.clock.Now(), &err)
	resp, err := r.rs.RuntimeConfig(ctx)
	if err != nil {
		return nil, wrap(err, "runtime config")
	}
	return resp, nil
}

// RunPodSandbox creates and starts a pod sandbox with the given runtime
// handler ("" for the default) and returns its ID.
func (r *Runtime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (_ string, err error) {
	start := r.clock.Now()
	defer r.record(opRunPodSandbox, start, &err)
	id, err := r.rs.RunPodSandbox(ctx, cfg, handler)
	metrics.RunPodSandboxDuration.WithLabelValues(handler).Observe(r.clock.Since(start).Seconds())
	if err != nil {
		metrics.RunPodSandboxErrors.WithLabelValues(handler).Inc()
		return "", wrap(err, "run pod sandbox for pod %s", sandboxName(cfg))
	}
	klog.FromContext(ctx).V(4).Info("Started pod sandbox", "pod", sandboxName(cfg), "podUID", cfg.GetMetadata().GetUid(), "sandboxID", id)
	r.idx.addSandbox(types.UID(cfg.GetLabels()[LabelPodUID]), id)
	return id, nil
}

func sandboxName(cfg *runtimeapi.PodSandboxConfig) string {
	return cfg.GetMetadata().GetNamespace() + "/" + cfg.GetMetadata().GetName()
}

// StopPodSandbox stops a sandbox and every container in it.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer r.record(opStopPodSandbox, r.clock.Now(), &err)
	if err := r.rs.StopPodSandbox(ctx, id); err != nil {
		r.idx.forgetStatus(id)
		return wrap(err, "stop pod sandbox %s", id)
	}
	r.idx.setSandboxState(id, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)
	r.idx.forgetStatus(id)
	return nil
}

// RemovePodSandbox removes a stopped sandbox and its containers.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer r.record(opRemovePodSandbox, r.clock.Now(), &err)
	err = r.rs.RemovePodSandbox(ctx, id)
	if err == nil || status.Code(err) == codes.NotFound {
		r.idx.remove(id)
	}
	if err != nil {
		return wrap(err, "remove pod sandbox %s", id)
	}
	return nil
}

// CreateContainer creates a container in a sandbox and returns its ID. sb
// is the sandbox's config, as the runtime may need it.
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer r.record(opCreateContainer, r.clock.Now(), &err)
	id, err := r.rs.CreateContainer(ctx, sandboxID, cfg, sb)
	if err != nil {
		return "", wrap(err, "create container %s in pod sandbox %s", cfg.GetMetadata().GetName(), sandboxID)
	}
	r.idx.addContainer(types.UID(cfg.GetLabels()[LabelPodUID]), &runtimeapi.Container{
		Id:           id,
		PodSandboxId: sandboxID,
		Metadata:     cfg.GetMetadata(),
		Image:        cfg.GetImage(),
		Labels:       cfg.GetLabels(),
		Annotations:  cfg.GetAnnotations(),
	})
	return id, nil
}

// StartContainer starts a created container.
func (r *Runtime) StartContainer(ctx context.Context, id string) (err error) {
	defer r.record(opStartContainer, r.clock.Now(), &err)
	if err := r.rs.StartContainer(ctx, id); err != nil {
		r.idx.forgetStatus(id)
		return wrap(err, "start container %s", id)
	}
	r.idx.setContainerState(id, runtimeapi.ContainerState_CONTAINER_RUNNING, nil)
	return nil
}

// StopContainer stops a container, giving it grace (rounded up to whole
// seconds) between the stop signal and SIGKILL.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) (err error) {
	defer r.record(opStopContainer, r.clock.Now(), &err)
	if err := r.rs.StopContainer(ctx, id, graceSeconds(grace)); err != nil {
		r.idx.forgetStatus(id)
		return wrap(err, "stop container %s", id)
	}
	r.idx.setContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED, nil)
	return nil
}

// graceSeconds rounds a grace period up to whole seconds, at least zero.
func graceSeconds(grace time.Duration) int64 {
	if grace <= 0 {
		return 0
	}
	return int64((grace + time.Second - 1) / time.Second)
}

// RemoveContainer removes a container.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer r.record(opRemoveContainer, r.clock.Now(), &err)
	err = r.rs.RemoveContainer(ctx, id)
	if err == nil || status.Code(err) == codes.NotFound {
		r.idx.remove(id)
	}
	if err != nil {
		return wrap(err, "remove container %s", id)
	}
	return nil
}

// UpdateContainerResources changes a running container's Linux resources
// in place (cpu shares, CFS quota and period, memory limit).
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) (err error) {
	defer r.record(opUpdateContainer, r.clock.Now(), &err)
	// The status reports the resources: read it again after.
	defer r.idx.forgetStatus(id)
	if err := r.rs.UpdateContainerResources(ctx, id, &runtimeapi.ContainerResources{Linux: res}); err != nil {
		return wrap(err, "update resources of container %s", id)
	}
	return nil
}

// PullImage pulls image with optional credentials and returns the image
// reference the runtime resolved it to (the image ID).
func (r *Runtime) PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (_ string, err error) {
	defer r.record(opPullImage, r.clock.Now(), &err)
	ref, err := r.is.PullImage(ctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}, auth, sb)
	if err != nil {
		return "", wrap(err, "pull image %s", image)
	}
	return ref, nil
}

// ImageRef returns the ID of image if the runtime has it, and "" with a
// nil error when it does not.
func (r *Runtime) ImageRef(ctx context.Context, image string) (_ string, err error) {
	defer r.record(opImageStatus, r.clock.Now(), &err)
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if status.Code(err) == codes.NotFound {
		return "", nil
	}
	if err != nil {
		return "", wrap(err, "image status of %s", image)
	}
	if resp.GetImage() == nil {
		return "", nil
	}
	r.users.learn(resp.GetImage())
	return resp.GetImage().GetId(), nil
}

// ImageSize returns the size in bytes of image as the runtime reports it,
// 0 when the runtime does not have it.
func (r *Runtime) ImageSize(ctx context.Context, image string) (_ uint64, err error) {
	defer r.record(opImageStatus, r.clock.Now(), &err)
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if status.Code(err) == codes.NotFound {
		return 0, nil
	}
	if err != nil {
		return 0, wrap(err, "image status of %s", image)
	}
	return resp.GetImage().GetSize(), nil
}

// ListImages returns every image the runtime has.
func (r *Runtime) ListImages(ctx context.Context) (_ []*runtimeapi.Image, err error) {
	defer r.record(opListImages, r.clock.Now(), &err)
	images, err := r.is.ListImages(ctx, nil)
	if err != nil {
		return nil, wrap(err, "list images")
	}
	return images, nil
}

// RemoveImage removes an image by reference or ID.
func (r *Runtime) RemoveImage(ctx context.Context, image string) (err error) {
	defer r.record(opRemoveImage, r.clock.Now(), &err)
	if err := r.is.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: image}); err != nil {
		return wrap(err, "remove image %s", image)
	}
	r.users.forget(image)
	return nil
}

// listSandboxes is the instrumented ListPodSandbox. The items of a full
// list (nil filter) can be the objects of earlier ones (the CRI client
// reuses what did not change): read-only, as every item listed here.
func (r *Runtime) listSandboxes(ctx context.Context, filter *runtimeapi.PodSandboxFilter) (_ []*runtimeapi.PodSandbox, err error) {
	defer r.record(opListPodSandbox, r.clock.Now(), &err)
	items, err := r.rs.ListPodSandbox(ctx, filter)
	if err != nil {
		return nil, wrap(err, "list pod sandboxes")
	}
	return items, nil
}

// listContainers is the instrumented ListContainers; its items are
// read-only, as listSandboxes'.
func (r *Runtime) listContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) (_ []*runtimeapi.Container, err error) {
	defer r.record(opListContainers, r.clock.Now(), &err)
	items, err := r.rs.ListContainers(ctx, filter)
	if err != nil {
		return nil, wrap(err, "list containers")
	}
	return items, nil
}

// sandboxStatus is the instrumented PodSandboxStatus.
func (r *Runtime) sandboxStatus(ctx context.Context, id string) (_ *runtimeapi.PodSandboxStatus, err error) {
	defer r.record(opPodSandboxStatus, r.clock.Now(), &err)
	resp, err := r.rs.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, wrap(err, "pod sandbox status of %s", id)
	}
	if resp.GetStatus() == nil {
		err = fmt.Errorf("pod sandbox status of %s: runtime returned no status", id)
		return nil, err
	}
	return resp.GetStatus(), nil
}

// containerStatus is the instrumented ContainerStatus.
func (r *Runtime) containerStatus(ctx context.Context, id string) (_ *runtimeapi.ContainerStatus, err error) {
	defer r.record(opContainerStatus, r.clock.Now(), &err)
	resp, err := r.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, wrap(err, "container status of %s", id)
	}
	if resp.GetStatus() == nil {
		err = fmt.Errorf("container status of %s: runtime returned no status", id)
		return nil, err
	}
	return resp.GetStatus(), nil
}
