package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const examplesDir = "../../examples/static-pods"

// exampleCase is what one example manifest must contain.
type exampleCase struct {
	file           string
	name           string
	initContainers []string
	containers     []string
	hostPorts      []int32
	restartPolicy  v1.RestartPolicy
}

// TestExampleStaticPods checks that every example manifest decodes strictly
// into the Pod it is documented to be.
func TestExampleStaticPods(t *testing.T) {
	tests := []exampleCase{
		{file: "web.yaml", name: "web", containers: []string{"httpd"}, hostPorts: []int32{18080}},
		{file: "init.yaml", name: "init", initContainers: []string{"init1", "init2"}, containers: []string{"app"}},
		{file: "crashloop.yaml", name: "crashloop", containers: []string{"crash"}, restartPolicy: v1.RestartPolicyAlways},
	}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*"))
	if err != nil {
		t.Fatalf("list %s: %v", examplesDir, err)
	}
	for _, f := range files {
		base := filepath.Base(f)
		if !slices.ContainsFunc(tests, func(tt exampleCase) bool { return tt.file == base }) {
			t.Errorf("example %s has no entry in this test", base)
		}
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(examplesDir, tt.file))
			if err != nil {
				t.Fatalf("read example: %v", err)
			}
			var pod v1.Pod
			if err := yaml.UnmarshalStrict(data, &pod); err != nil {
				t.Fatalf("decode %s: %v", tt.file, err)
			}
			if pod.APIVersion != "v1" || pod.Kind != "Pod" {
				t.Errorf("apiVersion/kind = %s/%s, want v1/Pod", pod.APIVersion, pod.Kind)
			}
			if pod.Name != tt.name {
				t.Errorf("name = %q, want %q", pod.Name, tt.name)
			}
			if got := containerNames(pod.Spec.InitContainers); !slices.Equal(got, tt.initContainers) {
				t.Errorf("init containers = %v, want %v", got, tt.initContainers)
			}
			if got := containerNames(pod.Spec.Containers); !slices.Equal(got, tt.containers) {
				t.Errorf("containers = %v, want %v", got, tt.containers)
			}
			var hostPorts []int32
			for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
				if c.Image != "localhost:5000/busybox:1.35" {
					t.Errorf("container %s: image %q, want the local test image", c.Name, c.Image)
				}
				if c.ImagePullPolicy != v1.PullIfNotPresent {
					t.Errorf("container %s: imagePullPolicy %q, want IfNotPresent", c.Name, c.ImagePullPolicy)
				}
				if len(c.Command) == 0 || !strings.HasPrefix(c.Command[0], "sh") {
					t.Errorf("container %s: command %q does not start with sh", c.Name, c.Command)
				}
				for _, p := range c.Ports {
					if p.HostPort != 0 {
						hostPorts = append(hostPorts, p.HostPort)
					}
				}
			}
			if !slices.Equal(hostPorts, tt.hostPorts) {
				t.Errorf("host ports = %v, want %v", hostPorts, tt.hostPorts)
			}
			if pod.Spec.RestartPolicy != tt.restartPolicy {
				t.Errorf("restartPolicy = %q, want %q", pod.Spec.RestartPolicy, tt.restartPolicy)
			}
		})
	}
}

func containerNames(cs []v1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}
