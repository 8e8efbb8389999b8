package criclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// imageService is the criapi.ImageManagerService of one connection.
type imageService struct {
	conn    *grpc.ClientConn
	client  runtimeapi.ImageServiceClient
	timeout time.Duration
}

var _ criapi.ImageManagerService = (*imageService)(nil)

// NewImageService connects to the CRI v1 image service at endpoint
// (unix:///path) and checks that it answers the ImageFsInfo call within
// timeout. timeout also bounds every later call but PullImage. On error
// nothing is left open; a gRPC status (Unimplemented from a peer that is not
// a CRI v1 image service, DeadlineExceeded, Unavailable) stays in the chain.
func NewImageService(ctx context.Context, endpoint string, timeout time.Duration) (criapi.ImageManagerService, error) {
	conn, err := dial(endpoint, timeout)
	if err != nil {
		return nil, fmt.Errorf("CRI image service: %w", err)
	}
	s := &imageService{conn: conn, client: runtimeapi.NewImageServiceClient(conn), timeout: timeout}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := s.client.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{}); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("CRI v1 image service: %w", fail(ctx, "ImageFsInfo", err))
	}
	klog.FromContext(ctx).V(4).Info("Connected to CRI v1 image service", "endpoint", endpoint)
	return s, nil
}

// Close closes the connection.
func (s *imageService) Close(context.Context) error {
	return s.conn.Close()
}

// ListImages lists the images that match filter.
func (s *imageService) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ListImages(cctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, fail(ctx, "ListImages", err)
	}
	return resp.Images, nil
}

// ImageStatus returns an image's status (and the runtime's verbose info when
// verbose is set); its Image is nil when the runtime does not have it. An
// image without ID or size is an error.
func (s *imageService) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
	if err != nil {
		return nil, fail(ctx, "ImageStatus", err)
	}
	if im := resp.Image; im != nil && (im.Id == "" || im.Size == 0) {
		return nil, invalid(ctx, "ImageStatus", "image %s has no ID or size", image.GetImage())
	}
	return resp, nil
}

// PullImage pulls an image and returns its reference (ID). It is bounded by
// ctx only: a pull takes as long as the download does. A gRPC Unknown
// status is reduced to its message, which is the runtime's own error.
func (s *imageService) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	resp, err := s.client.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig})
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.Unknown {
			err = errors.New(st.Message())
		}
		return "", fail(ctx, "PullImage", err)
	}
	if resp.ImageRef == "" {
		return "", invalid(ctx, "PullImage", "no image reference for %s", image.GetImage())
	}
	return resp.ImageRef, nil
}

// RemoveImage removes an image.
func (s *imageService) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.client.RemoveImage(cctx, &runtimeapi.RemoveImageRequest{Image: image}); err != nil {
		return fail(ctx, "RemoveImage", err)
	}
	return nil
}

// ImageFsInfo returns the filesystems that hold images and container
// writable layers.
func (s *imageService) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.client.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fail(ctx, "ImageFsInfo", err)
	}
	return resp, nil
}
