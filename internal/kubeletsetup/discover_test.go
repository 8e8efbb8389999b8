package kubeletsetup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFiles writes files (paths on the node → content) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The upstream kubelet's unit and kubeadm's drop-in, as the kubeadm
// packages install them.
var (
	kubeletService = readUnit("kubelet.service")
	kubeadmConf    = readUnit("10-kubeadm.conf")
)

// readUnit reads one of the unit files kept in systemdunit's testdata.
func readUnit(name string) string {
	b, err := os.ReadFile(filepath.Join("..", "systemdunit", "testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

const (
	// kubeadm init writes the flags file (cmd/kubeadm/app/phases/kubelet).
	kubeadmFlags = `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --node-ip=10.0.0.5"` + "\n"
)

func TestFromSystemd(t *testing.T) {
	kubeadmArgs := []string{"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock", "--node-ip=10.0.0.5"}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     []string
		wantFrom string
		wantErr  string
	}{
		{"kubeadm's files", map[string]string{
			"/usr/lib/systemd/system/kubelet.service":                   kubeletService,
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmConf,
			"/var/lib/kubelet/kubeadm-flags.env":                        kubeadmFlags,
		}, kubeadmArgs, "/usr/lib/systemd/system/kubelet.service, /usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf, /var/lib/kubelet/kubeadm-flags.env", ""},
		{"extra args from /etc/default/kubelet", map[string]string{
			"/lib/systemd/system/kubelet.service":                   kubeletService,
			"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmConf,
			"/var/lib/kubelet/kubeadm-flags.env":                    kubeadmFlags,
			"/etc/default/kubelet":                                  "KUBELET_EXTRA_ARGS='--max-pods=50 --v=2'\n",
		}, append(slices.Clone(kubeadmArgs), "--max-pods=50", "--v=2"), "/etc/default/kubelet", ""},
		{"a drop-in in /etc hides the package's of the same name, others apply by name", map[string]string{
			"/usr/lib/systemd/system/kubelet.service":                   kubeletService,
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmConf,
			"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf":     "[Service]\nExecStart=\nExecStart=/opt/bin/kubelet --config=/etc/k.yaml $KUBELET_EXTRA_ARGS\n",
			"/run/systemd/system/kubelet.service.d/20-extra.conf":       "[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--v=4\n",
			"/etc/systemd/system/kubelet.service.d/05-first.conf":       "[Service]\nEnvironment=KUBELET_EXTRA_ARGS=--v=1\n",
			"/etc/systemd/system/kubelet.service.d/README":              "not a drop-in",
		}, []string{"--config=/etc/k.yaml", "--v=4"}, "/etc/systemd/system/kubelet.service.d/05-first.conf, /etc/systemd/system/kubelet.service.d/10-kubeadm.conf, /run/systemd/system/kubelet.service.d/20-extra.conf", ""},
		{"a unit in /etc wins", map[string]string{
			"/usr/lib/systemd/system/kubelet.service": kubeletService,
			"/etc/systemd/system/kubelet.service":     "[Service]\nExecStart=/usr/local/bin/kubelet --v=3\n",
		}, []string{"--v=3"}, "systemd unit /etc/systemd/system/kubelet.service", ""},
		{"a required environment file is missing", map[string]string{
			"/usr/lib/systemd/system/kubelet.service": "[Service]\nEnvironmentFile=/etc/sysconfig/kubelet\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n",
		}, nil, "", "/etc/sysconfig/kubelet"},
		{"two ExecStart", map[string]string{
			"/usr/lib/systemd/system/kubelet.service":                   kubeletService,
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\nExecStart=/usr/bin/kubelet --v=2\n",
		}, nil, "", "2 ExecStart= lines"},
		{"no ExecStart", map[string]string{"/usr/lib/systemd/system/kubelet.service": "[Service]\nRestart=always\n"}, nil, "", "no ExecStart="},
		{"a bad environment file", map[string]string{
			"/usr/lib/systemd/system/kubelet.service":                   kubeletService,
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmConf,
			"/var/lib/kubelet/kubeadm-flags.env":                        "KUBELET_KUBEADM_ARGS=\"--unterminated\n",
		}, nil, "", "/var/lib/kubelet/kubeadm-flags.env:1"},
		{"a bad drop-in", map[string]string{
			"/usr/lib/systemd/system/kubelet.service":                   kubeletService,
			"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": "ExecStart=/x\n",
		}, nil, "", "10-kubeadm.conf:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			src, err := Node{Root: root}.FromSystemd()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromSystemd = %+v, %v; want an error containing %q", src, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(src.Args, tc.want) {
				t.Errorf("args\n got %q\nwant %q", src.Args, tc.want)
			}
			if !strings.Contains(src.From, tc.wantFrom) {
				t.Errorf("From = %q, want it to contain %q", src.From, tc.wantFrom)
			}
		})
	}
	if _, err := (Node{Root: t.TempDir()}).FromSystemd(); !errors.Is(err, ErrNoKubelet) {
		t.Errorf("no unit: %v, want ErrNoKubelet", err)
	}
}

func TestFromProcess(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"/proc/12/comm":    "bash\n",
		"/proc/12/cmdline": "bash\x00",
		// heartlet itself, should it be named kubelet.
		"/proc/20/comm":    "kubelet\n",
		"/proc/20/cmdline": "/usr/bin/kubelet\x00--self\x00",
		// A zombie kubelet has no command line.
		"/proc/25/comm":     "kubelet\n",
		"/proc/25/cmdline":  "",
		"/proc/340/comm":    "kubelet\n",
		"/proc/340/cmdline": "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00--node-labels=a=b c\x00",
		"/proc/999/comm":    "kubelet\n",
		"/proc/999/cmdline": "/usr/bin/kubelet\x00--later\x00",
		"/proc/sys/x":       "",
	})
	if err := os.Symlink("12", filepath.Join(root, "proc", "self")); err != nil {
		t.Fatal(err)
	}
	n := Node{Root: root, Self: 20}
	src, err := n.FromProcess()
	if err != nil || src == nil {
		t.Fatalf("FromProcess = %+v, %v", src, err)
	}
	if src.Program != "/usr/bin/kubelet" || !slices.Equal(src.Args, []string{"--config=/var/lib/kubelet/config.yaml", "--node-labels=a=b c"}) || !strings.Contains(src.From, "process 340") {
		t.Errorf("FromProcess = %+v", src)
	}
	// Discover prefers the process to the unit files.
	writeFiles(t, root, map[string]string{"/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --unit\n"})
	if src, err := n.Discover(); err != nil || !strings.Contains(src.From, "process 340") {
		t.Errorf("Discover = %+v, %v; want the process", src, err)
	}
	// Without a kubelet process, the unit.
	for _, pid := range []string{"25", "340", "999"} {
		if err := os.RemoveAll(filepath.Join(root, "proc", pid)); err != nil {
			t.Fatal(err)
		}
	}
	if src, err := n.Discover(); err != nil || !slices.Equal(src.Args, []string{"--unit"}) {
		t.Errorf("Discover without a process = %+v, %v; want the unit's", src, err)
	}
	if src, err := (Node{Root: filepath.Join(root, "nothing")}).FromProcess(); src != nil || err != nil {
		t.Errorf("no /proc: %+v, %v", src, err)
	}
}

func TestLoadArgs(t *testing.T) {
	n := Node{Root: "/tmp/r"}
	got := n.LoadArgs([]string{"--config", "/var/lib/kubelet/config.yaml", "--config-dir=/etc/kubelet.conf.d", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"-image-credential-provider-config", "/etc/cp.yaml", "--v=2", "--config=/tmp/r/already"})
	want := []string{"--config", "/tmp/r/var/lib/kubelet/config.yaml", "--config-dir=/tmp/r/etc/kubelet.conf.d", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"-image-credential-provider-config", "/tmp/r/etc/cp.yaml", "--v=2", "--config=/tmp/r/already"}
	if !slices.Equal(got, want) {
		t.Errorf("LoadArgs\n got %q\nwant %q", got, want)
	}
	if got := (Node{Root: "/"}).LoadArgs([]string{"--config=/c"}); !slices.Equal(got, []string{"--config=/c"}) {
		t.Errorf("root /: %q", got)
	}
}
