package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/version"
)

type result struct {
	code           int
	stdout, stderr string
}

// newCommand returns a command whose agent runner is fn.
func newCommand(fn func(ctx context.Context, opts *config.Options) error) (*command, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	c := &command{
		stdout:   &stdout,
		stderr:   &stderr,
		runAgent: fn,
		exit:     func(int) { panic("unexpected exit") },
	}
	return c, &stdout, &stderr
}

func runCommand(t *testing.T, args ...string) result {
	t.Helper()
	c, stdout, stderr := newCommand(func(context.Context, *config.Options) error {
		t.Error("the agent must not run")
		return nil
	})
	code := c.run(t.Context(), args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const validConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
maxPods: 20
`

func TestValidate(t *testing.T) {
	good := writeFile(t, "good.yaml", validConfig)
	bad := writeFile(t, "bad.yaml", `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 20
authentication:
  webhok: {}
evictionHard:
  memory.available: 100Mi
  memory.available: 200Mi
syncFrequency: soon
cgroupDriver: systemdd
`)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{
			name:       "valid file prints the effective configuration",
			args:       []string{"validate", "--config", good, "--hostname-override=node-a"},
			wantStdout: []string{"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n", "\nmaxPods: 20\n", "\n  mode: Webhook\n", "\nsyncFrequency: 1m0s\n"},
		},
		{
			name:       "flags override the file",
			args:       []string{"validate", "--config", good, "--max-pods", "30", "--hostname-override=node-a"},
			wantStdout: []string{"\nmaxPods: 30\n"},
			// As upstream, a configuration flag is deprecated.
			wantStderr: []string{"warning: flag --max-pods is deprecated as upstream: set maxPods in the --config file instead\n"},
		},
		{
			name:       "no file uses the command-line defaults",
			args:       []string{"validate", "--hostname-override=node-a"},
			wantStdout: []string{"\nreadOnlyPort: 10255\n", "\n  mode: AlwaysAllow\n"},
		},
		{
			name:     "every error with file, line and field path",
			args:     []string{"validate", "--config", bad, "--hostname-override=node-a"},
			wantCode: 1,
			wantStderr: []string{
				bad + ":5: authentication.webhok: Forbidden: unknown field\n" +
					bad + ":8: evictionHard[memory.available]: Forbidden: duplicate field, first set on line 7\n" +
					bad + ":9: syncFrequency: Invalid value: \"soon\": must be a duration such as \"1m30s\"\n" +
					bad + ":10: cgroupDriver: Invalid value: \"systemdd\": unknown cgroup driver; use cgroupfs or systemd\n",
			},
		},
		{
			name:       "the systemd cgroup driver",
			args:       []string{"validate", "--config", writeFile(t, "systemd.yaml", validConfig+"cgroupDriver: systemd\n"), "--hostname-override=node-a"},
			wantStdout: []string{"\ncgroupDriver: systemd\n"},
		},
		{
			name:       "the systemd cgroup driver under another cgroupRoot",
			args:       []string{"validate", "--config", writeFile(t, "systemd-root.yaml", validConfig+"cgroupDriver: systemd\ncgroupRoot: /kube.slice\n"), "--hostname-override=node-a"},
			wantCode:   1,
			wantStderr: []string{":6: cgroupRoot: Invalid value: \"/kube.slice\""},
		},
		{
			name:       "bad flag value",
			args:       []string{"validate", "--config", good, "--max-pods=0", "--hostname-override=node-a"},
			wantCode:   1,
			wantStderr: []string{"flag --max-pods: maxPods: Invalid value: 0: must be greater than or equal to 1\n"},
		},
		{
			name: "image credential provider config problems name the file and field",
			args: []string{"validate", "--config", good, "--hostname-override=node-a",
				"--image-credential-provider-bin-dir", t.TempDir(), "--image-credential-provider-config", writeFile(t, "providers.yaml",
					"apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: plug\n  matchImages: [\"*.registry.test\"]\n"+
						"  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  tokenAttributes: {serviceAccountTokenAudience: x}\n")},
			wantCode: 1,
			wantStderr: []string{"providers.yaml: providers[0].name: Invalid value: \"plug\": no plugin in the bin dir",
				"providers.yaml: providers[0].tokenAttributes: Forbidden: heartlet does not pass service account tokens to credential provider plugins"},
		},
		{
			name:       "missing file",
			args:       []string{"validate", "--config", filepath.Join(t.TempDir(), "nope.yaml")},
			wantCode:   1,
			wantStderr: []string{"reading config file", "no such file or directory"},
		},
		{
			name:       "help",
			args:       []string{"validate", "--help"},
			wantStdout: []string{"Usage:\n  heartlet [flags]", "heartlet validate --config FILE [flags]", "--pod-manifest-path string"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCommand(t, tc.args...)
			if r.code != tc.wantCode {
				t.Errorf("exit code = %d, want %d\nstderr: %s", r.code, tc.wantCode, r.stderr)
			}
			for _, w := range tc.wantStdout {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, r.stdout)
				}
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
				}
			}
			if tc.wantStderr == nil && r.stderr != "" {
				t.Errorf("unexpected stderr: %s", r.stderr)
			}
			if tc.wantCode != 0 && r.stdout != "" {
				t.Errorf("unexpected stdout on failure: %s", r.stdout)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	want := version.Get().String()
	if !strings.HasPrefix(want, "heartlet "+version.Version+"\n") || !strings.Contains(want, "platform:") {
		t.Fatalf("version.Get().String() = %q, want the version first and a platform line", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"validate", "--version"}} {
		r := runCommand(t, args...)
		if r.code != 0 || r.stdout != want {
			t.Errorf("%q: exit %d, stdout %q; want 0, %q", args, r.code, r.stdout, want)
		}
	}
	if r := runCommand(t, "version", "extra"); r.code != 1 || !strings.Contains(r.stderr, "takes no arguments") {
		t.Errorf("version with an argument: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestServe(t *testing.T) {
	good := writeFile(t, "good.yaml", validConfig)
	t.Run("bad configuration never starts the agent", func(t *testing.T) {
		r := runCommand(t, "--config", good, "--max-pods=-1", "--hostname-override=node-a")
		if r.code != 1 || !strings.Contains(r.stderr, "flag --max-pods: maxPods") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("help", func(t *testing.T) {
		r := runCommand(t, "-h")
		if r.code != 0 || !strings.Contains(r.stdout, "Flags:\n") {
			t.Errorf("exit %d, stdout %q", r.code, r.stdout)
		}
	})
	t.Run("agent failure exits 1", func(t *testing.T) {
		c, _, stderr := newCommand(func(_ context.Context, opts *config.Options) error {
			if opts.NodeName != "node-a" || opts.Config.MaxPods != 20 {
				t.Errorf("agent got options %+v", opts)
			}
			return errors.New("runtime unreachable")
		})
		if code := c.run(t.Context(), []string{"--config", good, "--hostname-override=node-a"}); code != 1 {
			t.Errorf("exit code = %d, want 1", code)
		}
		if !strings.Contains(stderr.String(), "heartlet: runtime unreachable") {
			t.Errorf("stderr = %q", stderr)
		}
	})
	t.Run("first signal stops, second exits at once", func(t *testing.T) {
		exited := make(chan int, 1)
		c, _, stderr := newCommand(func(ctx context.Context, _ *config.Options) error {
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				return err
			}
			<-ctx.Done()
			if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
				return err
			}
			if code := <-exited; code != 1 {
				t.Errorf("exit code on the second signal = %d, want 1", code)
			}
			return ctx.Err()
		})
		c.exit = func(code int) { exited <- code }
		if code := c.run(t.Context(), []string{"--config", good, "--hostname-override=node-a"}); code != 0 {
			t.Errorf("exit code after a signal = %d, want 0; stderr %q", code, stderr)
		}
	})
}

// Fields heartlet does not act on are named in one warning: on standard
// error by validate (the effective configuration on standard output stays
// a valid file), in the log at start.
func TestIgnoredFieldsWarning(t *testing.T) {
	// The rows as the test needs them, whatever the table says today.
	saved := config.Fields
	config.Fields = slices.Clone(config.Fields)
	for i, f := range config.Fields {
		switch f.Path {
		case "podPidsLimit", "cpuCFSQuota", "failSwapOn":
			config.Fields[i].Support = config.NotYet
		}
	}
	t.Cleanup(func() { config.Fields = saved })
	conf := writeFile(t, "ignored.yaml", validConfig+"podPidsLimit: 100\ncpuCFSQuota: false\n")
	const want = "these configuration fields are not acted on by heartlet and are ignored: " +
		"podPidsLimit (=100), cpuCFSQuota (=false), failSwapOn (=false from --fail-swap-on)"

	t.Run("validate", func(t *testing.T) {
		r := runCommand(t, "validate", "--config", conf, "--fail-swap-on=false", "--hostname-override=node-a")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		const deprecated = "warning: flag --fail-swap-on is deprecated as upstream: set failSwapOn in the --config file instead\n"
		if r.stderr != "warning: "+want+"\n"+deprecated {
			t.Errorf("stderr = %q\nwant the ignored fields in one line, then the deprecated flag: %q", r.stderr, "warning: "+want+"\n"+deprecated)
		}
		if !strings.Contains(r.stdout, "\npodPidsLimit: 100\n") || strings.Contains(r.stdout, "warning") {
			t.Errorf("stdout is not the effective configuration alone:\n%s", r.stdout)
		}
	})
	t.Run("validate without ignored fields warns of nothing", func(t *testing.T) {
		r := runCommand(t, "validate", "--config", writeFile(t, "good.yaml", validConfig), "--hostname-override=node-a")
		if r.code != 0 || r.stderr != "" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("start", func(t *testing.T) {
		t.Cleanup(func() { klog.LogToStderr(true) })
		logFile := filepath.Join(t.TempDir(), "heartlet.log")
		c, _, stderr := newCommand(func(context.Context, *config.Options) error { return nil })
		if code := c.run(t.Context(), []string{"--config", conf, "--fail-swap-on=false", "--hostname-override=node-a", "--log-file", logFile}); code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, "not acted on") {
				lines = append(lines, l)
			}
		}
		wantLog := `"Warning: these configuration fields are not acted on by heartlet and are ignored" fields="podPidsLimit (=100), cpuCFSQuota (=false), failSwapOn (=false from --fail-swap-on)"`
		if len(lines) != 1 || !strings.Contains(lines[0], wantLog) {
			t.Errorf("log lines about ignored fields = %q, want one with %s\nlog:\n%s", lines, wantLog, b)
		}
	})
}
