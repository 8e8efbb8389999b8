package runtime

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/heartlet/heartlet/internal/podconfig"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func testPod(name string, uid types.UID) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   "default",
			UID:         uid,
			Labels:      map[string]string{"app": name, LabelPodName: "spoofed"},
			Annotations: map[string]string{podconfig.AnnotationConfigSource: "file"},
		},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name:                     "main",
				Image:                    "localhost:5000/busybox:1.35",
				Command:                  []string{"sleep", "3600"},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Ports:                    []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			}},
		},
	}
}

func TestSandboxLabels(t *testing.T) {
	pod := testPod("web", "uid-1")
	got := SandboxLabels(pod)
	want := map[string]string{
		"app":             "web",
		LabelPodName:      "web",
		LabelPodNamespace: "default",
		LabelPodUID:       "uid-1",
		LabelManagedBy:    "true",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SandboxLabels = %v, want %v", got, want)
	}
	if pod.Labels[LabelPodName] != "spoofed" {
		t.Errorf("SandboxLabels modified the pod's labels: %v", pod.Labels)
	}
	ann := SandboxAnnotations(pod)
	if !reflect.DeepEqual(ann, pod.Annotations) {
		t.Errorf("SandboxAnnotations = %v, want %v", ann, pod.Annotations)
	}
	ann["x"] = "y"
	if _, ok := pod.Annotations["x"]; ok {
		t.Error("SandboxAnnotations returned the pod's own map")
	}
}

func TestContainerLabels(t *testing.T) {
	got := ContainerLabels(testPod("web", "uid-1"), "main")
	want := map[string]string{
		LabelPodName:       "web",
		LabelPodNamespace:  "default",
		LabelPodUID:        "uid-1",
		LabelContainerName: "main",
		LabelManagedBy:     "true",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ContainerLabels = %v, want %v", got, want)
	}
}

func TestContainerAnnotationsRoundTrip(t *testing.T) {
	pod := testPod("web", "uid-1")
	c := &pod.Spec.Containers[0]
	tests := []struct {
		name    string
		restart int
		init    bool
	}{
		{"first app attempt", 0, false},
		{"restarted app", 7, false},
		{"init container", 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := ContainerAnnotations(pod, c, tt.restart, tt.init)
			info, err := ParseContainerAnnotations(ann)
			if err != nil {
				t.Fatalf("ParseContainerAnnotations(%v): %v", ann, err)
			}
			grace := int64(30)
			want := ContainerAnnotationInfo{
				Hash:                      HashContainer(c),
				RestartCount:              tt.restart,
				Init:                      tt.init,
				TerminationMessagePath:    "/dev/termination-log",
				TerminationMessagePolicy:  v1.TerminationMessageReadFile,
				PodTerminationGracePeriod: &grace,
				Ports:                     c.Ports,
			}
			if !reflect.DeepEqual(info, want) {
				t.Errorf("round trip = %+v, want %+v", info, want)
			}
		})
	}
}

func TestParseContainerAnnotationsErrors(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want ContainerAnnotationInfo
	}{
		{"bad hash", map[string]string{AnnotationHash: "xyz", AnnotationRestart: "3"}, ContainerAnnotationInfo{RestartCount: 3}},
		{"bad restart", map[string]string{AnnotationHash: "ff", AnnotationRestart: "three"}, ContainerAnnotationInfo{Hash: 0xff}},
		{"negative restart", map[string]string{AnnotationRestart: "-1"}, ContainerAnnotationInfo{}},
		{"bad init", map[string]string{AnnotationInit: "maybe"}, ContainerAnnotationInfo{}},
		{"bad grace", map[string]string{AnnotationGrace: "soon"}, ContainerAnnotationInfo{}},
		{"bad ports", map[string]string{AnnotationPorts: "{"}, ContainerAnnotationInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ParseContainerAnnotations(tt.ann)
			if err == nil {
				t.Fatalf("ParseContainerAnnotations(%v) = nil error, want one", tt.ann)
			}
			if !reflect.DeepEqual(info, tt.want) {
				t.Errorf("ParseContainerAnnotations(%v) = %+v, want %+v", tt.ann, info, tt.want)
			}
		})
	}
	if info, err := ParseContainerAnnotations(nil); err != nil || !reflect.DeepEqual(info, ContainerAnnotationInfo{}) {
		t.Errorf("ParseContainerAnnotations(nil) = %+v, %v; want zero, nil", info, err)
	}
}

