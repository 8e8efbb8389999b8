package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// fakeEnv serves files from memory, with /work as the working directory.
func fakeEnv(files map[string]string, hostname string) env {
	return env{
		hostname: func() (string, error) { return hostname, nil },
		readFile: func(name string) ([]byte, error) {
			data, ok := files[name]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return []byte(data), nil
		},
		abs: func(p string) (string, error) {
			if path.IsAbs(p) {
				return path.Clean(p), nil
			}
			return path.Join("/work", p), nil
		},
		walkDir: func(root string, fn fs.WalkDirFunc) error {
			m := fstest.MapFS{}
			for name, data := range files {
				if path.IsAbs(name) {
					m[name[1:]] = &fstest.MapFile{Data: []byte(data)}
				}
			}
			return fs.WalkDir(m, strings.TrimPrefix(root, "/"), func(p string, d fs.DirEntry, err error) error {
				return fn("/"+p, d, err)
			})
		},
	}
}

func mustLoad(t *testing.T, e env, args ...string) *Options {
	t.Helper()
	opts, err := load(args, e)
	if err != nil {
		t.Fatalf("load(%q): %v", args, err)
	}
	return opts
}

func TestLoadPrecedence(t *testing.T) {
	files := map[string]string{
		"conf/kubelet.yaml": header + `staticPodPath: manifests
maxPods: 50
syncFrequency: 30s
evictionHard:
  memory.available: 1Gi
`,
		"/etc/empty.yaml": header,
	}
	e := fakeEnv(files, "Node-A")
	tests := []struct {
		name  string
		args  []string
		check func(*kubeletv1beta1.KubeletConfiguration) (got, want any)
	}{
		{"file value", []string{"--config", "conf/kubelet.yaml"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.MaxPods, int32(50) }},
		{"flag wins over file", []string{"--config=conf/kubelet.yaml", "--max-pods=20"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.MaxPods, int32(20) }},
		{"flag before --config still wins", []string{"--max-pods", "20", "--config", "conf/kubelet.yaml"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.MaxPods, int32(20) }},
		{"file default without flag", []string{"--config", "conf/kubelet.yaml"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.FileCheckFrequency.Duration, 20 * time.Second
			}},
		{"relative file path is relative to the file", []string{"--config", "conf/kubelet.yaml"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.StaticPodPath, "/work/conf/manifests"
			}},
		{"relative flag path is relative to the working directory", []string{"--config", "conf/kubelet.yaml", "--pod-manifest-path", "pods"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.StaticPodPath, "/work/pods" }},
		{"eviction flag replaces the file's map", []string{"--config", "conf/kubelet.yaml", "--eviction-hard", "nodefs.available<5%"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.EvictionHard, map[string]string{"nodefs.available": "5%"}
			}},
		{"file readOnlyPort default is off", []string{"--config", "/etc/empty.yaml"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.ReadOnlyPort, int32(0) }},
		{"no file readOnlyPort default is 10255", nil,
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.ReadOnlyPort, int32(10255) }},
		{"read-only-port flag", []string{"--read-only-port=0"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.ReadOnlyPort, int32(0) }},
		{"runtime endpoint flag", []string{"--container-runtime-endpoint", "unix:///run/crio/crio.sock"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.ContainerRuntimeEndpoint, "unix:///run/crio/crio.sock"
			}},
		{"cgroup driver flag", []string{"--config", "conf/kubelet.yaml", "--cgroup-driver=cgroupfs"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.CgroupDriver, "cgroupfs" }},
		{"healthz port flag", []string{"--healthz-port=0"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return *kc.HealthzPort, int32(0) }},
		{"image GC high threshold flag", []string{"--config", "conf/kubelet.yaml", "--image-gc-high-threshold=90"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return *kc.ImageGCHighThresholdPercent, int32(90)
			}},
		{"image GC low threshold flag", []string{"--image-gc-low-threshold=70"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return *kc.ImageGCLowThresholdPercent, int32(70)
			}},
		{"minimum image TTL flag", []string{"--minimum-image-ttl-duration=10m"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.ImageMinimumGCAge.Duration, 10 * time.Minute
			}},
		{"underscores normalize to dashes", []string{"--max_pods=9"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.MaxPods, int32(9) }},
		{"manifest-url flag", []string{"--manifest-url", "http://10.0.0.1/pods"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.StaticPodURL, "http://10.0.0.1/pods"
			}},
		{"http-check-frequency flag", []string{"--http-check-frequency=5s"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.HTTPCheckFrequency.Duration, 5 * time.Second
			}},
		{"manifest-url-header flag, repeated headers", []string{"--manifest-url-header", "a:hello,b:again,a:world"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return fmt.Sprint(kc.StaticPodURLHeader), "map[a:[hello world] b:[again]]"
			}},
		{"verbosity short flag", []string{"-v", "3"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return uint32(kc.Logging.Verbosity), uint32(3)
			}},
		{"verbosity long flag", []string{"--v=5"},
			func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return uint32(kc.Logging.Verbosity), uint32(5)
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := mustLoad(t, e, tc.args...)
			got, want := tc.check(opts.Config)
			if m, ok := got.(map[string]string); ok {
				if !maps.Equal(m, want.(map[string]string)) {
					t.Errorf("got %v, want %v", got, want)
				}
				return
			}
			if got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestLoadFlagOnlyOptions(t *testing.T) {
	e := fakeEnv(nil, "Machine.Example.COM")
	opts := mustLoad(t, e, "--kubeconfig=/etc/kubernetes/kubelet.conf", "--root-dir=state", "--node-ip=10.0.0.5,fd00::5", "--v=2")
	if opts.Kubeconfig != "/etc/kubernetes/kubelet.conf" {
		t.Errorf("Kubeconfig = %q", opts.Kubeconfig)
	}
	if opts.RootDir != "/work/state" {
		t.Errorf("RootDir = %q, want /work/state", opts.RootDir)
	}
	if !slices.Equal(opts.NodeIPs, []string{"10.0.0.5", "fd00::5"}) {
		t.Errorf("NodeIPs = %q", opts.NodeIPs)
	}
	if opts.NodeName != "machine.example.com" {
		t.Errorf("NodeName = %q, want the lower-cased hostname", opts.NodeName)
	}
	if opts.Verbosity != 2 {
		t.Errorf("Verbosity = %d, want 2", opts.Verbosity)
	}
	if opts.ConfigFile != "" {
		t.Errorf("ConfigFile = %q", opts.ConfigFile)
	}

	opts = mustLoad(t, e, "--hostname-override", " Worker-1 ")
	if opts.NodeName != "worker-1" || opts.HostnameOverride != " Worker-1 " {
		t.Errorf("NodeName, HostnameOverride = %q, %q", opts.NodeName, opts.HostnameOverride)
	}
	if opts.RootDir != DefaultRootDir {
		t.Errorf("RootDir = %q, want %q", opts.RootDir, DefaultRootDir)
	}
}

func TestLoadProblems(t *testing.T) {
	files := map[string]string{
		"bad.yaml": header + `maxPods: -3
readOnlyPort: 70000
evictionSoft:
  memory.available: 1Gi
unknownField: true
`,
		"ok.yaml": header + "maxPods: 10\n",
	}
	tests := []struct {
		name     string
		args     []string
		hostname string
		want     []string
	}{
		{
			name: "file problems name file and line",
			args: []string{"--config", "bad.yaml"},
			want: []string{
				"bad.yaml:3: maxPods: Invalid value: -3: must be greater than or equal to 1",
				"bad.yaml:4: readOnlyPort: Invalid value: 70000: must be between 0 (off) and 65535",
				"bad.yaml:6: evictionSoft[memory.available]: Invalid value: \"1Gi\": needs a grace period in evictionSoftGracePeriod[memory.available]",
				"bad.yaml:7: unknownField: Forbidden: unknown field",
			},
		},
		{
			name: "a flag that sets a bad value is named",
			args: []string{"--config", "ok.yaml", "--max-pods=-1", "--eviction-hard=memory.free<1Gi"},
			want: []string{
				"flag --max-pods: maxPods: Invalid value: -1: must be greater than or equal to 1",
				"flag --eviction-hard: evictionHard[memory.free]: Unsupported value: \"memory.free\"",
			},
		},
		{
			// Validation refuses what heartlet's start refuses: the same
			// rule.
			name: "unknown cgroup driver",
			args: []string{"--config", "ok.yaml", "--cgroup-driver=system"},
			want: []string{"flag --cgroup-driver: cgroupDriver: Invalid value: \"system\": unknown cgroup driver; use cgroupfs or systemd"},
		},
		{
			name: "static pod URL that is not http",
			args: []string{"--config", "ok.yaml", "--manifest-url=file:///etc/pods"},
			want: []string{"flag --manifest-url: staticPodURL: Invalid value: \"file:///etc/pods\": must be an http:// or https:// URL"},
		},
		{
			name: "flag-only problems",
			args: []string{"--node-ip=10.0.0.1,node", "--hostname-override=bad_name"},
			want: []string{
				"flag --node-ip: nodeIP[1]: Invalid value: \"node\": must be an IP address",
				"flag --hostname-override: hostnameOverride: Invalid value: \"bad_name\"",
			},
		},
		{
			name: "empty hostname override",
			args: []string{"--hostname-override= "},
			want: []string{"flag --hostname-override: hostnameOverride: Required value"},
		},
		{
			name:     "invalid machine hostname",
			hostname: "my_host",
			want:     []string{"nodeName: Invalid value: \"my_host\": the machine's hostname is not a valid node name"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.hostname
			if host == "" {
				host = "node-a"
			}
			_, err := load(tc.args, fakeEnv(files, host))
			var problems Errors
			if !errors.As(err, &problems) {
				t.Fatalf("load error = %v, want Errors", err)
			}
			if len(problems) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(problems), len(tc.want), problems)
			}
			for i, w := range tc.want {
				if got := problems[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("problem %d = %q, want prefix %q", i, got, w)
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	e := fakeEnv(map[string]string{"syntax.yaml": "a: [\n"}, "node-a")
	tests := []struct {
		name string
		args []string
		is   error
		text string
	}{
		{"help", []string{"--help"}, ErrHelp, ""},
		{"short help", []string{"-h"}, ErrHelp, ""},
		{"version", []string{"--version"}, ErrVersion, ""},
		{"help wins over a bad file", []string{"--config", "missing.yaml", "--help"}, ErrHelp, ""},
		{"unknown flag", []string{"--no-such-flag"}, nil, "unknown flag: --no-such-flag"},
		{"bad flag value", []string{"--max-pods=many"}, nil, `invalid argument "many" for "--max-pods"`},
		{"positional argument", []string{"run"}, nil, `unexpected argument "run"`},
		{"missing file", []string{"--config", "missing.yaml"}, fs.ErrNotExist, `reading config file "missing.yaml"`},
		{"syntax error", []string{"--config", "syntax.yaml"}, nil, "syntax.yaml:1: invalid YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.args, e)
			if err == nil {
				t.Fatal("load succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
			if IsExit(err) != (tc.is == ErrHelp || tc.is == ErrVersion) {
				t.Errorf("IsExit(%v) = %v", err, IsExit(err))
			}
		})
	}
}

func TestFlagUsages(t *testing.T) {
	usage := FlagUsages()
	for _, flag := range []string{
		"--config", "--kubeconfig", "--pod-manifest-path", "--container-runtime-endpoint", "--root-dir",
		"--hostname-override", "--node-ip", "-v, --v", "--cgroup-driver", "--read-only-port",
		"--healthz-port", "--max-pods", "--version", "-h, --help",
	} {
		if !strings.Contains(usage, flag) {
			t.Errorf("usage does not mention %s", flag)
		}
	}
	if !strings.Contains(usage, `"/var/lib/kubelet")`) || !strings.Contains(usage, "(default 10255)") {
		t.Errorf("usage does not show the flag defaults:\n%s", usage)
	}
}
