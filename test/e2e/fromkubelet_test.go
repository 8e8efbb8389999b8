//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// runValidateFromKubelet runs heartlet validate --from-kubelet on the node
// under root and returns its output and exit code.
func runValidateFromKubelet(t *testing.T, root string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, heartletBin, "validate", "--from-kubelet", "--root", root, "--timeout", "20s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("heartlet validate --from-kubelet: %v\nstderr: %s", err, stderr.String())
	}
	t.Logf("heartlet validate --from-kubelet --root %s → exit %d\n%s%s", root, code, stdout.String(), stderr.String())
	return stdout.String(), code
}

// writeUnder writes content at path (a path on the node) under root.
func writeUnder(t *testing.T, root, path, content string) {
	t.Helper()
	full := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubeadmRoot lays out under a new temporary root the upstream kubelet's
// unit and kubeadm's drop-in as the kubeadm packages install them
// (kubernetes/release: cmd/krel/templates/latest/kubelet/kubelet.service
// and kubeadm/10-kubeadm.conf); the caller writes kubeadm-flags.env and
// the configuration.
func kubeadmRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeUnder(t, root, "/usr/lib/systemd/system/kubelet.service", `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`)
	writeUnder(t, root, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`)
	return root
}

// TestValidateFromKubelet lays out a kubeadm node under a temporary root
// (the upstream kubelet's unit, kubeadm's drop-in, the flags file kubeadm
// writes, a kubelet configuration) whose runtime is the real containerd
// and whose static pod runs in it, and checks what heartlet validate
// --from-kubelet reports: the command line systemd would start, the
// cgroup driver from containerd's own configuration, the running static
// pod matched by its UID, a pod heartlet would refuse, a state file
// heartlet ignores, and a containerd with the systemd cgroup driver.
func TestValidateFromKubelet(t *testing.T) {
	h := startHeartlet(t)
	// A static pod the node's agent runs in containerd; the report must
	// find it in the runtime and match it with its manifest by UID.
	web := manifest(t, "web", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("sleep", "sleep 3600")}
	})
	h.addPod(t, "web.yaml", "web", web)
	h.waitRunning(t, "web")

	root := kubeadmRoot(t)
	writeUnder(t, root, "/var/lib/kubelet/kubeadm-flags.env", fmt.Sprintf("KUBELET_KUBEADM_ARGS=\"--hostname-override=%s --root-dir=%s\"\n", nodeName, h.rootDir))
	config := func(endpoint string) string {
		return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: %s
staticPodPath: %s
failSwapOn: false
`, endpoint, h.manifestDir)
	}
	writeUnder(t, root, "/var/lib/kubelet/config.yaml", config(criEndpoint))
	// The same manifest at the same path on the node: the same UID.
	writeUnder(t, root, filepath.Join(h.manifestDir, "web.yaml"), web)
	writeUnder(t, root, filepath.Join(h.rootDir, "cpu_manager_state"), `{"policyName":"static","defaultCpuSet":"0-1","checksum":1}`)

	t.Run("a pod heartlet would refuse", func(t *testing.T) {
		userns := manifest(t, "userns", func(p *v1.Pod) {
			hostUsers := false
			p.Spec.HostUsers = &hostUsers
			p.Spec.Containers = []v1.Container{shContainer("sleep", "sleep 3600")}
		})
		writeUnder(t, root, filepath.Join(h.manifestDir, "userns.yaml"), userns)
		defer os.Remove(filepath.Join(root, h.manifestDir, "userns.yaml"))
		out, code := runValidateFromKubelet(t, root)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if lines := doctorLines(out, "error", "pods"); len(lines) != 1 || !strings.Contains(lines[0], "pod default/userns-"+nodeName+" uses fields heartlet refuses") || !strings.Contains(lines[0], "spec.hostUsers") {
			t.Errorf("pods errors: %q, want the one of userns-%s", lines, nodeName)
		}
	})

	t.Run("warnings only", func(t *testing.T) {
		out, code := runValidateFromKubelet(t, root)
		if code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
		kubelet := doctorLines(out, "ok", "kubelet")
		if len(kubelet) != 1 || !strings.Contains(kubelet[0], "systemd unit /usr/lib/systemd/system/kubelet.service, /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf, /var/lib/kubelet/kubeadm-flags.env") ||
			!strings.Contains(kubelet[0], "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml --hostname-override="+nodeName) {
			t.Errorf("kubelet line: %q", kubelet)
		}
		if lines := doctorLines(out, "ok", "cgroup-driver"); len(lines) != 1 || !strings.Contains(lines[0], "cgroupfs for both heartlet and the runtime") {
			t.Errorf("cgroup-driver: %q", lines)
		}
		if lines := doctorLines(out, "ok", "pods"); len(lines) != 1 || !strings.Contains(lines[0], "1 pods checked (1 static, 0 from the API server,") {
			t.Errorf("pods: %q, want the static pod checked", lines)
		}
		for _, l := range doctorLines(out, "warning", "pods") {
			if strings.Contains(l, "web-"+nodeName) {
				t.Errorf("the running static pod web was not matched with its manifest: %s", l)
			}
		}
		if lines := doctorLines(out, "warning", "state"); len(lines) != 1 || !strings.Contains(lines[0], `cpu_manager_state: CPU manager policy "static"`) {
			t.Errorf("state: %q", lines)
		}
	})

	t.Run("runtime with the systemd cgroup driver", func(t *testing.T) {
		endpoint := startSystemdCgroupContainerd(t, nil)
		writeUnder(t, root, "/var/lib/kubelet/config.yaml", config(endpoint))
		defer writeUnder(t, root, "/var/lib/kubelet/config.yaml", config(criEndpoint))
		out, code := runValidateFromKubelet(t, root)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if lines := doctorLines(out, "error", "cgroup-driver"); len(lines) != 1 || !strings.Contains(lines[0], `SystemdCgroup = true`) {
			t.Errorf("cgroup-driver errors: %q", lines)
		}
	})
}

