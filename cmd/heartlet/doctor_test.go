package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSplitDoctorFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    doctorFlags
		rest    []string
		wantErr string
	}{
		{"none", []string{"--config", "c.yaml"}, doctorFlags{output: "text", timeout: 15 * time.Second}, []string{"--config", "c.yaml"}, ""},
		{"all", []string{"--output=json", "--config", "c.yaml", "--timeout", "3s", "--cni-conf-dir", "/n", "--cni-bin-dir=/a:/b", "--apiserver-kubelet-user", "apiserver", "--v", "2"},
			doctorFlags{output: "json", timeout: 3 * time.Second, cniConfDir: "/n", cniBinDirs: []string{"/a", "/b"}, apiserverUser: "apiserver"}, []string{"--config", "c.yaml", "--v", "2"}, ""},
		{"bad output", []string{"--output", "yaml"}, doctorFlags{}, nil, `--output "yaml": want text or json`},
		{"bad timeout", []string{"--timeout=-1s"}, doctorFlags{}, nil, "want a positive duration"},
		{"missing value", []string{"--timeout"}, doctorFlags{}, nil, "--timeout needs a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rest, err := splitDoctorFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.output != tc.want.output || got.timeout != tc.want.timeout || got.cniConfDir != tc.want.cniConfDir ||
				!slices.Equal(got.cniBinDirs, tc.want.cniBinDirs) || got.apiserverUser != tc.want.apiserverUser {
				t.Errorf("flags = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(rest, tc.rest) {
				t.Errorf("rest = %q, want %q", rest, tc.rest)
			}
		})
	}
}

func TestDoctorCommand(t *testing.T) {
	t.Run("invalid config", func(t *testing.T) {
		cfg := writeFile(t, "config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: -1\nbogus: 1\n")
		r := runCommand(t, "doctor", "--config", cfg)
		if r.code != 1 {
			t.Errorf("exit code %d, want 1", r.code)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "error    config  ") || !strings.Contains(r.stdout, "bogus") || !strings.Contains(r.stdout, "maxPods") {
			t.Errorf("stdout:\n%s\nwant two config error lines naming bogus and maxPods", r.stdout)
		}
	})
	t.Run("missing kubeconfig", func(t *testing.T) {
		dir := t.TempDir()
		kubeconfig := filepath.Join(dir, "kubelet.conf")
		r := runCommand(t, "doctor", "--output", "json", "--kubeconfig", kubeconfig, "--root-dir", dir,
			"--container-runtime-endpoint", "unix://"+filepath.Join(dir, "none.sock"), "--hostname-override", "node1")
		if r.code != 1 {
			t.Errorf("exit code %d, want 1", r.code)
		}
		var doc struct {
			Lines  []struct{ Check, Level, Found, Fix string }
			Failed bool
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("%v:\n%s", err, r.stdout)
		}
		found := false
		for _, l := range doc.Lines {
			if l.Check == "kubeconfig" && l.Level == "error" && strings.Contains(l.Found, kubeconfig) && strings.Contains(l.Fix, "--kubeconfig") {
				found = true
			}
		}
		if !found || !doc.Failed {
			t.Errorf("no kubeconfig error naming %s in\n%s", kubeconfig, r.stdout)
		}
	})
	t.Run("help", func(t *testing.T) {
		r := runCommand(t, "doctor", "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "heartlet doctor checks this node") || !strings.Contains(r.stdout, "--kubeconfig") {
			t.Errorf("exit %d, stdout:\n%s", r.code, r.stdout)
		}
	})
	t.Run("bad flag", func(t *testing.T) {
		r := runCommand(t, "doctor", "--output", "xml")
		if r.code != 1 || !strings.Contains(r.stderr, "--output") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}
