package podsync

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/images"
)

// ensureImage makes the container's image present through the image
// manager and returns the reference to create the container with.
func (s *Syncer) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	if s.opts.Images == nil {
		return c.Image, nil
	}
	return s.opts.Images.EnsureImage(ctx, pod, c, sbCfg)
}

// imageReason is the waiting reason of an image failure: the reason the
// error wraps, ErrImagePull when it wraps none.
func imageReason(err error) string {
	for _, r := range []error{images.ErrImagePullBackOff, images.ErrImageNeverPull, images.ErrInvalidImageName, images.ErrImagePull} {
		if errors.Is(err, r) {
			return r.Error()
		}
	}
	return images.ErrImagePull.Error()
}
