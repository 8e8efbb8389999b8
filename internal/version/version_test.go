package version

import (
	"runtime"
	"testing"
)

func TestUserAgent(t *testing.T) {
	tests := []struct {
		name    string
		version string
		want    string
	}{
		{"default", "v0.0.0-dev", "heartlet/v0.0.0-dev (" + runtime.GOOS + "/" + runtime.GOARCH + ")"},
		{"release", "v1.2.3", "heartlet/v1.2.3 (" + runtime.GOOS + "/" + runtime.GOARCH + ")"},
	}
	saved := Version
	t.Cleanup(func() { Version = saved })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			Version = tc.version
			if got := UserAgent(); got != tc.want {
				t.Errorf("UserAgent() = %q, want %q", got, tc.want)
			}
		})
	}
}
