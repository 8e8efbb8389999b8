package fakecri

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SetImageUser sets the user of an image's configuration, as ImageStatus
// reports it: a numeric uid, or (uid nil) a user name. The image is added
// when the server does not have it; its ID changes with its user.
func (s *Server) SetImageUser(ref string, uid *int64, username string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.addImage(ref)
	if uid != nil {
		v := *uid
		uid = &v
	}
	im.UID = uid
	im.Username = username
	// The user is part of the image's configuration, which its ID is the
	// digest of: another user is another image ID, as for an image
	// rebuilt and pushed under the same tag.
	key := "fakecri/image/" + normalize(ref)
	if uid != nil || username != "" {
		key += fmt.Sprintf("/user/%v/%s", deref(uid), username)
	}
	id := sha256.Sum256([]byte(key))
	delete(s.images, im.ID)
	im.ID = "sha256:" + hex.EncodeToString(id[:])
	s.images[im.ID] = im
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func imageUID(uid *int64) *runtimeapi.Int64Value {
	if uid == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *uid}
}
