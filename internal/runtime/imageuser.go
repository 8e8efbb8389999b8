package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/heartlet/heartlet/internal/errdefs"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageUser returns the user an image runs as, from its configuration
// as the runtime reports it: a numeric uid, or else a user name. An image
// that names no user runs as root: uid 0, as upstream treats it. It fails
// when the runtime does not have the image.
//
// image is usually the ID that ImageRef or PullImage returned: the user
// of an image ID learnt from any image status answer is kept (an ID names
// the image's configuration, so its user never changes), and the runtime
// is then not asked again.
func (r *Runtime) ImageUser(ctx context.Context, image string) (_ *int64, _ string, err error) {
	if u, ok := r.users.get(image); ok {
		return u.result()
	}
	defer r.record(opImageStatus, r.clock.Now(), &err)
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return nil, "", wrap(err, "image status of %s", image)
	}
	im := resp.GetImage()
	if im == nil {
		return nil, "", fmt.Errorf("image %s: %w", image, errdefs.ErrNotFound)
	}
	return r.users.learn(im).result()
}

// imageUser is the user an image's configuration names.
type imageUser struct {
	uid      *int64 // nil when a name or nothing is given
	username string
}

// result is the user as ImageUser returns it: no user means root.
func (u imageUser) result() (*int64, string, error) {
	if u.uid != nil {
		v := *u.uid
		return &v, "", nil
	}
	if u.username != "" {
		return nil, u.username, nil
	}
	return new(int64), "", nil
}

// maxImageUsers bounds the users kept: a node holds far fewer images; past
// it the cache starts again empty.
const maxImageUsers = 1024

// imageUsers keeps the user of each image by ID. Safe for concurrent use;
// the zero value is ready.
type imageUsers struct {
	mu   sync.Mutex
	byID map[string]imageUser
}

// learn records the user of im by its ID and returns it.
func (c *imageUsers) learn(im *runtimeapi.Image) imageUser {
	u := imageUser{username: im.GetUsername()}
	if uid := im.GetUid(); uid != nil {
		v := uid.GetValue()
		u.uid = &v
	}
	id := im.GetId()
	if id == "" {
		return u
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID) >= maxImageUsers {
		c.byID = map[string]imageUser{}
	}
	c.byID[id] = u
	return u
}

func (c *imageUsers) get(id string) (imageUser, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.byID[id]
	return u, ok
}

func (c *imageUsers) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}
