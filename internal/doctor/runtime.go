package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const runtimeFix = "start the container runtime, or point containerRuntimeEndpoint (--container-runtime-endpoint) at its CRI socket (containerd: unix:///run/containerd/containerd.sock, CRI-O: unix:///var/run/crio/crio.sock)"

// runtime connects to the CRI runtime as heartlet does and reports its
// version and conditions.
func (c checker) runtime(ctx context.Context) []Result {
	endpoint := c.in.Opts.Config.ContainerRuntimeEndpoint
	rt, err := c.in.ConnectRuntime(ctx)
	if err != nil {
		return []Result{fail(runtimeFix, "%v", err)}
	}
	v, err := rt.Version(ctx)
	if err != nil {
		return []Result{fail(runtimeFix, "%s: %v", endpoint, err)}
	}
	found := fmt.Sprintf("%s %s via %s, CRI %s", v.GetRuntimeName(), v.GetRuntimeVersion(), endpoint, v.GetRuntimeApiVersion())
	st, err := rt.StatusInfo(ctx)
	if err != nil {
		return []Result{fail("see the runtime's log", "%s; status: %v", found, err)}
	}
	for _, cond := range st.GetStatus().GetConditions() {
		// NetworkReady is the cni check's.
		if cond.GetType() == runtimeapi.RuntimeReady && !cond.GetStatus() {
			return []Result{fail("see the runtime's log", "%s; not ready: %s %s", found, cond.GetReason(), cond.GetMessage())}
		}
	}
	return []Result{ok("%s", found)}
}

// runtimeInfo is what heartlet reads of the verbose status of containerd
// (its CRI plugin configuration, "config").
type runtimeInfo struct {
	Containerd struct {
		DefaultRuntimeName string `json:"defaultRuntimeName"`
		Runtimes           map[string]struct {
			Type    string         `json:"runtimeType"`
			Options map[string]any `json:"options"`
		} `json:"runtimes"`
	} `json:"containerd"`
	CNI struct {
		BinDir  string `json:"binDir"`
		ConfDir string `json:"confDir"`
	} `json:"cni"`
}

// info decodes the runtime's verbose "config" info; ok is false when the
// runtime reports none.
func info(st *runtimeapi.StatusResponse) (runtimeInfo, bool, error) {
	var ri runtimeInfo
	raw, found := st.GetInfo()["config"]
	if !found {
		return ri, false, nil
	}
	if err := json.Unmarshal([]byte(raw), &ri); err != nil {
		return ri, false, fmt.Errorf("decoding the runtime's config info: %w", err)
	}
	return ri, true, nil
}

// heartletDriver is the cgroup driver heartlet uses ("" is cgroupfs).
func (c checker) heartletDriver() string {
	if d := c.in.Opts.Config.CgroupDriver; d != "" {
		return d
	}
	return "cgroupfs"
}

// cgroupDriver compares the runtime's cgroup driver with heartlet's: CRI
// RuntimeConfig where the runtime has it, else containerd's SystemdCgroup
// option of its default runtime handler.
func (c checker) cgroupDriver(ctx context.Context) []Result {
	rt, err := c.in.ConnectRuntime(ctx)
	if err != nil {
		return []Result{skip("the runtime is not reachable")}
	}
	mine := c.heartletDriver()
	theirs, source := "", ""
	rc, err := rt.RuntimeConfig(ctx)
	switch {
	case err == nil && rc.GetLinux() != nil:
		switch rc.GetLinux().GetCgroupDriver() {
		case runtimeapi.CgroupDriver_SYSTEMD:
			theirs = "systemd"
		case runtimeapi.CgroupDriver_CGROUPFS:
			theirs = "cgroupfs"
		}
		source = "CRI RuntimeConfig"
	case err != nil && status.Code(err) != codes.Unimplemented:
		return []Result{fail("see the runtime's log", "CRI RuntimeConfig: %v", err)}
	}
	if theirs == "" {
		st, err := rt.StatusInfo(ctx)
		if err != nil {
			return []Result{fail("see the runtime's log", "runtime status: %v", err)}
		}
		ri, found, err := info(st)
		if err != nil {
			return []Result{warn("check the runtime's cgroup driver by hand", "%v", err)}
		}
		if found {
			name := ri.Containerd.DefaultRuntimeName
			if h, ok := ri.Containerd.Runtimes[name]; ok {
				systemd, _ := h.Options["SystemdCgroup"].(bool)
				theirs = "cgroupfs"
				if systemd {
					theirs = "systemd"
				}
				source = fmt.Sprintf("containerd runtime %q SystemdCgroup = %t", name, systemd)
			}
		}
	}
	if theirs == "" {
		return []Result{warn(fmt.Sprintf("make sure the runtime uses the %s cgroup driver too (containerd: SystemdCgroup = %t)", mine, mine == "systemd"),
			"the runtime reports no cgroup driver (no CRI RuntimeConfig, no containerd config info); heartlet uses %s", mine)}
	}
	if theirs != mine {
		fix := fmt.Sprintf("set SystemdCgroup = %t in the runtime's config (containerd: [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]) and restart it, or set cgroupDriver: %s (--cgroup-driver)", mine == "systemd", theirs)
		return []Result{fail(fix, "the runtime uses the %s cgroup driver (%s), heartlet %s: pod cgroups would not match", theirs, source, mine)}
	}
	return []Result{ok("%s for both heartlet and the runtime (%s)", mine, source)}
}

