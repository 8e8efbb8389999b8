package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/sysctl"
)

// Reason and message of upstream's sysctl admit handler
// (pkg/kubelet/sysctl/allowlist.go); e2e test/e2e/common/node/sysctl.go
// expects reason SysctlForbidden.
func TestSysctls(t *testing.T) {
	withUnsafe, err := sysctl.NewAllowlist([]string{"kernel.msg*"})
	if err != nil {
		t.Fatal(err)
	}
	safeOnly, err := sysctl.NewAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := func(hostNet bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	tests := []struct {
		name  string
		pod   *v1.Pod
		allow *sysctl.Allowlist
		want  Result
	}{
		{name: "no security context", pod: &v1.Pod{}, allow: safeOnly, want: Result{Admit: true}},
		{name: "no sysctls", pod: pod(false), allow: safeOnly, want: Result{Admit: true}},
		{name: "safe", pod: pod(false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range"), allow: safeOnly, want: Result{Admit: true}},
		{
			name: "unsafe refused", pod: pod(false, "kernel.shm_rmid_forced", "kernel.msgmax"), allow: safeOnly,
			want: Result{Reason: "SysctlForbidden", Message: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		},
		{name: "unsafe allowed", pod: pod(false, "kernel.msgmax"), allow: withUnsafe, want: Result{Admit: true}},
		{
			name: "net sysctl with host network", pod: pod(true, "net.ipv4.ip_local_port_range"), allow: safeOnly,
			want: Result{Reason: "SysctlForbidden", Message: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host net enabled`},
		},
		{name: "nil allowlist", pod: pod(false, "kernel.msgmax"), allow: nil, want: Result{Admit: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sysctls(tc.pod, tc.allow); got != tc.want {
				t.Errorf("Sysctls = %+v, want %+v", got, tc.want)
			}
		})
	}
}
