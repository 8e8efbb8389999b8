// Package version holds heartlet's build version.
package version

import "runtime"

// Version is heartlet's version. Release builds set it with
// -ldflags "-X github.com/heartlet/heartlet/internal/version.Version=v1.2.3".
var Version = "v0.0.0-dev"

// UserAgent is the User-Agent heartlet sends to the API server and other
// HTTP peers, e.g. "heartlet/v1.2.3 (linux/amd64)".
func UserAgent() string {
	return "heartlet/" + Version + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
