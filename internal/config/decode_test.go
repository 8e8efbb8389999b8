package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// want describes one expected problem: its line, its field path ("" for a
// problem without one) and a piece of its message.
type want struct {
	line int
	path string
	text string
}

func (w want) String() string { return fmt.Sprintf("line %d %s: ...%s...", w.line, w.path, w.text) }

func matchProblems(t *testing.T, got Errors, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v\nwant %v", len(got), len(wants), got, wants)
	}
	for i, w := range wants {
		p := got[i]
		path := ""
		if p.Field != nil {
			path = p.Field.Field
		}
		if p.Line != w.line || path != w.path || !strings.Contains(p.Error(), w.text) {
			t.Errorf("problem %d = line %d %q %q, want %v", i, p.Line, path, p.Error(), w)
		}
	}
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name  string
		input string
		wants []want
	}{
		{
			name:  "unknown top-level field",
			input: header + "maxPod: 10\n",
			wants: []want{{3, "maxPod", "Forbidden: unknown field"}},
		},
		{
			name:  "unknown nested field",
			input: header + "authentication:\n  webhook:\n    enabeld: true\n",
			wants: []want{{5, "authentication.webhook.enabeld", "unknown field"}},
		},
		{
			name:  "field names are case-sensitive",
			input: header + "MaxPods: 10\n",
			wants: []want{{3, "MaxPods", "unknown field"}},
		},
		{
			name:  "string for an integer",
			input: header + "maxPods: \"10\"\n",
			wants: []want{{3, "maxPods", `Invalid value: "10": must be an integer, not a string`}},
		},
		{
			name:  "float for an integer",
			input: header + "maxPods: 1.5\n",
			wants: []want{{3, "maxPods", "must be an integer, not a number"}},
		},
		{
			name:  "integer out of range",
			input: header + "maxPods: 3000000000\n",
			wants: []want{{3, "maxPods", "out of range for a 32-bit integer"}},
		},
		{
			name:  "integer for a string",
			input: header + "cgroupDriver: 5\n",
			wants: []want{{3, "cgroupDriver", "must be a string, not an integer"}},
		},
		{
			name:  "string for a boolean",
			input: header + "failSwapOn: \"no\"\n",
			wants: []want{{3, "failSwapOn", "must be a boolean, not a string"}},
		},
		{
			name:  "list for a map",
			input: header + "evictionHard:\n  - memory.available<100Mi\n",
			wants: []want{{3, "evictionHard", "must be a mapping, not a list"}},
		},
		{
			name:  "bad duration",
			input: header + "syncFrequency: 1x\n",
			wants: []want{{3, "syncFrequency", `must be a duration such as "1m30s"`}},
		},
		{
			name:  "number for a duration",
			input: header + "syncFrequency: 60\n",
			wants: []want{{3, "syncFrequency", "must be a duration"}},
		},
		{
			name:  "bad map value type",
			input: header + "evictionHard:\n  memory.available: 100\n",
			wants: []want{{4, "evictionHard[memory.available]", "must be a string, not an integer"}},
		},
		{
			name:  "list item type",
			input: header + "clusterDNS:\n  - 10.0.0.10\n  - 53\n",
			wants: []want{{5, "clusterDNS[1]", "must be a string"}},
		},
		{
			name:  "unknown field in a list item",
			input: header + "registerWithTaints:\n  - key: a\n    efect: NoSchedule\n",
			wants: []want{{5, "registerWithTaints[0].efect", "unknown field"}},
		},
		{
			name:  "duplicate field",
			input: header + "maxPods: 10\nport: 1\nmaxPods: 20\n",
			wants: []want{{5, "maxPods", "duplicate field, first set on line 3"}},
		},
		{
			name:  "duplicate map key",
			input: header + "evictionHard:\n  memory.available: 1Gi\n  memory.available: 2Gi\n",
			wants: []want{{5, "evictionHard[memory.available]", "duplicate field, first set on line 4"}},
		},
		{
			name:  "every problem is reported",
			input: header + "maxPods: x\nfoo: 1\nsyncFrequency: y\n",
			wants: []want{{3, "maxPods", "integer"}, {4, "foo", "unknown"}, {5, "syncFrequency", "duration"}},
		},
		{
			name:  "wrong apiVersion",
			input: "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
			wants: []want{{1, "apiVersion", `Unsupported value: "kubelet.config.k8s.io/v1alpha1"`}},
		},
		{
			name:  "wrong kind",
			input: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n",
			wants: []want{{2, "kind", `Unsupported value: "Pod"`}},
		},
		{
			name:  "missing apiVersion and kind",
			input: "maxPods: 10\n",
			wants: []want{{1, "apiVersion", "Required value"}, {1, "kind", "Required value"}},
		},
		{
			name:  "syntax error",
			input: header + "maxPods: 10\n  port: 1\n",
			wants: []want{{4, "", "invalid YAML"}},
		},
		{
			name:  "empty file",
			input: "",
			wants: []want{{0, "", "the file is empty"}},
		},
		{
			name:  "two documents",
			input: header + "---\n" + header,
			wants: []want{{3, "", "more than one YAML document"}},
		},
		{
			name:  "not a mapping",
			input: "- a\n- b\n",
			wants: []want{{1, "", "must hold a KubeletConfiguration mapping, not a list"}},
		},
		{
			name:  "merge keys",
			input: header + "base: &b\n  maxPods: 1\n<<: *b\n",
			wants: []want{{5, "", "merge keys"}},
		},
		{
			name:  "infinite number",
			input: header + "memoryThrottlingFactor: .inf\n",
			wants: []want{{3, "", "not a finite number"}},
		},
		{
			name:  "custom tag",
			input: header + "maxPods: !weird 10\n",
			wants: []want{{3, "", "unsupported YAML tag"}},
		},
		{
			name:  "JSON unknown field",
			input: "{\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n  \"kind\": \"KubeletConfiguration\",\n  \"maxPod\": 10\n}\n",
			wants: []want{{4, "maxPod", "unknown field"}},
		},
		{
			name:  "JSON wrong type",
			input: "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\",\n\"authentication\": {\"webhook\": {\n\t\"enabled\": \"yes\"}}}",
			wants: []want{{3, "authentication.webhook.enabled", "must be a boolean, not a string"}},
		},
		{
			name:  "JSON duplicate key",
			input: "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\",\n\"maxPods\": 1,\n\"maxPods\": 2}",
			wants: []want{{3, "maxPods", "duplicate field, first set on line 2"}},
		},
		{
			name:  "JSON syntax error",
			input: "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n\"kind\": }",
			wants: []want{{2, "", "invalid JSON"}},
		},
		{
			name:  "JSON trailing data",
			input: "{\"apiVersion\": \"kubelet.config.k8s.io/v1beta1\", \"kind\": \"KubeletConfiguration\"}\n{}",
			wants: []want{{2, "", "unexpected data after the top-level object"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := decode([]byte(tc.input))
			matchProblems(t, problems, tc.wants)
		})
	}
}

