package systemdunit

import (
	"errors"
	"strings"
	"testing"
)

// FuzzApply: any unit file either applies or fails with ErrSyntax, and
// what it applies is well formed.
func FuzzApply(f *testing.F) {
	f.Add([]byte(kubeletUnit))
	f.Add([]byte(kubeadmDropIn))
	f.Add([]byte("[Service]\nExecStart=/bin/k \\\n# c\n --a\nEnvironment=\"A=x y\" B='1'\nEnvironmentFile=-/e\n"))
	f.Add([]byte("[Service\nExecStart\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Service
		err := s.Apply("f", data)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error without ErrSyntax: %v", err)
			}
			return
		}
		for _, a := range s.Environment {
			k, _, ok := strings.Cut(a, "=")
			if !ok || !validName(k) {
				t.Fatalf("bad assignment %q", a)
			}
		}
		for _, e := range s.EnvironmentFiles {
			if !strings.HasPrefix(e.Path, "/") {
				t.Fatalf("relative environment file %q", e.Path)
			}
		}
		env := Environment(s.Environment)
		for _, line := range s.ExecStart {
			args, err := Command(line, env)
			if err != nil {
				if !errors.Is(err, ErrSyntax) {
					t.Fatalf("Command error without ErrSyntax: %v", err)
				}
				continue
			}
			if len(args) == 0 {
				t.Fatal("Command returned no words and no error")
			}
		}
	})
}

// FuzzCommand: expanding any command line with any variable value either
// fails with ErrSyntax or gives words; a bare $NAME never leaves a word
// with the value's whitespace in it.
func FuzzCommand(f *testing.F) {
	f.Add("/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_EXTRA_ARGS", "--a=1 --b=2")
	f.Add(`/k "${V}" '$V' \$V $$V %%`, "x y")
	f.Add(`/k ${`, "")
	f.Fuzz(func(t *testing.T, line, value string) {
		args, err := Command(line, map[string]string{"V": value, "KUBELET_EXTRA_ARGS": value})
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error without ErrSyntax: %v", err)
			}
			return
		}
		if len(args) == 0 {
			t.Fatal("no words and no error")
		}
		if strings.TrimSpace(line) == "/k $V" {
			for _, a := range args[1:] {
				if strings.ContainsAny(a, " \t\n") {
					t.Fatalf("bare $V gave a word with whitespace: %q", a)
				}
			}
		}
	})
}

// FuzzParseEnvironmentFile: any file either parses into assignments with
// valid names or fails with ErrSyntax naming the file.
func FuzzParseEnvironmentFile(f *testing.F) {
	f.Add([]byte("KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock\"\n"))
	f.Add([]byte("# c\nA = x \\\ny\nB='l'\nC=\"q\\\"\\\nr\"\n"))
	f.Add([]byte("A='x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseEnvironmentFile("f.env", data)
		if err != nil {
			if !errors.Is(err, ErrSyntax) || !strings.HasPrefix(err.Error(), "f.env") {
				t.Fatalf("bad error: %v", err)
			}
			return
		}
		for _, a := range got {
			k, _, ok := strings.Cut(a, "=")
			if !ok || !validName(k) {
				t.Fatalf("bad assignment %q", a)
			}
		}
	})
}
