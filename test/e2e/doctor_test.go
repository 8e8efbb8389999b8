//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// runDoctor runs heartlet doctor and returns its standard output and exit
// code.
func runDoctor(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, heartletBin, append([]string{"doctor", "--timeout", "20s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("heartlet doctor: %v\nstderr: %s", err, stderr.String())
	}
	t.Logf("heartlet doctor %s → exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return stdout.String(), code
}

// doctorLines returns the lines of out whose level and check are as given.
func doctorLines(out, level, check string) []string {
	var found []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == level && f[1] == check {
			found = append(found, line)
		}
	}
	return found
}

// withArg returns args with the value of flag replaced (or added).
func withArg(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}

// expectDoctorError runs doctor with args and fails t unless it exits 1
// with an error line of check containing want.
func expectDoctorError(t *testing.T, check, want string, args ...string) string {
	t.Helper()
	out, code := runDoctor(t, args...)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	lines := doctorLines(out, "error", check)
	for _, l := range lines {
		if strings.Contains(l, want) {
			return out
		}
	}
	t.Errorf("no error line of check %s containing %q; error lines of it: %q", check, want, lines)
	return out
}

// writeKubeconfig writes a copy of the node kubeconfig changed by mutate.
func writeKubeconfig(t *testing.T, mutate func(c *clientcmdapi.Config)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(nodeKubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", nodeKubeconfig, err)
	}
	mutate(cfg)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// startSystemdCgroupContainerd starts a second containerd of its own,
// whose runc handler uses the systemd cgroup driver and whose CNI config
// directory holds cniFiles, and returns its endpoint. It is stopped when
// the test ends.
func startSystemdCgroupContainerd(t *testing.T, cniFiles map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cniDir := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(cniDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range cniFiles {
		if err := os.WriteFile(filepath.Join(cniDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.grpc.v1.cri"]
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "native"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = %[5]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "opt"), cniDir)
	configPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", configPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		unmountLeftovers(t, dir)
	})
	waitFor(t, 30*time.Second, "the second containerd's socket", func() (bool, string) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, err.Error()
		}
		_ = c.Close()
		return true, ""
	})
	return "unix://" + sock
}

