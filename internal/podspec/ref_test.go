package podspec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventObject(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1", ResourceVersion: "42"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init"}},
			Containers:          []v1.Container{{Name: "app"}, {Name: "side"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		},
	}
	ref := func(path string) *v1.ObjectReference {
		return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: "uid-1", ResourceVersion: "42", FieldPath: path}
	}
	for _, tt := range []struct {
		container string
		want      any
	}{
		{"app", ref("spec.containers{app}")},
		{"side", ref("spec.containers{side}")},
		{"init", ref("spec.initContainers{init}")},
		{"debug", ref("spec.ephemeralContainers{debug}")},
		{"image-volume", pod},
	} {
		if got := EventObject(pod, tt.container); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("EventObject(%q) = %#v, want %#v", tt.container, got, tt.want)
		}
	}
}
