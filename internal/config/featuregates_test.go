package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestFeatureGates checks --feature-gates and featureGates against the
// upstream kubelet's rules (component-base featuregate, SetFromMap, with
// the gates of k8s.io/kubernetes/pkg/features at v1.37.2).
func TestFeatureGates(t *testing.T) {
	files := map[string]string{
		"/etc/kubelet.yaml": header + "featureGates:\n  PodLevelResources: false\n  ContextualLogging: false\n",
		"/etc/unknown.yaml": header + "\nfeatureGates:\n  NoSuchGate: true\n",
	}
	e := fakeEnv(files, "node-a")
	for _, tc := range []struct {
		name string
		args []string
		want string // the effective gates, or a substring of the error
		ok   bool
	}{
		{"flag", []string{"--feature-gates", "PodLevelResources=false,AllAlpha=true"}, "map[AllAlpha:true PodLevelResources:false]", true},
		{"flag over file, key by key", []string{"--config", "/etc/kubelet.yaml", "--feature-gates", "PodLevelResources=true"}, "map[ContextualLogging:false PodLevelResources:true]", true},
		{"unknown in flag", []string{"--feature-gates", "NoSuchGate=true"}, "flag --feature-gates: featureGates: Invalid value", false},
		{"unknown named", []string{"--feature-gates", "NoSuchGate=true"}, "unrecognized feature gate: NoSuchGate", false},
		{"unknown in file", []string{"--config", "/etc/unknown.yaml"}, "/etc/unknown.yaml:4: featureGates", false},
		{"not a bool", []string{"--feature-gates", "PodLevelResources=maybe"}, "invalid value of PodLevelResources: maybe", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := load(tc.args, e)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want it to contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(opts.Config.FeatureGates); got != tc.want {
				t.Errorf("gates %s, want %s", got, tc.want)
			}
			found := false
			for _, ig := range opts.Ignored {
				found = found || ig.Path == "featureGates"
			}
			if !found {
				t.Errorf("featureGates set but not in the ignored fields %v", opts.Ignored)
			}
		})
	}
	// A gate locked to its default may not change.
	var locked string
	for name, spec := range upstreamFeatureGates {
		if spec.LockToDefault {
			locked = fmt.Sprintf("%s=%v", name, !spec.Default)
			break
		}
	}
	if locked == "" {
		t.Fatal("no locked gate in the upstream table")
	}
	if _, err := load([]string{"--feature-gates", locked}, e); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("--feature-gates %s: error %v, want a locked gate refused", locked, err)
	}
}

func TestFeatureGateDefault(t *testing.T) {
	for _, tc := range []struct {
		name       string
		def, known bool
	}{
		{"APIServingWithRoutine", false, true},
		{"APIResponseCompression", true, true},
		{"NoSuchGate", false, false},
	} {
		if def, known := FeatureGateDefault(tc.name); def != tc.def || known != tc.known {
			t.Errorf("FeatureGateDefault(%s) = %t, %t; want %t, %t", tc.name, def, known, tc.def, tc.known)
		}
	}
}
