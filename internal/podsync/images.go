package podsync

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// ensureImageVolumes makes the image of every image volume c mounts
// present through the image manager, with the volume's pullPolicy (the
// API server's default when empty: Always for a :latest or untagged
// reference, else IfNotPresent) and the pod's pull secrets, so backoff
// and events are those of container images. It returns the runtime's
// reference of each volume's image by volume reference.
func (s *Syncer) ensureImageVolumes(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig) (map[string]string, error) {
	mounted := make(map[string]bool, len(c.VolumeMounts))
	for _, vm := range c.VolumeMounts {
		mounted[vm.Name] = true
	}
	var refs map[string]string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Image == nil || !mounted[v.Name] {
			continue
		}
		if refs == nil {
			refs = map[string]string{}
		}
		if _, done := refs[v.Image.Reference]; done {
			continue
		}
		pseudo := &v1.Container{Name: c.Name, Image: v.Image.Reference, ImagePullPolicy: imageVolumePullPolicy(v.Image)}
		ref, err := s.ensureImage(ctx, pod, pseudo, sbCfg)
		if err != nil {
			return nil, fmt.Errorf("image volume %q: %w", v.Name, err)
		}
		refs[v.Image.Reference] = ref
	}
	return refs, nil
}

// imageVolumePullPolicy is the volume's pullPolicy, defaulted as the API
// server does.
func imageVolumePullPolicy(src *v1.ImageVolumeSource) v1.PullPolicy {
	if src.PullPolicy != "" {
		return src.PullPolicy
	}
	if usesLatest(src.Reference) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// usesLatest tells whether ref names the latest tag, explicitly or by
// having neither tag nor digest.
func usesLatest(ref string) bool {
	if strings.Contains(ref, "@") {
		return false
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	i := strings.LastIndex(name, ":")
	return i < 0 || name[i+1:] == "latest"
}

// resolveImageMounts points each image mount at the runtime's reference
// of its image; a mount whose image was not made present is an error,
// never handed to the runtime to pull on its own.
func resolveImageMounts(mounts []*runtimeapi.Mount, refs map[string]string) error {
	for _, m := range mounts {
		if m.GetImage() == nil {
			continue
		}
		ref, ok := refs[m.Image.UserSpecifiedImage]
		if !ok {
			return fmt.Errorf("image volume mount %s: image %q was not pulled", m.ContainerPath, m.Image.UserSpecifiedImage)
		}
		m.Image.Image = ref
	}
	return nil
}