func TestDecodeValues(t *testing.T) {
	yamlInput := header + `# comment
staticPodPath: /etc/kubernetes/manifests
maxPods: 0x20
syncFrequency: 30s
readOnlyPort: 10255
healthzPort: null
failSwapOn: false
evictionHard:
  memory.available: 200Mi
evictionSoft: &soft
  memory.available: 300Mi
evictionSoftGracePeriod:
  memory.available: 1m
clusterDNS: [10.0.0.10]
registerWithTaints:
  - key: example.com/dedicated
    value: "true"
    effect: NoSchedule
logging:
  verbosity: 4
  flushFrequency: 2s
systemReserved:
  memory: 1Gi
memoryThrottlingFactor: 0.8
`
	jsonInput := `{
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "kind": "KubeletConfiguration",
  "staticPodPath": "/etc/kubernetes/manifests",
  "maxPods": 32,
  "syncFrequency": "30s",
  "readOnlyPort": 10255,
  "healthzPort": null,
  "failSwapOn": false,
  "evictionHard": {"memory.available": "200Mi"},
  "evictionSoft": {"memory.available": "300Mi"},
  "evictionSoftGracePeriod": {"memory.available": "1m"},
  "clusterDNS": ["10.0.0.10"],
  "registerWithTaints": [{"key": "example.com/dedicated", "value": "true", "effect": "NoSchedule"}],
  "logging": {"verbosity": 4, "flushFrequency": "2s"},
  "systemReserved": {"memory": "1Gi"},
  "memoryThrottlingFactor": 0.8
}`
	for _, tc := range []struct{ name, input string }{{"yaml", yamlInput}, {"json", jsonInput}} {
		t.Run(tc.name, func(t *testing.T) {
			d, problems := decode([]byte(tc.input))
			if len(problems) > 0 {
				t.Fatalf("decode: %v", problems)
			}
			kc := d.config
			checks := []struct {
				field string
				got   any
				want  any
			}{
				{"staticPodPath", kc.StaticPodPath, "/etc/kubernetes/manifests"},
				{"maxPods", kc.MaxPods, int32(32)},
				{"syncFrequency", kc.SyncFrequency.Duration, 30 * time.Second},
				{"readOnlyPort", kc.ReadOnlyPort, int32(10255)},
				{"healthzPort unset", kc.HealthzPort == nil, true},
				{"failSwapOn", *kc.FailSwapOn, false},
				{"evictionHard", kc.EvictionHard["memory.available"], "200Mi"},
				{"evictionSoftGracePeriod", kc.EvictionSoftGracePeriod["memory.available"], "1m"},
				{"clusterDNS", strings.Join(kc.ClusterDNS, ","), "10.0.0.10"},
				{"taint", string(kc.RegisterWithTaints[0].Effect) + "/" + kc.RegisterWithTaints[0].Value, "NoSchedule/true"},
				{"logging.verbosity", uint32(kc.Logging.Verbosity), uint32(4)},
				{"logging.flushFrequency", kc.Logging.FlushFrequency.Duration.Duration, 2 * time.Second},
				{"systemReserved", kc.SystemReserved["memory"], "1Gi"},
				{"memoryThrottlingFactor", *kc.MemoryThrottlingFactor, 0.8},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
				}
			}
			if line := d.lines["evictionHard[memory.available]"]; tc.name == "yaml" && line != 11 {
				t.Errorf("line of evictionHard[memory.available] = %d, want 11", line)
			}
			if line := d.lines["registerWithTaints[0].effect"]; tc.name == "json" && line != 14 {
				t.Errorf("line of registerWithTaints[0].effect = %d, want 14", line)
			}
		})
	}
}

