package config

import (
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// allowedUnsafeSysctls entries must be valid, namespaced sysctls or
// patterns, as upstream's NewAllowlist demands at kubelet start.
func TestValidateAllowedUnsafeSysctls(t *testing.T) {
	tests := []struct {
		name    string
		list    []string
		want    []string
		wantMsg string
	}{
		{name: "none", list: nil},
		{name: "names and patterns", list: []string{"kernel.msg*", "net.core.somaxconn", "kernel.sem", "fs.mqueue.*"}},
		{name: "not namespaced", list: []string{"kernel.msg*", "vm.swappiness"}, want: []string{"allowedUnsafeSysctls[1]"}, wantMsg: "not known to be namespaced"},
		{name: "bad syntax", list: []string{"Kernel.Msg*"}, want: []string{"allowedUnsafeSysctls[0]"}, wantMsg: "must have at most 253 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &kubeletv1beta1.KubeletConfiguration{}
			SetDefaults(c)
			c.AllowedUnsafeSysctls = tc.list
			errs := Validate(c)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				if !strings.Contains(e.Detail, tc.wantMsg) {
					t.Errorf("error %q does not mention %q", e.Detail, tc.wantMsg)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("error paths = %q, want %q", got, tc.want)
			}
		})
	}
}

// The file sets allowedUnsafeSysctls; the upstream flag replaces it.
func TestAllowedUnsafeSysctlsFlag(t *testing.T) {
	e := fakeEnv(map[string]string{"/etc/k.yaml": header + "allowedUnsafeSysctls:\n- kernel.msg*\n"}, "node")
	if got := mustLoad(t, e, "--config", "/etc/k.yaml").Config.AllowedUnsafeSysctls; !slices.Equal(got, []string{"kernel.msg*"}) {
		t.Errorf("from file: %q", got)
	}
	got := mustLoad(t, e, "--config", "/etc/k.yaml", "--allowed-unsafe-sysctls", "net.core.somaxconn,kernel.shm*").Config.AllowedUnsafeSysctls
	if !slices.Equal(got, []string{"net.core.somaxconn", "kernel.shm*"}) {
		t.Errorf("from flag: %q", got)
	}
	if _, err := load([]string{"--allowed-unsafe-sysctls", "vm.swappiness"}, e); err == nil || !strings.Contains(err.Error(), "allowedUnsafeSysctls[0]") {
		t.Errorf("invalid flag value: err = %v, want allowedUnsafeSysctls[0]", err)
	}
}
