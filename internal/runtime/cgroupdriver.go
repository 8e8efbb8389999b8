package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CgroupDriver is what the runtime says of the cgroup driver it uses.
type CgroupDriver struct {
	// Driver is "systemd", "cgroupfs", or "" when the runtime does not
	// say.
	Driver string
	// Source names where it was read, for messages.
	Source string
	// FromCRI is set when the runtime answered CRI RuntimeConfig, which
	// the kubelet follows over its own configuration.
	FromCRI bool
}

// CgroupDriver asks the runtime for its cgroup driver: CRI RuntimeConfig
// where the runtime implements it (containerd 2.x, CRI-O), else the
// SystemdCgroup option of the default runtime handler in containerd's
// verbose status info (containerd 1.x reports its CRI configuration
// there under "config").
func (r *Runtime) CgroupDriver(ctx context.Context) (CgroupDriver, error) {
	rc, err := r.RuntimeConfig(ctx)
	if err != nil && status.Code(err) != codes.Unimplemented {
		return CgroupDriver{}, err
	}
	if d := driverFromRuntimeConfig(rc); d.Driver != "" {
		return d, nil
	}
	st, err := r.StatusInfo(ctx)
	if err != nil {
		return CgroupDriver{}, err
	}
	return DriverFromStatusInfo(st)
}

func driverFromRuntimeConfig(rc *runtimeapi.RuntimeConfigResponse) CgroupDriver {
	// SYSTEMD is the enum's zero value: only a Linux section says it.
	if rc.GetLinux() == nil {
		return CgroupDriver{}
	}
	d := CgroupDriver{Driver: "systemd", Source: "CRI RuntimeConfig", FromCRI: true}
	if rc.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_CGROUPFS {
		d.Driver = "cgroupfs"
	}
	return d
}

// containerdInfo is the part of containerd's "config" status info that
// names the runtime handlers' options.
type containerdInfo struct {
	Containerd struct {
		DefaultRuntimeName string `json:"defaultRuntimeName"`
		Runtimes           map[string]struct {
			Options map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
}

// DriverFromStatusInfo reads the cgroup driver of containerd's default
// runtime handler from its verbose status info; a runtime without that
// info gives an empty Driver.
func DriverFromStatusInfo(st *runtimeapi.StatusResponse) (CgroupDriver, error) {
	raw, ok := st.GetInfo()["config"]
	if !ok {
		return CgroupDriver{}, nil
	}
	var ci containerdInfo
	if err := json.Unmarshal([]byte(raw), &ci); err != nil {
		return CgroupDriver{}, fmt.Errorf("decode the runtime's config info: %w", err)
	}
	name := ci.Containerd.DefaultRuntimeName
	h, ok := ci.Containerd.Runtimes[name]
	if !ok {
		return CgroupDriver{}, nil
	}
	systemd, _ := h.Options["SystemdCgroup"].(bool)
	d := CgroupDriver{Driver: "cgroupfs", Source: fmt.Sprintf("containerd runtime %q SystemdCgroup = %t", name, systemd)}
	if systemd {
		d.Driver = "systemd"
	}
	return d, nil
}