// TestDoctor runs heartlet doctor against the real containerd and control
// plane: a good set-up passes, and each broken one is named.
func TestDoctor(t *testing.T) {
	requireCluster(t)
	h := newClusterHeartlet(t, clusterOptions{})
	args := clusterArgs(h, nodeKubeconfig)

	t.Run("good", func(t *testing.T) {
		out, code := runDoctor(t, args...)
		if code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		for _, check := range []string{"config", "kubeconfig", "identity", "permissions", "certificates", "clock", "runtime", "cgroup-driver", "cni", "pods", "ports", "disk", "kubelet-api"} {
			if len(doctorLines(out, "ok", check)) == 0 {
				t.Errorf("no ok line of check %s", check)
			}
		}
		jsonOut, code := runDoctor(t, append([]string{"--output", "json"}, args...)...)
		var doc struct {
			Lines []struct {
				Check, Level, Found string
			}
			Failed bool
		}
		if err := json.Unmarshal([]byte(jsonOut), &doc); err != nil {
			t.Fatalf("--output json: %v", err)
		}
		if code != 0 || doc.Failed || len(doc.Lines) < 13 {
			t.Errorf("--output json: exit %d, failed %t, %d lines", code, doc.Failed, len(doc.Lines))
		}
	})

	t.Run("missing kubeconfig", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "kubelet.conf")
		expectDoctorError(t, "kubeconfig", missing+": open "+missing+": no such file", withArg(args, "--kubeconfig", missing)...)
	})

	t.Run("unreachable server", func(t *testing.T) {
		port := freePort(t)
		kubeconfig := writeKubeconfig(t, func(c *clientcmdapi.Config) {
			for _, cl := range c.Clusters {
				cl.Server = "https://127.0.0.1:" + strconv.Itoa(port)
			}
		})
		expectDoctorError(t, "kubeconfig", "is unreachable", withArg(args, "--kubeconfig", kubeconfig)...)
	})

	t.Run("server certificate not signed by the kubeconfig's CA", func(t *testing.T) {
		otherCA, err := os.ReadFile(filepath.Join(filepath.Dir(clusterCAFile()), "front-proxy-ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig := writeKubeconfig(t, func(c *clientcmdapi.Config) {
			for _, cl := range c.Clusters {
				cl.CertificateAuthorityData = otherCA
			}
		})
		expectDoctorError(t, "kubeconfig", "TLS connection to API server https://127.0.0.1:6443 failed", withArg(args, "--kubeconfig", kubeconfig)...)
	})

	t.Run("node name other than the identity's", func(t *testing.T) {
		expectDoctorError(t, "identity", "is for node "+clusterNode+", but the node name is doctor-other", withArg(args, "--hostname-override", "doctor-other")...)
	})

	t.Run("disk below the eviction threshold", func(t *testing.T) {
		expectDoctorError(t, "disk", "nodefs.available is below evictionHard nodefs.available<100Ti", append([]string{"--eviction-hard", "nodefs.available<100Ti"}, args...)...)
	})

	t.Run("identity without node permissions", func(t *testing.T) {
		mustKubectl(t, "create", "serviceaccount", "doctor-nobody", "-n", "default")
		t.Cleanup(func() { _, _ = kubectl("delete", "serviceaccount", "doctor-nobody", "-n", "default") })
		token := strings.TrimSpace(mustKubectl(t, "create", "token", "doctor-nobody", "-n", "default", "--duration", "10m"))
		kubeconfig := writeKubeconfig(t, func(c *clientcmdapi.Config) {
			for _, a := range c.AuthInfos {
				a.ClientCertificateData, a.ClientKeyData = nil, nil
				a.Token = token
			}
		})
		a := withArg(args, "--kubeconfig", kubeconfig)
		out := expectDoctorError(t, "permissions", "system:serviceaccount:default:doctor-nobody may not get its Node", a...)
		if len(doctorLines(out, "warning", "identity")) == 0 {
			t.Errorf("no warning that the identity is not a node's")
		}
		if len(doctorLines(out, "error", "pods")) == 0 {
			t.Errorf("no error listing the node's pods")
		}
	})

	t.Run("wrong runtime socket", func(t *testing.T) {
		sock := "unix://" + filepath.Join(t.TempDir(), "containerd.sock")
		expectDoctorError(t, "runtime", sock+": no such socket", withArg(args, "--container-runtime-endpoint", sock)...)
	})

	t.Run("runtime cgroup driver and CNI config", func(t *testing.T) {
		endpoint := startSystemdCgroupContainerd(t, map[string]string{"10-broken.conflist": `{"cniVersion": "1.0.0", "name": "broken", "plugins": [`})
		a := withArg(args, "--container-runtime-endpoint", endpoint)
		out := expectDoctorError(t, "cgroup-driver", "the runtime uses the systemd cgroup driver", a...)
		if lines := doctorLines(out, "error", "cni"); len(lines) == 0 || !strings.Contains(lines[0], "10-broken.conflist: not a CNI config") {
			t.Errorf("cni error lines %q, want one naming 10-broken.conflist", lines)
		}
	})

	t.Run("broken CNI config", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "10-net.conflist"), []byte(`{"cniVersion": "1.0.0", "name": "net", "plugins": [{"type": "no-such-plugin"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "20-bad.conf"), []byte("cniVersion: 1.0.0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := expectDoctorError(t, "cni", "10-net.conflist: plugin(s) no-such-plugin not found", append([]string{"--cni-conf-dir", dir}, args...)...)
		found := false
		for _, l := range doctorLines(out, "error", "cni") {
			found = found || strings.Contains(l, "20-bad.conf: not a CNI config")
		}
		if !found {
			t.Errorf("no error line for 20-bad.conf")
		}
	})

	t.Run("port in use", func(t *testing.T) {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.healthzPort)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		expectDoctorError(t, "ports", fmt.Sprintf("127.0.0.1:%d (healthzPort) is in use", h.healthzPort), args...)
	})

	t.Run("maxPods lower than bound pods", func(t *testing.T) {
		for _, name := range []string{"doctor-bound-1", "doctor-bound-2"} {
			pod := apiPod(name, nil)
			pod.Spec.NodeName = clusterNode
			createPod(t, pod)
			t.Cleanup(func() { _, _ = kubectl("delete", "pod", name, "--grace-period=0", "--force", "--wait=false") })
		}
		expectDoctorError(t, "pods", "2 pods are bound to "+clusterNode+", more than maxPods 1", withArg(args, "--max-pods", "1")...)
	})
}
