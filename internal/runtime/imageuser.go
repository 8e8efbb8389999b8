package runtime

import (
	"context"
	"fmt"

	"github.com/heartlet/heartlet/internal/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageUser returns the user an image runs as, from its configuration
// as the runtime reports it: a numeric uid, or else a user name. An image
// that names no user runs as root: uid 0, as upstream treats it. It fails
// when the runtime does not have the image.
func (r *Runtime) ImageUser(ctx context.Context, image string) (_ *int64, _ string, err error) {
	defer r.record(opImageStatus, r.clock.Now(), &err)
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return nil, "", wrap(err, "image status of %s", image)
	}
	im := resp.GetImage()
	if im == nil {
		return nil, "", fmt.Errorf("image %s: %w", image, errdefs.ErrNotFound)
	}
	if uid := im.GetUid(); uid != nil {
		v := uid.GetValue()
		return &v, "", nil
	}
	if name := im.GetUsername(); name != "" {
		return nil, name, nil
	}
	root := int64(0)
	return &root, "", nil
}
