package manifest

import (
	"strings"
	"testing"

	"github.com/heartlet/heartlet/internal/podconfig"
)

var urlOpts = Options{NodeName: "node-1", Origin: "http://10.0.0.1/pods", Source: podconfig.SourceHTTP}

func TestParseList(t *testing.T) {
	const list = `{"apiVersion": "v1", "kind": "PodList", "items": [
  {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
]}`
	tests := []struct {
		name     string
		data     string
		want     []string // pod names
		wantErr  string
		wantWarn string
	}{
		{name: "single pod yaml", data: webYAML, want: []string{"web-node-1"}},
		{name: "single pod json", data: webJSON, want: []string{"web-node-1"}},
		{name: "list json, items with and without type", data: list, want: []string{"a-node-1", "b-node-1"}},
		{name: "list yaml", data: "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: busybox}]}\n", want: []string{"a-node-1"}},
		{name: "empty list", data: `{"apiVersion": "v1", "kind": "PodList", "items": []}`, want: nil},
		{name: "one bad item rejects the list", data: strings.Replace(list, `"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}`, `"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}`, 1), wantErr: "items[1].spec.containers[0].image: Required value"},
		{name: "item not an object", data: `{"apiVersion": "v1", "kind": "PodList", "items": [1]}`, wantErr: "items[0]: must be an object holding a Pod"},
		{name: "unknown field in an item warns", data: strings.Replace(list, `"image": "busybox"}]}},`, `"image": "busybox", "imagee": "x"}]}},`, 1), want: []string{"a-node-1", "b-node-1"}, wantWarn: "items[0].spec.containers[0].imagee: unknown field"},
		{name: "list of another version", data: `{"apiVersion": "v2", "kind": "PodList", "items": []}`, wantErr: `apiVersion: must be "v1", got "v2"`},
		{name: "not a pod", data: `{"apiVersion": "v1", "kind": "Secret"}`, wantErr: `kind: must be "Pod"`},
		{name: "empty", data: " \n", wantErr: "manifest is empty"},
		{name: "bad yaml", data: "a: [\n", wantErr: "invalid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warnings []string
			o := urlOpts
			o.Warn = func(p Problem) { warnings = append(warnings, p.String()) }
			pods, err := ParseList([]byte(tt.data), o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				if pods != nil {
					t.Fatal("pods returned with an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
				if p.Annotations[podconfig.AnnotationConfigSource] != podconfig.SourceHTTP || p.UID == "" || p.Spec.NodeName != "node-1" {
					t.Errorf("pod %s: source %q, UID %q, node %q", p.Name, p.Annotations[podconfig.AnnotationConfigSource], p.UID, p.Spec.NodeName)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("pods %v, want %v", names, tt.want)
			}
			if tt.wantWarn != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tt.wantWarn)) {
				t.Errorf("warnings %q, want one containing %q", warnings, tt.wantWarn)
			}
			if tt.wantWarn == "" && len(warnings) != 0 {
				t.Errorf("unexpected warnings %q", warnings)
			}
		})
	}
}

func FuzzParseList(f *testing.F) {
	f.Add([]byte(webYAML))
	f.Add([]byte(`{"apiVersion": "v1", "kind": "PodList", "items": [{"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "b"}]}}]}`))
	f.Add([]byte("apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: b}]}\n- 1\n"))
	f.Add([]byte(`{"kind": "PodList", "items": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := ParseList(data, urlOpts)
		if err != nil {
			if pods != nil {
				t.Fatal("pods returned with an error")
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for _, p := range pods {
			if p.UID == "" || p.Annotations[podconfig.AnnotationConfigHash] != string(p.UID) {
				t.Fatalf("pod %s: UID %q, config.hash %q", p.Name, p.UID, p.Annotations[podconfig.AnnotationConfigHash])
			}
			if !strings.HasSuffix(p.Name, "-node-1") || p.Spec.NodeName != "node-1" {
				t.Fatalf("pod %s on %q lacks the static identity", p.Name, p.Spec.NodeName)
			}
		}
		again, err := ParseList(data, urlOpts)
		if err != nil || len(again) != len(pods) {
			t.Fatalf("second parse: %d pods, err %v", len(again), err)
		}
		for i := range pods {
			if again[i].UID != pods[i].UID {
				t.Fatalf("UID of %s not stable", pods[i].Name)
			}
		}
	})
}

// TestNoExecuteTolerationForFilesOnly checks upstream's rule
// (pkg/kubelet/config, applyDefaults): a file's static pods tolerate every
// NoExecute taint, a URL's do not get that toleration.
func TestNoExecuteTolerationForFilesOnly(t *testing.T) {
	tolerates := func(o Options) bool {
		pod, err := Parse([]byte(webYAML), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range pod.Spec.Tolerations {
			if tl.Key == "" && tl.Operator == "Exists" && tl.Effect == "NoExecute" {
				return true
			}
		}
		return false
	}
	if !tolerates(testOpts) {
		t.Error("a file's pod does not tolerate NoExecute taints")
	}
	if tolerates(urlOpts) {
		t.Error("a URL's pod tolerates every NoExecute taint")
	}
}
