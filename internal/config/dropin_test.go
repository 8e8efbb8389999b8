package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestConfigDir checks --config-dir as the upstream kubelet merges it
// (cmd/kubelet/app/server.go, mergeKubeletConfigurations): *.conf files in
// lexical order of their paths, subdirectories included, each a JSON merge
// patch over the --config file; flags win over all.
func TestConfigDir(t *testing.T) {
	files := map[string]string{
		"/etc/kubelet.yaml":                 header + "maxPods: 50\nsystemReserved:\n  memory: 1Gi\nclusterDNS: [10.96.0.10]\n",
		"/etc/kubelet.conf.d/10-a.conf":     header + "maxPods: 60\n",
		"/etc/kubelet.conf.d/20-b.conf":     header + "maxPods: 70\nsystemReserved:\n  cpu: 100m\n",
		"/etc/kubelet.conf.d/sub/30-c.conf": header + "clusterDNS: [10.0.0.10]\n",
		"/etc/kubelet.conf.d/README":        "not a drop-in",
	}
	e := fakeEnv(files, "node-a")
	opts := mustLoad(t, e, "--config", "/etc/kubelet.yaml", "--config-dir", "/etc/kubelet.conf.d")
	kc := opts.Config
	if kc.MaxPods != 70 {
		t.Errorf("maxPods %d, want 70 from the last drop-in", kc.MaxPods)
	}
	if got := fmt.Sprint(kc.SystemReserved); got != "map[cpu:100m memory:1Gi]" {
		t.Errorf("systemReserved %s, want the maps merged key by key", got)
	}
	if got := fmt.Sprint(kc.ClusterDNS); got != "[10.0.0.10]" {
		t.Errorf("clusterDNS %s, want the list replaced by the drop-in in a subdirectory", got)
	}
	if kc.FileCheckFrequency.Duration.String() != "20s" {
		t.Errorf("fileCheckFrequency %s, want the default kept", kc.FileCheckFrequency.Duration)
	}
	if opts.ConfigDir != "/etc/kubelet.conf.d" {
		t.Errorf("ConfigDir %q", opts.ConfigDir)
	}
	if len(opts.Warnings) != 1 || !strings.Contains(opts.Warnings[0], "/etc/kubelet.conf.d/README") {
		t.Errorf("warnings %q, want the skipped README named", opts.Warnings)
	}

	if got := mustLoad(t, e, "--config-dir", "/etc/kubelet.conf.d", "--config", "/etc/kubelet.yaml", "--max-pods", "5").Config.MaxPods; got != 5 {
		t.Errorf("maxPods %d with --max-pods 5, want the flag to win", got)
	}
	if got := mustLoad(t, e, "--config-dir", "/etc/kubelet.conf.d").Config.MaxPods; got != 70 {
		t.Errorf("maxPods %d without --config, want 70", got)
	}
}

func TestConfigDirProblems(t *testing.T) {
	files := map[string]string{
		"/etc/kubelet.yaml":            header + "maxPods: 50\n",
		"/d/unknown/10-x.conf":         header + "maxPods: 10\nmaxPodz: 3\n",
		"/d/invalid/10-x.conf":         header + "\nmaxPods: -1\n",
		"/d/untyped/10-x.conf":         "maxPods: 10\n",
		"/d/badyaml/10-x.conf":         header + "maxPods: [\n",
		"/d/good-then-bad/10-x.conf":   header + "maxPods: 10\n",
		"/d/good-then-bad/20-y.conf":   header + "readOnlyPort: 70000\n",
		"/d/empty-dir-only/README.txt": "x",
	}
	e := fakeEnv(files, "node-a")
	for _, tc := range []struct {
		dir  string
		want string
	}{
		{"/d/unknown", "/d/unknown/10-x.conf:4: maxPodz: Forbidden: unknown field"},
		{"/d/invalid", "/d/invalid/10-x.conf:4: maxPods: Invalid value: -1"},
		{"/d/untyped", "/d/untyped/10-x.conf"},
		{"/d/badyaml", "/d/badyaml/10-x.conf"},
		{"/d/good-then-bad", "/d/good-then-bad/20-y.conf:3: readOnlyPort: Invalid value: 70000"},
		{"/d/missing", `--config-dir "/d/missing"`},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			_, err := load([]string{"--config", "/etc/kubelet.yaml", "--config-dir", tc.dir}, e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := load([]string{"--config", "/etc/kubelet.yaml", "--config-dir", "/d/empty-dir-only"}, e); err != nil {
		t.Errorf("a directory without drop-ins: %v", err)
	}
}
