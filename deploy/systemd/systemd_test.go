// Package systemd holds heartlet's systemd unit files; its tests check them
// with systemd-analyze and check the flags they pass against heartlet's.
package systemd

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heartlet/heartlet/internal/config"
)

const (
	unitFile   = "heartlet.service"
	dropInFile = "heartlet.service.d/10-kubeadm.conf"
	binary     = "/usr/bin/heartlet"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// systemdAnalyze returns the path of systemd-analyze, skipping the test
// when it is missing unless HEARTLET_REQUIRE_SYSTEMD_ANALYZE=1 (hack/test.sh,
// whose setup installs it).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("HEARTLET_REQUIRE_SYSTEMD_ANALYZE") == "1" {
			t.Fatalf("systemd-analyze is required: %v (hack/setup.sh test installs Debian's systemd package)", err)
		}
		t.Skipf("systemd-analyze not found (%v); install Debian's systemd package to check the unit files", err)
	}
	return path
}

// verify writes the unit and drop-in into a temporary directory, with the
// binary's path pointed at a stub (systemd-analyze checks that ExecStart's
// program exists), and runs systemd-analyze verify on them. Any output
// counts as a failure: systemd only warns about unknown keys and sections.
func verify(t *testing.T, tool, unit, dropIn string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	stub := filepath.Join(dir, "heartlet")
	files := map[string]string{
		"heartlet":                     "#!/bin/sh\nexit 0\n",
		unitFile:                       strings.ReplaceAll(unit, binary, stub),
		filepath.FromSlash(dropInFile): strings.ReplaceAll(dropIn, binary, stub),
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if path == stub {
			mode = 0o755
		}
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(tool, "verify", "--man=no", filepath.Join(dir, unitFile))
	out, err := cmd.CombinedOutput()
	if err == nil && len(strings.TrimSpace(string(out))) > 0 {
		err = errors.New("systemd-analyze verify printed warnings")
	}
	return string(out), err
}

func TestUnitFilesVerify(t *testing.T) {
	tool := systemdAnalyze(t)
	unit, dropIn := readFile(t, unitFile), readFile(t, dropInFile)
	tests := []struct {
		name         string
		unit, dropIn string
		wantErr      bool
	}{
		{name: "as shipped", unit: unit, dropIn: dropIn},
		// The cases below make sure that the check can fail.
		{name: "unknown key in the drop-in", unit: unit, dropIn: dropIn + "Restartt=always\n", wantErr: true},
		{name: "key in the wrong section", unit: strings.Replace(unit, "[Service]\n", "[Service]\nDescription=x\nStartLimitBurst=x\n", 1), dropIn: dropIn, wantErr: true},
		{name: "drop-in without the ExecStart reset", unit: unit, dropIn: strings.Replace(dropIn, "ExecStart=\n", "", 1), wantErr: true},
		{name: "program missing", unit: unit, dropIn: strings.ReplaceAll(dropIn, binary, "/nonexistent/heartlet"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := verify(t, tool, tc.unit, tc.dropIn)
			if (err != nil) != tc.wantErr {
				t.Errorf("systemd-analyze verify: %v, want error %v; output:\n%s", err, tc.wantErr, out)
			}
		})
	}
}

// dropInEnvironment returns the Environment= assignments of the drop-in.
func dropInEnvironment(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, dropInFile)))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Environment=")
		if !ok {
			continue
		}
		name, value, _ := strings.Cut(strings.Trim(v, `"`), "=")
		env[name] = value
	}
	return env
}

// TestKubeadmFlags pins which of the flags a kubeadm node passes heartlet
// accepts, as docs/systemd.md states: a change here must change the docs.
func TestKubeadmFlags(t *testing.T) {
	env := dropInEnvironment(t)
	var dropInFlags []string
	for _, name := range []string{"KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS"} {
		if env[name] == "" {
			t.Fatalf("%s sets no %s", dropInFile, name)
		}
		dropInFlags = append(dropInFlags, strings.Fields(env[name])...)
	}
	tests := []struct {
		flag         string
		wantAccepted bool
	}{
		// What kubeadm writes into kubeadm-flags.env or its upstream drop-in
		// passes.
		{"--container-runtime-endpoint=unix:///run/containerd/containerd.sock", true},
		{"--node-ip=10.0.0.1", true},
		{"--hostname-override=node-a", true},
		// Gone from the upstream kubelet v1.37 too.
		{"--pod-infra-container-image=registry.k8s.io/pause:3.10", false},
		{"--node-labels=node.kubernetes.io/worker=", true},
		{"--register-with-taints=node-role.kubernetes.io/control-plane:NoSchedule", true},
	}
	if len(dropInFlags) != 3 {
		t.Fatalf("drop-in flags %q, want --bootstrap-kubeconfig, --kubeconfig and --config", dropInFlags)
	}
	// What the drop-in itself passes: all must be accepted.
	for _, f := range dropInFlags {
		tests = append(tests, struct {
			flag         string
			wantAccepted bool
		}{f, true})
	}
	for _, tc := range tests {
		t.Run(tc.flag, func(t *testing.T) {
			_, err := config.Load([]string{tc.flag})
			// The files named need not exist: only an unknown flag counts.
			accepted := err == nil || !strings.Contains(err.Error(), "unknown flag")
			if accepted != tc.wantAccepted {
				t.Errorf("heartlet %s: %v; want accepted %v", tc.flag, err, tc.wantAccepted)
			}
		})
	}
}
