package runtime

import (
	"slices"
	"testing"
)

func TestSandboxImages(t *testing.T) {
	tests := []struct {
		name string
		info map[string]string
		want []string
	}{
		{"containerd 1.x", map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.9","containerd":{}}`}, []string{"registry.k8s.io/pause:3.9"}},
		{"containerd 2.x", map[string]string{"config": `{"pinnedImages":{"sandbox":"registry.k8s.io/pause:3.10"}}`}, []string{"registry.k8s.io/pause:3.10"}},
		{"no config", map[string]string{"lastCNILoadStatus": "OK"}, nil},
		{"config without it", map[string]string{"config": `{"containerd":{}}`}, nil},
		{"not JSON", map[string]string{"config": `{`}, nil},
		{"wrong type", map[string]string{"config": `{"sandboxImage":3}`}, nil},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SandboxImages(tt.info); !slices.Equal(got, tt.want) {
				t.Errorf("SandboxImages = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzSandboxImages feeds the runtime's verbose status info (untrusted
// JSON) to SandboxImages: nothing may panic and no empty reference comes
// out.
func FuzzSandboxImages(f *testing.F) {
	f.Add(`{"sandboxImage":"registry.k8s.io/pause:3.9"}`)
	f.Add(`{"pinnedImages":{"sandbox":"p:1","other":""}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, config string) {
		for _, ref := range SandboxImages(map[string]string{"config": config}) {
			if ref == "" {
				t.Errorf("SandboxImages(%q) returned an empty reference", config)
			}
		}
	})
}
