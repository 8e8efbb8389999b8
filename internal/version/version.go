// Package version holds heartlet's build version and build information.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is heartlet's version. Release builds set it with
// -ldflags "-X github.com/heartlet/heartlet/internal/version.Version=v1.2.3"
// (make release does).
var Version = "v0.0.0-dev"

// BuildDate is when the binary was built, RFC 3339 in UTC; empty unless set
// with -ldflags "-X github.com/heartlet/heartlet/internal/version.BuildDate=...".
var BuildDate = ""

// GitCommit and GitTreeState ("clean" or "dirty") are what the linker was
// told (make build and make release set them). The Go toolchain's own
// record (go build -buildvcs) wins when there is one; these cover builds it
// does not stamp, such as those from a git worktree or with
// GOFLAGS=-buildvcs=false.
var (
	GitCommit    = ""
	GitTreeState = ""
)

// UserAgent is the User-Agent heartlet sends to the API server and other
// HTTP peers, e.g. "heartlet/v1.2.3 (linux/amd64)".
func UserAgent() string {
	return "heartlet/" + Version + " (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// Info is what `heartlet version` prints.
type Info struct {
	// Version is Version.
	Version string
	// GitCommit is the commit the binary was built from; empty when the
	// build recorded none (go build -buildvcs=false, or outside a
	// repository).
	GitCommit string
	// GitCommitDate is the commit's time, RFC 3339; empty when unknown.
	GitCommitDate string
	// GitTreeState is "clean" or "dirty" (uncommitted changes were built
	// in); empty when unknown.
	GitTreeState string
	// BuildDate is BuildDate.
	BuildDate string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return infoFrom(Info{Version: Version, BuildDate: BuildDate, GitCommit: GitCommit, GitTreeState: GitTreeState}, bi)
}

// infoFrom completes linked, the linker-set values, with the build
// information the Go toolchain recorded (bi, nil when there is none), which
// wins where both have a value.
func infoFrom(linked Info, bi *debug.BuildInfo) Info {
	info := linked
	info.GoVersion = runtime.Version()
	info.Platform = runtime.GOOS + "/" + runtime.GOARCH
	if bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.GitCommit = s.Value
		case "vcs.time":
			info.GitCommitDate = s.Value
		case "vcs.modified":
			switch s.Value {
			case "true":
				info.GitTreeState = "dirty"
			case "false":
				info.GitTreeState = "clean"
			}
		}
	}
	return info
}

// String formats the Info as `heartlet version` prints it: the version on
// the first line, then one "key: value" line per known field.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "heartlet %s\n", i.Version)
	line := func(key, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-12s %s\n", key+":", value)
		}
	}
	commit := i.GitCommit
	if commit == "" {
		commit = "unknown"
	} else if i.GitTreeState != "" {
		commit += " (" + i.GitTreeState + ")"
	}
	line("git commit", commit)
	line("commit date", i.GitCommitDate)
	line("build date", i.BuildDate)
	line("go", i.GoVersion)
	line("platform", i.Platform)
	return b.String()
}
