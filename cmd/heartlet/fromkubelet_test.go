package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeadmNode writes the files of a kubeadm node under a new root: the
// upstream kubelet's unit, kubeadm's drop-in, the flags file kubeadm
// writes and a configuration, with extra appended to the configuration.
func kubeadmNode(t *testing.T, endpoint, extra string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"usr/lib/systemd/system/kubelet.service": "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n",
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`,
		"var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.5\"\n",
		"etc/default/kubelet":               "KUBELET_EXTRA_ARGS=--hostname-override=node1\n",
		"var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n" +
			"containerRuntimeEndpoint: " + endpoint + "\n" + extra,
		"etc/kubernetes/manifests/etcd.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec:\n  containers: [{name: etcd, image: etcd}]\n",
	}
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestValidateFromKubelet(t *testing.T) {
	missing := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	t.Run("warnings only", func(t *testing.T) {
		root := kubeadmNode(t, missing, "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\n")
		r := runCommand(t, "validate", "--from-kubelet", "--root", root, "--timeout=2s")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0 (warnings only)\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{
			"ok       kubelet",
			"/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --node-ip=10.0.0.5 --hostname-override=node1",
			"warning  config",
			"cpuManagerPolicy = static",
			"skip     cgroup-driver",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("a pod that would break", func(t *testing.T) {
		root := kubeadmNode(t, missing, "")
		if err := os.WriteFile(filepath.Join(root, "etc/kubernetes/manifests/userns.yaml"),
			[]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: u, namespace: default}\nspec:\n  hostUsers: false\n  containers: [{name: c, image: busybox}]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCommand(t, "validate", "--from-kubelet", "--root", root, "--output", "json", "--timeout=2s")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
		var report struct {
			Lines  []struct{ Check, Level, Found string }
			Failed bool
		}
		if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || !report.Failed {
			t.Fatalf("output is not a failed JSON report: %v\n%s", err, r.stdout)
		}
		found := false
		for _, l := range report.Lines {
			if l.Check == "pods" && l.Level == "error" && strings.Contains(l.Found, "default/u-node1") && strings.Contains(l.Found, "spec.hostUsers") {
				found = true
			}
		}
		if !found {
			t.Errorf("no pods error for default/u-node1:\n%s", r.stdout)
		}
	})
	t.Run("no kubelet", func(t *testing.T) {
		r := runCommand(t, "validate", "--from-kubelet", "--root", t.TempDir())
		if r.code != 1 || !strings.Contains(r.stderr, "no running kubelet process and no kubelet.service unit") {
			t.Errorf("got %d %q", r.code, r.stderr)
		}
	})
	t.Run("heartlet flags are refused", func(t *testing.T) {
		r := runCommand(t, "validate", "--from-kubelet", "--config", "/x.yaml")
		if r.code != 1 || !strings.Contains(r.stderr, "takes only --root, --output and --timeout") {
			t.Errorf("got %d %q", r.code, r.stderr)
		}
	})
	t.Run("help", func(t *testing.T) {
		r := runCommand(t, "validate", "--from-kubelet", "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "--root string") {
			t.Errorf("got %d %q", r.code, r.stdout)
		}
	})
}
