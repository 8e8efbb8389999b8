package systemdunit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// kubeadmDropIn is the drop-in the kubeadm packages install
// (kubelet.service.d/10-kubeadm.conf, as in kubernetes/release's
// cmd/krel/templates/latest/kubeadm/10-kubeadm.conf).
var kubeadmDropIn = readTestdata("10-kubeadm.conf")

// kubeletUnit is the upstream kubelet's unit as the same packages
// install it.
var kubeletUnit = readTestdata("kubelet.service")

// readTestdata reads a file of testdata/, which the tests of other
// packages read too.
func readTestdata(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestKubeadmUnit(t *testing.T) {
	var s Service
	if err := s.Apply("kubelet.service", []byte(kubeletUnit)); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply("10-kubeadm.conf", []byte(kubeadmDropIn)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"}; !slices.Equal(s.ExecStart, want) {
		t.Errorf("ExecStart = %q, want %q", s.ExecStart, want)
	}
	wantFiles := []EnvironmentFile{{"/var/lib/kubelet/kubeadm-flags.env", true}, {"/etc/default/kubelet", true}}
	if !slices.Equal(s.EnvironmentFiles, wantFiles) {
		t.Errorf("EnvironmentFiles = %v, want %v", s.EnvironmentFiles, wantFiles)
	}
	flags, err := ParseEnvironmentFile("kubeadm-flags.env", []byte(`KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := ParseEnvironmentFile("kubelet", []byte("KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5   \n"))
	if err != nil {
		t.Fatal(err)
	}
	args, err := Command(s.ExecStart[0], Environment(s.Environment, flags, extra))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
		"--pod-infra-container-image=registry.k8s.io/pause:3.10", "--node-ip=10.0.0.5"}
	if !slices.Equal(args, want) {
		t.Errorf("command\n got %q\nwant %q", args, want)
	}
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   []string
		want    Service
		wantErr string
	}{
		{"continuation and comments inside it", []string{"[Service]\nExecStart=/bin/k \\\n# comment\n  --a \\\n  --b\n"},
			Service{ExecStart: []string{"/bin/k    --a    --b"}}, ""},
		{"prefixes removed", []string{"[Service]\nExecStart=-+/bin/k --x\n"}, Service{ExecStart: []string{"/bin/k --x"}}, ""},
		{"reset by a later drop-in", []string{"[Service]\nExecStart=/a\nEnvironment=A=1 B=2\nEnvironmentFile=/e\n", "[Service]\nExecStart=\nEnvironment=\nEnvironmentFile=\nExecStart=/b\n"},
			Service{ExecStart: []string{"/b"}}, ""},
		{"other sections skipped", []string{"[Unit]\nExecStart=/nope\n[Service]\nExecStart=/yes\n[Install]\nWantedBy=x\n"}, Service{ExecStart: []string{"/yes"}}, ""},
		{"quoted assignments", []string{`[Service]` + "\n" + `Environment="A=x y" B='1 2' C=3` + "\n"}, Service{Environment: []string{"A=x y", "B=1 2", "C=3"}}, ""},
		{"CRLF", []string{"[Service]\r\nExecStart=/a\r\n"}, Service{ExecStart: []string{"/a"}}, ""},
		{"no section", []string{"ExecStart=/a\n"}, Service{}, "outside of a section"},
		{"not an assignment", []string{"[Service]\nExecStart\n"}, Service{}, "neither a section header nor KEY=VALUE"},
		{"bad header", []string{"[Service\n"}, Service{}, "bad section header"},
		{"bad environment", []string{"[Service]\nEnvironment=1A=x\n"}, Service{}, "not an assignment"},
		{"unterminated quote", []string{"[Service]\nEnvironment=\"A=x\n"}, Service{}, "unterminated quote"},
		{"relative environment file", []string{"[Service]\nEnvironmentFile=-etc/x\n"}, Service{}, "not an absolute path"},
		{"too large", []string{"[Service]\n#" + strings.Repeat("x", MaxFileSize)}, Service{}, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Service
			var err error
			for _, f := range tc.files {
				if err = s.Apply("u.conf", []byte(f)); err != nil {
					break
				}
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrSyntax) {
					t.Fatalf("Apply = %v, want an ErrSyntax containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "u.conf") {
					t.Errorf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.ExecStart, tc.want.ExecStart) || !slices.Equal(s.Environment, tc.want.Environment) || !slices.Equal(s.EnvironmentFiles, tc.want.EnvironmentFiles) {
				t.Errorf("got %+v, want %+v", s, tc.want)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	env := map[string]string{"A": "--a=1  --b=2", "E": "", "Q": "x y"}
	for _, tc := range []struct {
		line    string
		want    []string
		wantErr bool
	}{
		{"/k $A $E $UNSET", []string{"/k", "--a=1", "--b=2"}, false},
		{"/k ${Q}", []string{"/k", "x y"}, false},
		{"/k --q=${Q}x", []string{"/k", "--q=x yx"}, false},
		{`/k "$A"`, []string{"/k", "$A"}, false},
		{`/k --p=$A`, []string{"/k", "--p=$A"}, false},
		{`/k $$A 100%% '%%'`, []string{"/k", "$A", "100%", "%"}, false},
		{`/k "a b" 'c d' e\ f`, []string{"/k", "a b", "c d", "e f"}, false},
		{`/k ${`, nil, true},
		{`/k ${1x}`, nil, true},
		{`/k "open`, nil, true},
		{`$E`, nil, true},
		{`/k \`, nil, true},
	} {
		got, err := Command(tc.line, env)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("Command(%q) = %q, %v; want %q, error %v", tc.line, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseEnvironmentFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    string
		want    []string
		wantErr string
	}{
		{"kubeadm", "KUBELET_KUBEADM_ARGS=\"--a=1 --b=2\"\n", []string{"KUBELET_KUBEADM_ARGS=--a=1 --b=2"}, ""},
		{"empty value", "KUBELET_EXTRA_ARGS=\n", []string{"KUBELET_EXTRA_ARGS="}, ""},
		{"comments and blanks", "# c\n; d\n\n  A = x  \nB='lit $x \\n'\n", []string{"A=x", `B=lit $x \n`}, ""},
		{"continued", "A=\"one \\\ntwo\"\nB=x\\\ny\n", []string{"A=one two", "B=xy"}, ""},
		{"escapes in double quotes", `A="q\" b\\ d\$ e\z"` + "\n", []string{`A=q" b\ d$ e\z`}, ""},
		{"no final newline", "A=1", []string{"A=1"}, ""},
		{"later wins in Environment", "A=1\nA=2\n", []string{"A=1", "A=2"}, ""},
		{"not an assignment", "A=1\njunk\n", nil, ":2:"},
		{"bad name", "1A=x\n", nil, "bad variable name"},
		{"unterminated double", "A=\"x\n", nil, "unterminated double quote"},
		{"unterminated single", "A='x\n", nil, "unterminated single quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnvironmentFile("f.env", []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrSyntax) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if env := Environment([]string{"A=1"}, []string{"A=2", "B=x=y"}); env["A"] != "2" || env["B"] != "x=y" {
		t.Errorf("Environment = %v", env)
	}
}