// Defaults of the CNI directories, as containerd's and CRI-O's.
const (
	defaultCNIConfDir = "/etc/cni/net.d"
	defaultCNIBinDir  = "/opt/cni/bin"
)

// cniDirs returns the configuration directory and plugin directories:
// given ones, else the runtime's, else the defaults.
func (c checker) cniDirs(ctx context.Context) (confDir string, binDirs []string, st *runtimeapi.StatusResponse) {
	confDir, binDirs = c.in.CNIConfDir, c.in.CNIBinDirs
	if rt, err := c.in.ConnectRuntime(ctx); err == nil {
		if s, err := rt.StatusInfo(ctx); err == nil {
			st = s
			if ri, found, err := info(s); err == nil && found {
				if confDir == "" {
					confDir = ri.CNI.ConfDir
				}
				if len(binDirs) == 0 && ri.CNI.BinDir != "" {
					binDirs = filepath.SplitList(ri.CNI.BinDir)
				}
			}
		}
	}
	if confDir == "" {
		confDir = defaultCNIConfDir
	}
	if len(binDirs) == 0 {
		binDirs = []string{defaultCNIBinDir}
	}
	return confDir, binDirs, st
}

// netConf is the part of a CNI network configuration (.conf) or list
// (.conflist) the check needs.
type netConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Plugins    []struct {
		Type string `json:"type"`
	} `json:"plugins"`
}

// cni checks the CNI configuration directory as libcni reads it (.conf,
// .conflist and .json files in name order; the first one is the network),
// that the plugins it names exist, and the runtime's NetworkReady
// condition.
func (c checker) cni(ctx context.Context) []Result {
	if c.in.CNIConfDir == "" {
		if _, err := c.in.ConnectRuntime(ctx); err != nil {
			return []Result{skip("the runtime is not reachable, and it names the CNI config dir (or give --cni-conf-dir)")}
		}
	}
	confDir, binDirs, st := c.cniDirs(ctx)
	entries, err := c.in.Host.ReadDir(confDir)
	if err != nil {
		return []Result{fail("install a CNI network plugin, which writes its configuration to "+confDir, "CNI config dir %s: %v", confDir, err)}
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
			if !e.IsDir() {
				files = append(files, e.Name())
			}
		}
	}
	slices.Sort(files)
	if len(files) == 0 {
		return []Result{fail("install a CNI network plugin, which writes its configuration to "+confDir, "no CNI network config (.conf, .conflist, .json) in %s", confDir)}
	}
	var rs []Result
	var good []string
	for _, name := range files {
		path := filepath.Join(confDir, name)
		data, err := c.in.Host.ReadFile(path)
		if err != nil {
			rs = append(rs, fail("make the file readable", "%s: %v", path, err))
			continue
		}
		var nc netConf
		if err := json.Unmarshal(data, &nc); err != nil {
			rs = append(rs, fail("fix or remove the file", "%s: not a CNI config: %v", path, err))
			continue
		}
		var types []string
		if filepath.Ext(name) == ".conflist" {
			for _, p := range nc.Plugins {
				types = append(types, p.Type)
			}
		} else if nc.Type != "" {
			types = []string{nc.Type}
		}
		switch {
		case nc.Name == "":
			rs = append(rs, fail("fix or remove the file", "%s: the network has no name", path))
			continue
		case len(types) == 0 || slices.Contains(types, ""):
			rs = append(rs, fail("fix or remove the file", "%s: a plugin without a type", path))
			continue
		}
		var missing []string
		for _, t := range types {
			if !c.pluginExists(t, binDirs) {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			rs = append(rs, fail("install the CNI plugins (e.g. the containernetworking-plugins package) into "+strings.Join(binDirs, ":"),
				"%s: plugin(s) %s not found in %s", path, strings.Join(missing, ", "), strings.Join(binDirs, ":")))
			continue
		}
		good = append(good, fmt.Sprintf("%s (network %s: %s)", path, nc.Name, strings.Join(types, ", ")))
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.GetType() == runtimeapi.NetworkReady && !cond.GetStatus() {
			rs = append(rs, fail("see the runtime's log and the CNI config in "+confDir, "the runtime's network is not ready: %s %s", cond.GetReason(), cond.GetMessage()))
		}
	}
	if len(good) > 0 {
		rs = append([]Result{ok("%s; plugins in %s", strings.Join(good, ", "), strings.Join(binDirs, ":"))}, rs...)
	}
	return rs
}

func (c checker) pluginExists(name string, dirs []string) bool {
	for _, d := range dirs {
		if fi, err := c.in.Host.Stat(filepath.Join(d, name)); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
