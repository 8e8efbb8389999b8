package manifest

import (
	"strings"
	"testing"

	"github.com/heartlet/heartlet/internal/podconfig"
)

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(webYAML))
	f.Add([]byte(webJSON))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  initContainers: [{name: i, image: b, restartPolicy: Always, ports: [{containerPort: 1, hostPort: 2}]}]\n  containers: [{name: c, image: b, resources: {limits: {cpu: 1, memory: 1Gi}}}]\n  volumes: [{name: v}]\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: &m {name: a}\nspec: {containers: [{name: c, image: b}]}\nx: *m\n"))
	f.Add([]byte("{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - resources: {limits: {cpu: 1x}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, err := Parse(data, testOpts)
		if err != nil {
			if pod != nil {
				t.Fatal("Parse returned a pod with an error")
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if pod.UID == "" {
			t.Fatal("accepted pod has no UID")
		}
		if !strings.HasSuffix(pod.Name, "-node-1") || len(pod.Name) <= len("-node-1") {
			t.Fatalf("accepted pod name %q lacks the node suffix", pod.Name)
		}
		if pod.Namespace == "" || pod.Spec.NodeName != testOpts.NodeName {
			t.Fatalf("accepted pod namespace %q nodeName %q", pod.Namespace, pod.Spec.NodeName)
		}
		if pod.Annotations[podconfig.AnnotationConfigHash] != string(pod.UID) {
			t.Fatal("config.hash differs from UID")
		}
		if len(pod.Spec.Containers) == 0 {
			t.Fatal("accepted pod has no containers")
		}
		again, err := Parse(data, testOpts)
		if err != nil || again.UID != pod.UID {
			t.Fatalf("second parse: uid %v err %v, want %s", again, err, pod.UID)
		}
	})
}