func FuzzParseContainerAnnotations(f *testing.F) {
	f.Add("1a2b", "3", "true", "30", `[{"containerPort":80}]`)
	f.Add("", "", "", "", "")
	f.Add("ffffffffffffffffff", "-4", "1", "x", "null")
	f.Fuzz(func(t *testing.T, hash, restart, init, grace, ports string) {
		ann := map[string]string{AnnotationHash: hash, AnnotationRestart: restart, AnnotationInit: init, AnnotationGrace: grace, AnnotationPorts: ports}
		info, err := ParseContainerAnnotations(ann)
		if info.RestartCount < 0 {
			t.Fatalf("negative restart count %d from %q", info.RestartCount, restart)
		}
		if err != nil {
			return
		}
		if h, _ := strconv.ParseUint(hash, 16, 64); h != info.Hash {
			t.Fatalf("hash %q decoded as %x", hash, info.Hash)
		}
		if info.PodTerminationGracePeriod == nil || strconv.FormatInt(*info.PodTerminationGracePeriod, 10) != mustCanonInt(t, grace) {
			t.Fatalf("grace %q decoded as %v", grace, info.PodTerminationGracePeriod)
		}
		b, err := json.Marshal(info.Ports)
		if err != nil {
			t.Fatal(err)
		}
		var again []v1.ContainerPort
		if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, info.Ports) {
			t.Fatalf("ports %q do not round-trip: %v", ports, err)
		}
	})
}

func mustCanonInt(t *testing.T, s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("grace %q accepted but not an integer: %v", s, err)
	}
	return strconv.FormatInt(n, 10)
}

func TestHashContainer(t *testing.T) {
	base := func() *v1.Container { return testPod("web", "uid-1").Spec.Containers[0].DeepCopy() }
	tests := []struct {
		name   string
		mutate func(c *v1.Container)
		same   bool
	}{
		{"identical spec", func(*v1.Container) {}, true},
		{"resource limits change", func(c *v1.Container) {
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}
		}, true},
		{"resource requests change", func(c *v1.Container) {
			c.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
		}, true},
		// Fields the API does not let change on a running pod do not
		// count, as upstream: a new default never restarts containers.
		{"env change", func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }, true},
		{"probe added", func(c *v1.Container) {
			c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, true},
		{"image change", func(c *v1.Container) { c.Image = "localhost:5000/busybox:1.36" }, false},
		{"name change", func(c *v1.Container) { c.Name = "other" }, false},
	}
	want := HashContainer(base())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(c)
			got := HashContainer(c)
			if (got == want) != tt.same {
				t.Errorf("HashContainer after %s = %x, base %x; want same=%v", tt.name, got, want, tt.same)
			}
		})
	}
}

// TestHashContainerGolden pins the hash values: they must not change
// between processes or releases, or running containers would be restarted
// after an upgrade. The expected values are the upstream kubelet's own
// (pkg/kubelet/container helpers_test.go, TestHashContainer and the resize
// cases), so containers the upstream kubelet started are adopted.
func TestHashContainerGolden(t *testing.T) {
	tests := []struct {
		c    *v1.Container
		want uint64
	}{
		{&v1.Container{Name: "test_container", Image: "foo/image:v1", Args: []string{"/bin/sh", "-c", "echo abc"},
			Ports: []v1.ContainerPort{{ContainerPort: 8001}}}, 0x8e45cbd0},
		{&v1.Container{Name: "foo", Image: "bar"}, 0x11a6d6d6},
	}
	for _, tt := range tests {
		if got := HashContainer(tt.c); got != tt.want {
			t.Errorf("HashContainer(%s, %s) = %#x, want %#x", tt.c.Name, tt.c.Image, got, tt.want)
		}
	}
}
