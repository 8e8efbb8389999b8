package agent

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/runtime"
)

func TestOrphanPod(t *testing.T) {
	rp := &runtime.PodStatus{
		UID: "u1", Name: "web-node", Namespace: "default",
		Containers: []*runtime.ContainerStatus{
			{Name: "c", Annotations: map[string]string{runtime.AnnotationGrace: "7"}},
		},
	}
	pod := orphanPod(rp)
	if pod.UID != "u1" || pod.Name != "web-node" || pod.Namespace != "default" {
		t.Errorf("identity = %s/%s %s", pod.Namespace, pod.Name, pod.UID)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g != 7 {
		t.Errorf("grace = %v, want 7 from the container annotation", g)
	}
	if g := orphanPod(&runtime.PodStatus{UID: "u2"}).Spec.TerminationGracePeriodSeconds; g != nil {
		t.Errorf("grace without annotation = %d, want unset (the default applies)", *g)
	}
}

func TestPodRuns(t *testing.T) {
	tests := []struct {
		name string
		rp   *runtime.PodStatus
		want bool
	}{
		{"nothing", &runtime.PodStatus{}, false},
		{"ready sandbox", &runtime.PodStatus{Sandboxes: []*runtime.SandboxStatus{{State: runtime.SandboxReady}}}, true},
		{"stopped sandbox, exited container", &runtime.PodStatus{
			Sandboxes:  []*runtime.SandboxStatus{{State: runtime.SandboxNotReady}},
			Containers: []*runtime.ContainerStatus{{State: runtime.ContainerExited}},
		}, false},
		{"running container", &runtime.PodStatus{Containers: []*runtime.ContainerStatus{{State: runtime.ContainerRunning}}}, true},
	}
	for _, tt := range tests {
		if got := podRuns(tt.rp); got != tt.want {
			t.Errorf("%s: podRuns = %v, want %v", tt.name, got, tt.want)
		}
	}
}

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
