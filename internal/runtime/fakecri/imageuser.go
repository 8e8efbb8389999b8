package fakecri

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SetImageUser sets the user of an image's configuration, as ImageStatus
// reports it: a numeric uid, or (uid nil) a user name. The image is added
// when the server does not have it.
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
}

func imageUID(uid *int64) *runtimeapi.Int64Value {
	if uid == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *uid}
}
