package fakecri

import "maps"

// SetImageSize sets the size the runtime reports for the image named ref
// (an ID, tag or digest reference); an unknown image is a test error.
func (s *Server) SetImageSize(ref string, size uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.findImage(ref)
	if im == nil {
		s.tb.Errorf("fakecri: SetImageSize: no image %s", ref)
		return
	}
	im.Size = size
}

// SetImagePinned sets the pinned flag the runtime reports for the image
// named ref; an unknown image is a test error.
func (s *Server) SetImagePinned(ref string, pinned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.findImage(ref)
	if im == nil {
		s.tb.Errorf("fakecri: SetImagePinned: no image %s", ref)
		return
	}
	im.Pinned = pinned
}

// SetStatusInfo sets the info a verbose Status returns (containerd puts
// its CRI configuration under "config").
func (s *Server) SetStatusInfo(info map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statusInfo = maps.Clone(info)
}