// TestClusterValidateFromKubelet: on a node of the real control plane,
// validate --from-kubelet reads the specs of the pods the runtime runs
// from the API server with the kubelet's kubeconfig, and names a pod
// that uses a field heartlet does not honour yet.
func TestClusterValidateFromKubelet(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("api-selinux", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		policy := v1.SELinuxChangePolicyRecursive
		p.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxChangePolicy: &policy}
	}))
	waitAPIPodRunning(t, h, "api-selinux")

	root := kubeadmRoot(t)
	kubeconfig, err := os.ReadFile(nodeKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	writeUnder(t, root, "/etc/kubernetes/kubelet.conf", string(kubeconfig))
	writeUnder(t, root, "/var/lib/kubelet/kubeadm-flags.env", fmt.Sprintf("KUBELET_KUBEADM_ARGS=\"--hostname-override=%s --root-dir=%s\"\n", clusterNode, h.rootDir))
	writeUnder(t, root, "/var/lib/kubelet/config.yaml", fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: %s
staticPodPath: %s
failSwapOn: false
`, criEndpoint, h.manifestDir))
	if err := os.MkdirAll(filepath.Join(root, h.manifestDir), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := runValidateFromKubelet(t, root)
	if code != 0 {
		t.Errorf("exit %d, want 0 (warnings only)", code)
	}
	lines := doctorLines(out, "warning", "pods")
	found := false
	for _, l := range lines {
		if strings.Contains(l, "pod default/api-selinux uses fields heartlet does not honour yet: spec.securityContext.seLinuxChangePolicy") {
			found = true
		}
		if strings.Contains(l, "could not be checked") && strings.Contains(l, "default/api-selinux") {
			t.Errorf("the running API pod was not found in the API server: %s", l)
		}
	}
	if !found {
		t.Errorf("no pods warning for default/api-selinux: %q", lines)
	}
}
