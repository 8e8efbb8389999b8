package podfields

import (
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
