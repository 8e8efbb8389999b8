package version

import (
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

func TestKubelet(t *testing.T) {
	tests := []struct {
		kube, heartlet, want string
	}{
		{"v1.37.2", "v0.1.0", "v1.37.2+heartlet-v0.1.0"},
		{"v1.37.2", "v0.0.0-dev", "v1.37.2+heartlet-v0.0.0-dev"},
		{"v1.37.2", "v0.2.0+dirty/x", "v1.37.2+heartlet-v0.2.0-dirty-x"},
		{"v1.37.2", "", "v1.37.2+heartlet"},
	}
	for _, tc := range tests {
		got := kubeletVersion(tc.kube, tc.heartlet)
		if got != tc.want {
			t.Errorf("kubeletVersion(%q, %q) = %q, want %q", tc.kube, tc.heartlet, got, tc.want)
		}
		v, err := utilversion.ParseSemantic(got)
		if err != nil {
			t.Errorf("%q is not semantic: %v", got, err)
			continue
		}
		if "v"+v.String() != got || v.Major() != 1 || v.Minor() != 37 || v.Patch() != 2 {
			t.Errorf("%q parses as %v", got, v)
		}
	}
	if got := Kubelet("v0.1.0"); !strings.HasPrefix(got, "v1.") || !strings.HasSuffix(got, "+heartlet-v0.1.0") {
		t.Errorf("Kubelet = %q", got)
	}
	for in, want := range map[string]string{"v0.37.2": "v1.37.2", "v0.38.0-alpha.1": "v1.38.0", "v1.2.3": "", "v0.x.1": ""} {
		got, ok := apiToKubernetes(in)
		if got != want || ok != (want != "") {
			t.Errorf("apiToKubernetes(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestKubernetesMinor(t *testing.T) {
	got := KubernetesMinor()
	if !strings.HasPrefix(Kubernetes(), "v"+got+".") || strings.Count(got, ".") != 1 {
		t.Errorf("KubernetesMinor() = %q, Kubernetes() = %q", got, Kubernetes())
	}
}
