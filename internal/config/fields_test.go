package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every field of the upstream type is classified exactly once, and the
// table names no field the type does not have.
func TestFieldsCoverTheType(t *testing.T) {
	typePaths := ConfigurationFieldPaths()
	if len(typePaths) < 100 {
		t.Fatalf("only %d fields found in KubeletConfiguration: the walk is broken", len(typePaths))
	}
	seen := map[string]bool{}
	for _, f := range Fields {
		if seen[f.Path] {
			t.Errorf("Fields names %s twice", f.Path)
		}
		seen[f.Path] = true
		if !slices.Contains(typePaths, f.Path) {
			t.Errorf("Fields names %s, which KubeletConfiguration does not have", f.Path)
		}
		switch f.Support {
		case Honoured, NotYet, NoOp:
		default:
			t.Errorf("%s: unknown support %q", f.Path, f.Support)
		}
		if strings.TrimSpace(f.Note) == "" {
			t.Errorf("%s: no note", f.Path)
		}
	}
	for _, p := range typePaths {
		if !seen[p] {
			t.Errorf("KubeletConfiguration field %s is missing from Fields", p)
		}
	}
}

// The walk breaks structs down and keeps lists, maps and types with a
// JSON form of their own whole.
func TestConfigurationFieldPaths(t *testing.T) {
	paths := ConfigurationFieldPaths()
	for _, want := range []string{
		"apiVersion", "kind", // inlined TypeMeta
		"authentication.webhook.cacheTTL",     // nested struct, a duration leaf
		"logging.options.json.infoBufferSize", // embedded struct inlined, a quantity leaf
		"logging.flushFrequency",              // a struct with its own JSON form
		"tracing.samplingRatePerMillion",      // behind a pointer
		"crashLoopBackOff.maxContainerRestartPeriod",
		"shutdownGracePeriodByPodPriority", // a list of structs is one field
		"evictionHard",
	} {
		if !slices.Contains(paths, want) {
			t.Errorf("field paths lack %s", want)
		}
	}
	for _, not := range []string{"authentication", "logging", "logging.options", "syncFrequency.Duration", "TypeMeta", "shutdownGracePeriodByPodPriority.priority"} {
		if slices.Contains(paths, not) {
			t.Errorf("field paths hold %s", not)
		}
	}
}

// withSupport replaces Fields for one test with a copy where the given
// fields have the given support, so tests of the warning do not change as
// rows are flipped.
func withSupport(t *testing.T, support map[string]Support) {
	t.Helper()
	saved := Fields
	Fields = slices.Clone(Fields)
	for i := range Fields {
		if s, ok := support[Fields[i].Path]; ok {
			Fields[i].Support = s
			delete(support, Fields[i].Path)
		}
	}
	if len(support) > 0 {
		t.Fatalf("no rows for %v", support)
	}
	t.Cleanup(func() { Fields = saved })
}

func TestIgnoredFields(t *testing.T) {
	tests := []struct {
		name string
		file string // "" runs without --config
		args []string
		want string // IgnoredList
	}{
		{name: "defaults only", file: header},
		{name: "no file", want: ""},
		{name: "honoured and default-valued fields are not named",
			file: header + "maxPods: 20\nfailSwapOn: true\ncpuCFSQuotaPeriod: 100ms\nsyncFrequency: 30s\n"},
		{name: "fields set in the file",
			file: header + "cpuCFSQuota: false\npodPidsLimit: 100\nimageServiceEndpoint: unix:///run/images.sock\n",
			want: "podPidsLimit (=100), cpuCFSQuota (=false), imageServiceEndpoint (=unix:///run/images.sock)"},
		{name: "flags name themselves",
			file: header + "eventBurst: 7\n",
			args: []string{"--pod-max-pids=50", "--serialize-image-pulls=false", "--fail-swap-on=false"},
			want: "eventBurst (=7), podPidsLimit (=50 from --pod-max-pids), serializeImagePulls (=false from --serialize-image-pulls), failSwapOn (=false from --fail-swap-on)"},
		{name: "flags without a file",
			args: []string{"--image-service-endpoint=unix:///img.sock"},
			want: "imageServiceEndpoint (=unix:///img.sock from --image-service-endpoint)"},
		{name: "a default that follows another field is a default",
			file: header + "maxParallelImagePulls: 5\n",
			want: "maxParallelImagePulls (=5)"},
		{name: "nested fields",
			file: header + "logging:\n  flushFrequency: 10s\ntracing:\n  endpoint: localhost:4317\nmemorySwap:\n  swapBehavior: LimitedSwap\n",
			want: "memorySwap.swapBehavior (=LimitedSwap), logging.flushFrequency (=10s), tracing.endpoint (=localhost:4317)"},
		{name: "a flush frequency written as nanoseconds equal to the default",
			file: header + "logging:\n  flushFrequency: 5000000000\n"},
		{name: "lists and maps",
			file: header + "enforceNodeAllocatable: []\nfeatureGates:\n  AllAlpha: true\n",
			want: "featureGates (={\"AllAlpha\":true}), enforceNodeAllocatable (=[])"},
		{name: "no-op fields are not named",
			file: header + "iptablesMasqueradeBit: 3\niptablesDropBit: 4\n"},
	}
	notYet := map[string]Support{"iptablesMasqueradeBit": NoOp, "iptablesDropBit": NoOp, "maxPods": Honoured, "syncFrequency": Honoured}
	for _, p := range []string{"podPidsLimit", "cpuCFSQuota", "cpuCFSQuotaPeriod", "imageServiceEndpoint", "eventBurst", "serializeImagePulls",
		"failSwapOn", "maxParallelImagePulls", "memorySwap.swapBehavior", "logging.flushFrequency", "tracing.endpoint", "featureGates", "enforceNodeAllocatable"} {
		notYet[p] = NotYet
	}
	withSupport(t, notYet)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			files := map[string]string{}
			if tc.file != "" {
				files["/etc/kubelet.yaml"] = tc.file
				args = append([]string{"--config", "/etc/kubelet.yaml"}, args...)
			}
			opts := mustLoad(t, fakeEnv(files, "node-a"), args...)
			if got := IgnoredList(opts.Ignored); got != tc.want {
				t.Errorf("ignored fields:\n got %s\nwant %s", got, tc.want)
			}
			msg := IgnoredMessage(opts.Ignored)
			if tc.want == "" && msg != "" || tc.want != "" && msg != IgnoredMessagePrefix+tc.want {
				t.Errorf("message = %q", msg)
			}
		})
	}
}

func TestIgnoredMessage(t *testing.T) {
	got := IgnoredMessage([]Ignored{{Path: "podPidsLimit", Value: "100"}, {Path: "cpuCFSQuota", Value: "false", Flag: "--cpu-cfs-quota"}})
	want := "these configuration fields are not acted on by heartlet and are ignored: podPidsLimit (=100), cpuCFSQuota (=false from --cpu-cfs-quota)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if IgnoredMessage(nil) != "" {
		t.Error("a message without ignored fields")
	}
	long := shorten(formatValue(reflect.ValueOf(strings.Repeat("x", 200))))
	if len(long) != maxValueLen+3 || !strings.HasSuffix(long, "...") {
		t.Errorf("a long value is not shortened: %q", long)
	}
}
