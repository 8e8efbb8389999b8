package cgroups

import (
	"errors"
	"fmt"
	"path"
	"strings"

	ocgroups "github.com/opencontainers/cgroups"
	ocmanager "github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The cgroup drivers.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// sliceSuffix ends the name of every systemd slice unit.
const sliceSuffix = ".slice"

// A cgroup is named as upstream's CgroupName: its components from the top,
// such as [kubepods burstable pod<uid>]. The cgroupfs driver joins them
// with "/"; the systemd driver makes each prefix a slice whose unit name
// joins the (escaped) components with "-":
//
//	/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
//
// A component's "-" becomes "_" in a systemd unit name, as "-" separates
// the levels (a pod UID 1a-2b is pod1a_2b).

// escapeSystemd makes one name component usable in a slice unit name.
func escapeSystemd(part string) string {
	return strings.ReplaceAll(part, "-", "_")
}

// unescapeSystemd reverses escapeSystemd.
func unescapeSystemd(part string) string {
	return strings.ReplaceAll(part, "_", "-")
}

// systemdUnit returns the slice unit name of the cgroup named by parts:
// "-.slice" (the root slice) for none.
func systemdUnit(parts []string) string {
	if len(parts) == 0 {
		return "-" + sliceSuffix
	}
	esc := make([]string, len(parts))
	for i, p := range parts {
		esc[i] = escapeSystemd(p)
	}
	return strings.Join(esc, "-") + sliceSuffix
}

// systemdPath returns the cgroup path of the slice of the cgroup named by
// parts: every ancestor's slice, then its own.
func systemdPath(parts []string) string {
	out := "/"
	for i := range parts {
		out = path.Join(out, systemdUnit(parts[:i+1]))
	}
	return out
}

// cgroupfsPath returns the cgroupfs path of the cgroup named by parts.
func cgroupfsPath(parts []string) string {
	return path.Join(append([]string{"/"}, parts...)...)
}

// systemdPodUID returns the pod UID a systemd pod slice's directory name
// (kubepods-burstable-pod<uid>.slice) names, and false for any other name.
func systemdPodUID(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, sliceSuffix)
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(base, "-"); i >= 0 {
		base = base[i+1:]
	}
	uid, ok := strings.CutPrefix(base, PodPrefix)
	if !ok || uid == "" {
		return "", false
	}
	return unescapeSystemd(uid), true
}

// CheckSystemdRoot refuses a cgroupRoot the systemd driver cannot place
// kubepods.slice under: heartlet creates it at the top, as with the
// kubelet's default cgroupRoot.
func CheckSystemdRoot(cgroupRoot string) error {
	if path.Clean("/"+cgroupRoot) != "/" {
		return fmt.Errorf("cgroup root %q: the systemd cgroup driver places kubepods.slice at the root; set cgroupRoot to / (or leave it unset)", cgroupRoot)
	}
	return nil
}

// systemdResources maps limits to runc's: a nil field becomes runc's
// "leave as is" (zero), -1 stays "unlimited". Devices are never touched
// (the runtime manages each container's) and the slice is not frozen
// while its properties change, as upstream's pod cgroups.
func systemdResources(r Resources) *ocgroups.Resources {
	out := &ocgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if r.CPUShares != nil {
		out.CpuShares = *r.CPUShares
	}
	if r.CPUQuota != nil {
		out.CpuQuota = unlimited(*r.CPUQuota)
	}
	if r.CPUPeriod != nil {
		out.CpuPeriod = *r.CPUPeriod
	}
	if r.Memory != nil {
		out.Memory = unlimited(*r.Memory)
	}
	if r.PidsMax != nil {
		out.PidsLimit = ptr(unlimited(*r.PidsMax))
	}
	return out
}

// sliceConfig is runc's description of the slice at the systemd cgroup
// path p (such as /kubepods.slice/kubepods-burstable.slice): its unit name
// and its parent slice's.
func sliceConfig(p string, r *ocgroups.Resources) *ocgroups.Cgroup {
	dir, base := path.Split(path.Clean(p))
	parent := "-.slice"
	if d := path.Base(dir); d != "/" && d != "." {
		parent = d
	}
	if r == nil {
		r = &ocgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	}
	return &ocgroups.Cgroup{Name: base, Parent: parent, Systemd: true, Resources: r}
}

