package runtime

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The "config" info is what containerd 1.6.20 returns from a verbose CRI
// Status (crictl info), cut to the fields read.
func TestDriverFromStatusInfo(t *testing.T) {
	const systemdInfo = `{"containerd":{"snapshotter":"overlayfs","defaultRuntimeName":"runc","runtimes":{"runc":{"runtimeType":"io.containerd.runc.v2","options":{"BinaryName":"/usr/sbin/runc","SystemdCgroup":true}}}},"cni":{"binDir":"/usr/lib/cni"}}`
	tests := []struct {
		name       string
		info       map[string]string
		want       string
		wantSource string
		wantErr    bool
	}{
		{"systemd", map[string]string{"config": systemdInfo}, "systemd", `containerd runtime "runc" SystemdCgroup = true`, false},
		{"cgroupfs", map[string]string{"config": strings.Replace(systemdInfo, "true", "false", 1)}, "cgroupfs", `containerd runtime "runc" SystemdCgroup = false`, false},
		{"option absent is cgroupfs", map[string]string{"config": `{"containerd":{"defaultRuntimeName":"runc","runtimes":{"runc":{"options":{}}}}}`}, "cgroupfs", `containerd runtime "runc" SystemdCgroup = false`, false},
		{"default handler not listed", map[string]string{"config": `{"containerd":{"defaultRuntimeName":"kata","runtimes":{"runc":{"options":{"SystemdCgroup":true}}}}}`}, "", "", false},
		{"no config info (CRI-O)", map[string]string{"other": "{}"}, "", "", false},
		{"garbage", map[string]string{"config": "{"}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DriverFromStatusInfo(&runtimeapi.StatusResponse{Info: tt.info})
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %t", err, tt.wantErr)
			}
			if got.Driver != tt.want || got.Source != tt.wantSource || got.FromCRI {
				t.Errorf("DriverFromStatusInfo = %+v, want driver %q source %q", got, tt.want, tt.wantSource)
			}
		})
	}
}

func TestDriverFromRuntimeConfig(t *testing.T) {
	for _, tt := range []struct {
		rc   *runtimeapi.RuntimeConfigResponse
		want string
	}{
		{nil, ""},
		{&runtimeapi.RuntimeConfigResponse{}, ""},
		{&runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}, "systemd"},
		{&runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, "cgroupfs"},
	} {
		got := driverFromRuntimeConfig(tt.rc)
		if got.Driver != tt.want || got.FromCRI != (tt.want != "") {
			t.Errorf("driverFromRuntimeConfig(%v) = %+v, want %q", tt.rc, got, tt.want)
		}
	}
}
