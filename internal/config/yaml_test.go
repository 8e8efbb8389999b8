package config

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestMarshalYAMLRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*kubeletv1beta1.KubeletConfiguration)
	}{
		{"defaults", func(*kubeletv1beta1.KubeletConfiguration) {}},
		{"strings that look like other YAML types", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.ClusterDomain = "0o17"
			kc.ProviderID = "yes"
			kc.KubeletCgroups = "123"
			kc.SystemCgroups = "null"
			kc.CgroupRoot = "/"
			kc.StaticPodURLHeader = map[string][]string{"X-Flag": {"true", "1e3", "~", ""}}
			kc.FeatureGates = map[string]bool{"SomeGate": true}
		}},
		{"nested values", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.EvictionSoft = map[string]string{"memory.available": "300Mi"}
			kc.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
			kc.RegisterWithTaints = []v1.Taint{{Key: "example.com/a", Value: "b", Effect: v1.TaintEffectNoExecute}}
			kc.ReservedMemory = []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: v1.ResourceList{v1.ResourceMemory: mustQuantity("1Gi")}}}
			kc.MemoryThrottlingFactor = ptr.To(0.75)
			kc.Logging.Verbosity = 6
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := NewDefault()
			tc.mutate(kc)
			out, err := MarshalYAML(kc)
			if err != nil {
				t.Fatalf("MarshalYAML: %v", err)
			}
			if !strings.HasPrefix(string(out), "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n") {
				t.Errorf("output does not start with apiVersion and kind:\n%s", out)
			}
			d, problems := decode(out)
			if len(problems) > 0 {
				t.Fatalf("decoding the output: %v\n%s", problems, out)
			}
			again, err := MarshalYAML(d.config)
			if err != nil {
				t.Fatalf("MarshalYAML again: %v", err)
			}
			if string(again) != string(out) {
				t.Errorf("round trip changed the YAML:\n%s\n---\n%s", out, again)
			}
			if !reflect.DeepEqual(d.config.ClusterDomain, kc.ClusterDomain) || !reflect.DeepEqual(d.config.StaticPodURLHeader, kc.StaticPodURLHeader) {
				t.Errorf("round trip changed string values: %q %v", d.config.ClusterDomain, d.config.StaticPodURLHeader)
			}
		})
	}
}

func mustQuantity(s string) resource.Quantity {
	return resource.MustParse(s)
}