// systemdDriver creates, limits and removes slices through systemd's D-Bus
// API with runc's systemd cgroup manager, as upstream does: a slice is a
// transient unit started without processes, its limits are unit
// properties (which runc also writes to the cgroup files), and stopping
// the unit removes it.
type systemdDriver struct{}

// check reports whether systemd runs as init, which the driver needs.
func (systemdDriver) check() error {
	if !systemd.IsRunningSystemd() {
		return errors.New("systemd is not running (no /run/systemd/system): the systemd cgroup driver needs it as init; use cgroupDriver: cgroupfs")
	}
	return nil
}

// ensure starts the slice at the systemd cgroup path p; it is idempotent.
// The parent slice must exist (systemd would start it implicitly, but the
// manager creates the hierarchy top down).
func (systemdDriver) ensure(p string) error {
	mgr, err := ocmanager.New(sliceConfig(p, nil))
	if err != nil {
		return fmt.Errorf("systemd slice %s: %w", path.Base(p), err)
	}
	if err := mgr.Apply(-1); err != nil {
		return fmt.Errorf("start systemd slice %s: %w", path.Base(p), err)
	}
	return nil
}

// apply sets r as the properties of the slice at p.
func (systemdDriver) apply(p string, r Resources) error {
	res := systemdResources(r)
	mgr, err := ocmanager.New(sliceConfig(p, res))
	if err != nil {
		return fmt.Errorf("systemd slice %s: %w", path.Base(p), err)
	}
	if err := mgr.Set(res); err != nil {
		return fmt.Errorf("set properties of systemd slice %s: %w", path.Base(p), err)
	}
	return nil
}

// remove stops the slice at p, which removes its cgroups; a slice that is
// not loaded is no error.
func (systemdDriver) remove(p string) error {
	mgr, err := ocmanager.New(sliceConfig(p, nil))
	if err != nil {
		return fmt.Errorf("systemd slice %s: %w", path.Base(p), err)
	}
	if err := mgr.Destroy(); err != nil {
		return fmt.Errorf("stop systemd slice %s: %w", path.Base(p), err)
	}
	return nil
}

// ResolveDriver returns the cgroup driver heartlet uses given the
// configured one and what the runtime says of its own (runtimeDriver ""
// when it says nothing): the runtime's when it answers CRI
// RuntimeConfig (fromCRI), as the kubelet does since
// KubeletCgroupDriverFromCRI; otherwise the configured one, which must be
// the one the runtime's configuration names (source), since pod cgroups
// would otherwise not be where either side looks for them.
func ResolveDriver(configured, runtimeDriver, source string, fromCRI bool) (string, error) {
	if configured == "" {
		configured = DriverCgroupfs
	}
	if runtimeDriver == "" {
		return configured, nil
	}
	if err := CheckDriver(runtimeDriver); err != nil {
		return "", fmt.Errorf("the runtime's cgroup driver %q (%s): %w", runtimeDriver, source, err)
	}
	if fromCRI || runtimeDriver == configured {
		return runtimeDriver, nil
	}
	return "", fmt.Errorf("cgroupDriver is %s but the container runtime uses the %s cgroup driver (%s): set cgroupDriver: %s (--cgroup-driver), or set SystemdCgroup = %t in the runtime's configuration (containerd: [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]) and restart it",
		configured, runtimeDriver, source, runtimeDriver, configured == DriverSystemd)
}

// pathsFor is a Manager that only names cgroups, for readers of their
// files that know the driver and the cgroup root.
func pathsFor(driver, cgroupRoot string) *Manager {
	m := &Manager{cgroupRoot: path.Clean("/" + cgroupRoot)}
	if driver == DriverSystemd {
		m.systemd = &systemdDriver{}
	}
	return m
}

// KubepodsPath returns the path of the kubepods cgroup inside every
// hierarchy with the driver: <cgroupRoot>/kubepods, or /kubepods.slice.
func KubepodsPath(driver, cgroupRoot string) string {
	return pathsFor(driver, cgroupRoot).qosPath(v1.PodQOSGuaranteed)
}

// PodPaths returns the paths the cgroup of the pod with this UID has under
// each QoS class with the driver (Guaranteed, Burstable, BestEffort).
func PodPaths(driver, cgroupRoot string, uid types.UID) []string {
	m := pathsFor(driver, cgroupRoot)
	return []string{
		m.podPath(v1.PodQOSGuaranteed, uid),
		m.podPath(v1.PodQOSBurstable, uid),
		m.podPath(v1.PodQOSBestEffort, uid),
	}
}
