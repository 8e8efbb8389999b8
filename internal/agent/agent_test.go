package agent

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podconfig"
)

func TestFindAPIPod(t *testing.T) {
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "a",
		Annotations: map[string]string{podconfig.AnnotationConfigSource: podconfig.SourceAPIServer}}}
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n", UID: "s",
		Annotations: map[string]string{podconfig.AnnotationConfigSource: "file"}}}
	mirror := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-n", UID: "m",
		Annotations: map[string]string{podconfig.AnnotationConfigSource: "file", podconfig.AnnotationConfigMirror: "h"}}}
	desired := []*v1.Pod{api, static}
	tests := []struct {
		ns, name string
		wantUID  string
	}{
		{"default", "web", "a"},
		{"kube-system", "etcd-n", "m"}, // the mirror, never the static pod
		{"default", "nope", ""},
	}
	for _, tt := range tests {
		p, ok := findAPIPod(tt.ns, tt.name, desired, []*v1.Pod{mirror})
		if tt.wantUID == "" {
			if ok {
				t.Errorf("%s/%s found %s, want none", tt.ns, tt.name, p.UID)
			}
			continue
		}
		if !ok || string(p.UID) != tt.wantUID {
			t.Errorf("%s/%s = %v, want UID %s", tt.ns, tt.name, p, tt.wantUID)
		}
	}
}
