package podfields

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFeaturesOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *runtimeapi.StatusResponse
		want Features
	}{
		{"no status", nil, Features{}},
		{"containerd 1.6: nothing reported", &runtimeapi.StatusResponse{}, Features{}},
		{"both, on the default handler", &runtimeapi.StatusResponse{
			Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{
				{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: false}},
				{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
			},
		}, Features{SupplementalGroupsPolicy: true, RecursiveReadOnlyMounts: true}},
		{"containerd 2.x: user namespaces on the default handler", &runtimeapi.StatusResponse{
			Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{
				{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
				{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
			},
		}, Features{SupplementalGroupsPolicy: true, RecursiveReadOnlyMounts: true, UserNamespaces: true}},
		{"user namespaces only on another handler", &runtimeapi.StatusResponse{
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}}},
		}, Features{}},
		{"recursive read-only only on another handler", &runtimeapi.StatusResponse{
			RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}}},
		}, Features{}},
	} {
		if got := FeaturesOf(tc.st); got != tc.want {
			t.Errorf("%s: FeaturesOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestImageVolumesOf(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          bool
	}{
		{"containerd", "1.6.20~ds1", false}, // Debian's
		{"containerd", "v1.7.27", false},
		{"containerd", "v2.0.5", false},
		{"containerd", "v2.1.0", true},
		{"containerd", "v2.4.2", true},
		{"containerd", "3.0.0", true},
		{"cri-o", "1.30.4", false},
		{"cri-o", "1.31.0", true},
		{"CRI-O", "1.33.1", true},
		{"docker", "28.0.0", false},
		{"", "v2.4.2", false},
		{"containerd", "", false},
		{"containerd", "v2", false},
		{"containerd", "vx.1", false},
		{"containerd", "2.x", false},
		{"containerd", "-3.9", false},
		{"containerd", "2.1-rc.1", true},
	} {
		v := &runtimeapi.VersionResponse{RuntimeName: tc.name, RuntimeVersion: tc.version}
		if got := ImageVolumesOf(v); got != tc.want {
			t.Errorf("ImageVolumesOf(%s %q) = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
	if ImageVolumesOf(nil) {
		t.Error("a runtime that gave no version mounts image volumes")
	}
}

func FuzzImageVolumesOf(f *testing.F) {
	for _, s := range []string{"v2.4.2", "1.6.20~ds1", "", "v", "1.", ".1", "99999999999999999999.1"} {
		f.Add("containerd", s)
	}
	f.Fuzz(func(t *testing.T, name, version string) {
		got := ImageVolumesOf(&runtimeapi.VersionResponse{RuntimeName: name, RuntimeVersion: version})
		if _, known := imageVolumeRuntimes[strings.ToLower(name)]; got && !known {
			t.Fatalf("unknown runtime %q accepted", name)
		}
	})
}