func TestDecodeAliasesStayBounded(t *testing.T) {
	// A "billion laughs" document must be rejected, not expanded.
	var b strings.Builder
	b.WriteString(header + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	_, problems := decode([]byte(b.String()))
	if len(problems) == 0 {
		t.Fatal("decode accepted an exponential alias document")
	}
}

func TestParentPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"maxPods", ""},
		{"authentication.webhook.enabled", "authentication.webhook"},
		{"evictionHard[memory.available]", "evictionHard"},
		{"registerWithTaints[0].key", "registerWithTaints[0]"},
		{"registerWithTaints[0]", "registerWithTaints"},
	}
	for _, tc := range tests {
		if got := parentPath(tc.in); got != tc.want {
			t.Errorf("parentPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestProblemError(t *testing.T) {
	fe := field.Invalid(field.NewPath("maxPods"), int32(0), "must be greater than or equal to 1")
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "c.yaml", Line: 3, Field: fe}, "c.yaml:3: maxPods: Invalid value: 0: must be greater than or equal to 1"},
		{Problem{File: "c.yaml", Field: fe}, "c.yaml: maxPods: Invalid value: 0: must be greater than or equal to 1"},
		{Problem{File: "c.yaml", Line: 3, Flag: "--max-pods", Field: fe}, "flag --max-pods: maxPods: Invalid value: 0: must be greater than or equal to 1"},
		{Problem{Field: fe}, "maxPods: Invalid value: 0: must be greater than or equal to 1"},
		{Problem{File: "c.yaml", Line: 2, Message: "invalid YAML: oops"}, "c.yaml:2: invalid YAML: oops"},
	}
	for _, tc := range tests {
		if got := tc.p.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	errs := Errors{&tests[0].p, &tests[4].p}
	if got, want := errs.Error(), tests[0].want+"\n"+tests[4].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
}
