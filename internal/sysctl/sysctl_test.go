package sysctl

import (
	"strings"
	"testing"
)

// Namespaces as upstream pkg/kubelet/sysctl/namespace.go.
func TestNamespacedBy(t *testing.T) {
	tests := map[string]Namespace{
		"kernel.sem":                   IPC,
		"kernel.shmmax":                IPC,
		"kernel.shm_rmid_forced":       IPC,
		"kernel.msgmax":                IPC,
		"fs.mqueue.msg_max":            IPC,
		"net.ipv4.ip_local_port_range": Net,
		"net.core.somaxconn":           Net,
		"kernel.pid_max":               Unknown,
		"vm.swappiness":                Unknown,
		"kernel.semx":                  Unknown,
	}
	for name, want := range tests {
		if got := NamespacedBy(name); got != want {
			t.Errorf("NamespacedBy(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestNormalize(t *testing.T) {
	tests := map[string]string{
		"net.ipv4.conf.eth0/100.forwarding": "net.ipv4.conf.eth0/100.forwarding",
		"net/ipv4/conf/eth0.100/forwarding": "net.ipv4.conf.eth0/100.forwarding",
		"kernel/shm_rmid_forced":            "kernel.shm_rmid_forced",
		"kernel":                            "kernel",
	}
	for in, want := range tests {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

// Pattern rules and messages of upstream NewAllowlist.
func TestValidatePattern(t *testing.T) {
	tests := []struct {
		pattern string
		wantErr string
	}{
		{pattern: "kernel.msg*"},
		{pattern: "net.core.somaxconn"},
		{pattern: "net/ipv4/*"},
		{pattern: "kernel.sem"},
		{pattern: "kernel.pid_max", wantErr: `the sysctl "kernel.pid_max" are not known to be namespaced`},
		{pattern: "vm.*", wantErr: `the sysctls "vm.*" are not known to be namespaced`},
		{pattern: "*", wantErr: `the sysctls "*" are not known to be namespaced`},
		{pattern: "Kernel.Msgmax", wantErr: `must have at most 253 characters and match regex`},
		{pattern: "net..core", wantErr: `must have at most 253 characters and match regex`},
		{pattern: "net." + strings.Repeat("a", 260), wantErr: `must have at most 253 characters`},
	}
	for _, tc := range tests {
		err := ValidatePattern(tc.pattern)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ValidatePattern(%q) = %v, want nil", tc.pattern, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ValidatePattern(%q) = %v, want %q", tc.pattern, err, tc.wantErr)
		}
	}
}

// The safe set and host-namespace refusals of upstream's allowlist.
func TestAllowlist(t *testing.T) {
	w, err := NewAllowlist([]string{"kernel.msg*", "net.core.somaxconn"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		hostNet, hostIPC bool
		wantErr          string
	}{
		{name: "kernel.shm_rmid_forced"},
		{name: "net.ipv4.ip_local_port_range"},
		{name: "net/ipv4/ip_local_port_range"},
		{name: "net.ipv4.tcp_syncookies"},
		{name: "net.ipv4.ping_group_range"},
		{name: "net.ipv4.ip_unprivileged_port_start"},
		{name: "kernel.msgmax"},
		{name: "kernel.msgmnb"},
		{name: "net.core.somaxconn"},
		{name: "kernel.sem", wantErr: `"kernel.sem" not allowlisted`},
		{name: "net.core.rmem_max", wantErr: `"net.core.rmem_max" not allowlisted`},
		{name: "net.ipv4.ip_local_port_range", hostNet: true, wantErr: `"net.ipv4.ip_local_port_range" not allowed with host net enabled`},
		{name: "kernel.shm_rmid_forced", hostIPC: true, wantErr: `"kernel.shm_rmid_forced" not allowed with host ipc enabled`},
		{name: "kernel.msgmax", hostIPC: true, wantErr: `"kernel.msgmax" not allowed with host ipc enabled`},
		{name: "kernel.shm_rmid_forced", hostNet: true},
	}
	for _, tc := range tests {
		err := w.Validate(tc.name, tc.hostNet, tc.hostIPC)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("Validate(%q, net=%v, ipc=%v) = %v, want nil", tc.name, tc.hostNet, tc.hostIPC, err)
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("Validate(%q, net=%v, ipc=%v) = %v, want %q", tc.name, tc.hostNet, tc.hostIPC, err, tc.wantErr)
		}
	}
	if _, err := NewAllowlist([]string{"vm.swappiness"}); err == nil {
		t.Error("NewAllowlist accepted a sysctl that is not namespaced")
	}
}
