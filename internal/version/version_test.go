package version

import (
	"runtime"
	"runtime/debug"
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

func settings(kv ...string) []debug.BuildSetting {
	var s []debug.BuildSetting
	for i := 0; i+1 < len(kv); i += 2 {
		s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
	}
	return s
}

const platform = runtime.GOOS + "/" + runtime.GOARCH

func TestInfoFrom(t *testing.T) {
	tests := []struct {
		name   string
		linked Info
		bi     *debug.BuildInfo
		want   Info
	}{
		{
			name:   "no build information",
			linked: Info{Version: "v0.0.0-dev"},
			want:   Info{Version: "v0.0.0-dev", GoVersion: runtime.Version(), Platform: platform},
		},
		{
			name:   "clean tree",
			linked: Info{Version: "v0.0.0-dev"},
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Settings: settings(
				"-trimpath", "true",
				"vcs", "git",
				"vcs.revision", "ede9718ab12c",
				"vcs.time", "2026-12-03T17:48:47Z",
				"vcs.modified", "false",
			)},
			want: Info{Version: "v0.0.0-dev", GitCommit: "ede9718ab12c", GitCommitDate: "2026-12-03T17:48:47Z",
				GitTreeState: "clean", GoVersion: "go1.26.0", Platform: platform},
		},
		{
			name:   "release build of a dirty tree",
			linked: Info{Version: "v1.2.3", BuildDate: "2026-12-04T08:00:00Z"},
			bi: &debug.BuildInfo{GoVersion: "go1.26.1", Settings: settings(
				"vcs.revision", "0123abcd",
				"vcs.modified", "true",
			)},
			want: Info{Version: "v1.2.3", GitCommit: "0123abcd", GitTreeState: "dirty",
				BuildDate: "2026-12-04T08:00:00Z", GoVersion: "go1.26.1", Platform: platform},
		},
		{
			name:   "built without vcs stamping",
			linked: Info{Version: "v1.2.3"},
			bi:     &debug.BuildInfo{GoVersion: "go1.26.0", Settings: settings("-buildvcs", "false")},
			want:   Info{Version: "v1.2.3", GoVersion: "go1.26.0", Platform: platform},
		},
		{
			name:   "linker-set commit without vcs stamping",
			linked: Info{Version: "v1.2.3", GitCommit: "feedbeef", GitTreeState: "dirty"},
			bi:     &debug.BuildInfo{GoVersion: "go1.26.0", Settings: settings("-buildvcs", "false")},
			want: Info{Version: "v1.2.3", GitCommit: "feedbeef", GitTreeState: "dirty",
				GoVersion: "go1.26.0", Platform: platform},
		},
		{
			name:   "the toolchain's record wins over the linker's",
			linked: Info{Version: "v1.2.3", GitCommit: "feedbeef", GitTreeState: "dirty"},
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Settings: settings(
				"vcs.revision", "0123abcd",
				"vcs.modified", "false",
			)},
			want: Info{Version: "v1.2.3", GitCommit: "0123abcd", GitTreeState: "clean",
				GoVersion: "go1.26.0", Platform: platform},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := infoFrom(tc.linked, tc.bi); got != tc.want {
				t.Errorf("infoFrom() = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestInfoString(t *testing.T) {
	tests := []struct {
		name string
		info Info
		want string
	}{
		{
			name: "everything known",
			info: Info{Version: "v1.2.3", GitCommit: "0123abcd", GitCommitDate: "2026-12-03T17:48:47Z",
				GitTreeState: "dirty", BuildDate: "2026-12-04T08:00:00Z", GoVersion: "go1.26.0", Platform: "linux/amd64"},
			want: "heartlet v1.2.3\n" +
				"  git commit:  0123abcd (dirty)\n" +
				"  commit date: 2026-12-03T17:48:47Z\n" +
				"  build date:  2026-12-04T08:00:00Z\n" +
				"  go:          go1.26.0\n" +
				"  platform:    linux/amd64\n",
		},
		{
			name: "no vcs information, no build date",
			info: Info{Version: "v0.0.0-dev", GoVersion: "go1.26.0", Platform: "linux/arm64"},
			want: "heartlet v0.0.0-dev\n" +
				"  git commit:  unknown\n" +
				"  go:          go1.26.0\n" +
				"  platform:    linux/arm64\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.String(); got != tc.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestGetMatchesBuildInfo checks Get against the test binary's own build
// information and the linker-settable variables.
func TestGetMatchesBuildInfo(t *testing.T) {
	savedV, savedD := Version, BuildDate
	t.Cleanup(func() { Version, BuildDate = savedV, savedD })
	Version, BuildDate = "v9.9.9", "2026-12-04T08:00:00Z"
	got := Get()
	if got.Version != "v9.9.9" || got.BuildDate != "2026-12-04T08:00:00Z" || got.Platform != platform {
		t.Errorf("Get() = %+v", got)
	}
	if bi, ok := debug.ReadBuildInfo(); ok && got.GoVersion != bi.GoVersion {
		t.Errorf("GoVersion = %q, want %q", got.GoVersion, bi.GoVersion)
	}
}
