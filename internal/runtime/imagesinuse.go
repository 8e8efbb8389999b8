package runtime

import (
	"context"
	"encoding/json"
)

// ImagesInUse returns the images the runtime's containers use, whatever
// their state, until they are removed (the image as the container was
// created with and the image reference the runtime resolved it to), and
// the runtime's sandbox (pause) image when its verbose status names it
// (containerd's "config" info: sandboxImage, or pinnedImages.sandbox).
func (r *Runtime) ImagesInUse(ctx context.Context) ([]string, error) {
	containers, err := r.listContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range containers {
		if img := c.GetImage().GetImage(); img != "" {
			out = append(out, img)
		}
		if ref := c.GetImageRef(); ref != "" {
			out = append(out, ref)
		}
	}
	// The sandbox image is best effort: a runtime that does not report it
	// pins it (CRI's pinned flag) or keeps it in use by its sandboxes.
	if st, err := r.StatusInfo(ctx); err == nil {
		out = append(out, SandboxImages(st.GetInfo())...)
	}
	return out, nil
}

// SandboxImages reads the sandbox image from a runtime's verbose status
// info: containerd 1.x reports it as config.sandboxImage, 2.x as
// config.pinnedImages.sandbox. It returns nothing when neither is there
// or the document does not parse.
func SandboxImages(info map[string]string) []string {
	raw, ok := info["config"]
	if !ok {
		return nil
	}
	var cfg struct {
		SandboxImage string            `json:"sandboxImage"`
		PinnedImages map[string]string `json:"pinnedImages"`
	}
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return nil
	}
	var out []string
	if cfg.SandboxImage != "" {
		out = append(out, cfg.SandboxImage)
	}
	if s := cfg.PinnedImages["sandbox"]; s != "" {
		out = append(out, s)
	}
	return out
}
