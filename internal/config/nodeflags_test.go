package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestNodeLabels checks --node-labels against upstream's rules
// (cmd/kubelet/app/options/options.go, ValidateKubeletFlags, and the
// allowed set of k8s.io/kubelet/pkg/apis).
func TestNodeLabels(t *testing.T) {
	e := fakeEnv(nil, "node-a")
	for _, tc := range []struct {
		labels string
		want   string // "" when accepted
	}{
		{"role=db,tier=1", ""},
		{"node-role.kubernetes.io/worker=", "node-role.kubernetes.io/worker"},
		{"kubernetes.io/hostname=x,kubernetes.io/os=linux,kubernetes.io/arch=amd64", ""},
		{"topology.kubernetes.io/zone=a,topology.kubernetes.io/region=r,node.kubernetes.io/instance-type=m", ""},
		{"node.kubernetes.io/anything=1,kubelet.kubernetes.io/x=2,foo.node.kubernetes.io/y=3", ""},
		{"kubernetes.io/role=master", "flag --node-labels: nodeLabels[kubernetes.io/role]: Forbidden: a label in the 'kubernetes.io' or 'k8s.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io)"},
		{"k8s.io/x=1", "nodeLabels[k8s.io/x]: Forbidden"},
		{"sub.k8s.io/x=1", "nodeLabels[sub.k8s.io/x]: Forbidden"},
		{"example.com/ok=1,notkubernetes.io/x=1", ""},
		{"bad key=1", "nodeLabels[bad key]: Invalid value"},
		{"k=bad value!", `nodeLabels[k]: Invalid value: "bad value!"`},
	} {
		t.Run(tc.labels, func(t *testing.T) {
			_, err := load([]string{"--node-labels", tc.labels}, e)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestRegisterWithTaints checks the flag's parsing, as upstream's
// (pkg/util/taints, ParseTaints) and its validation.
func TestRegisterWithTaints(t *testing.T) {
	e := fakeEnv(nil, "node-a")
	for _, tc := range []struct {
		arg  string
		want string // the taints, or a substring of the error
		ok   bool
	}{
		{"node-role.kubernetes.io/control-plane:NoSchedule", "[node-role.kubernetes.io/control-plane:NoSchedule]", true},
		{"a=b:NoExecute,c:PreferNoSchedule", "[a=b:NoExecute c:PreferNoSchedule]", true},
		{"a=b:NoExecute,a=c:NoExecute", "duplicated taints with the same key and effect", false},
		{"a:Sometimes", "invalid taint effect: Sometimes", false},
		{"a=b=c:NoSchedule", "invalid taint spec: a=b=c:NoSchedule", false},
		{"a:b:c", "invalid taint spec", false},
		{"bad key:NoSchedule", "invalid taint spec", false},
		{"a", `registerWithTaints[0].effect: Unsupported value: ""`, false},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			opts, err := load([]string{"--register-with-taints", tc.arg}, e)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want it to contain %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tn := range opts.Config.RegisterWithTaints {
				got = append(got, tn.ToString())
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("taints %v, want %s", got, tc.want)
			}
		})
	}
	opts := mustLoad(t, e, "--provider-id", "aws:///eu-west-1a/i-0123")
	if opts.Config.ProviderID != "aws:///eu-west-1a/i-0123" {
		t.Errorf("providerID %q", opts.Config.ProviderID)
	}
}

func TestLockFileFlags(t *testing.T) {
	e := fakeEnv(nil, "node-a")
	opts := mustLoad(t, e, "--lock-file", "run/kubelet.lock", "--exit-on-lock-contention")
	if opts.LockFile != "/work/run/kubelet.lock" || !opts.ExitOnLockContention {
		t.Errorf("LockFile %q ExitOnLockContention %v", opts.LockFile, opts.ExitOnLockContention)
	}
	if _, err := load([]string{"--exit-on-lock-contention"}, e); err == nil || !strings.Contains(err.Error(), "no lock file specified") {
		t.Errorf("--exit-on-lock-contention alone: %v", err)
	}
}
