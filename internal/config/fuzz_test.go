package config

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzLoadConfig feeds arbitrary bytes to Load as the --config file. Load
// must never panic, must report problems as Errors, and a configuration it
// accepts must load again, unchanged, from its own YAML rendering.
func FuzzLoadConfig(f *testing.F) {
	seeds := []string{
		header,
		header + "maxPods: 20\nsyncFrequency: 30s\nevictionHard:\n  memory.available: 200Mi\n",
		header + "staticPodPath: manifests\nclusterDNS: [10.0.0.10]\nregisterWithTaints:\n- key: a\n  effect: NoSchedule\n",
		header + "logging:\n  verbosity: 3\n  vmodule:\n  - filePattern: foo\n    verbosity: 4\n",
		header + "systemReserved: {memory: 1Gi}\nreservedMemory:\n- numaNode: 0\n  limits: {memory: 1Gi}\n",
		header + "maxPods: \"x\"\nfoo: 1\nmaxPods: 2\n",
		header + "a: &a [1, 2]\nb: *a\n",
		`{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "readOnlyPort": 10255, "evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {"memory.available": "1m"}}`,
		"{",
		"- 1\n",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files := map[string]string{"/etc/heartlet/config.yaml": string(data)}
		opts, err := load([]string{"--config", "/etc/heartlet/config.yaml"}, fakeEnv(files, "node-a"))
		if err != nil {
			var problems Errors
			if !errors.As(err, &problems) || len(problems) == 0 {
				t.Fatalf("load error %v is not a non-empty Errors", err)
			}
			return
		}
		out, err := MarshalYAML(opts.Config)
		if err != nil {
			t.Fatalf("MarshalYAML of an accepted configuration: %v", err)
		}
		files["/etc/heartlet/config.yaml"] = string(out)
		again, err := load([]string{"--config", "/etc/heartlet/config.yaml"}, fakeEnv(files, "node-a"))
		if err != nil {
			t.Fatalf("the YAML rendering of an accepted configuration does not load:\n%v\n--- input:\n%q\n--- rendering:\n%s", err, data, out)
		}
		out2, err := MarshalYAML(again.Config)
		if err != nil {
			t.Fatalf("MarshalYAML of the reloaded configuration: %v", err)
		}
		if string(out2) != string(out) {
			t.Fatalf("reloading changed the configuration:\n%s\n---\n%s", out, out2)
		}
		if !reflect.DeepEqual(opts.NodeName, again.NodeName) {
			t.Fatalf("node name changed: %q -> %q", opts.NodeName, again.NodeName)
		}
	})
}
