package doctor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/config"
)

// config reports the configuration that was loaded (a configuration that
// does not load never gets here: the command reports it as the only check)
// and the fields heartlet ignores.
func (c checker) config(context.Context) []Result {
	o := c.in.Opts
	src := "the configuration (no --config file: defaults and flags)"
	if o.ConfigFile != "" {
		src = o.ConfigFile
	}
	rs := []Result{ok("%s is valid; node %s, root dir %s", src, o.NodeName, o.RootDir)}
	if msg := config.IgnoredMessage(o.Ignored); msg != "" {
		rs = append(rs, warn("remove these settings, or accept that they have no effect (docs/configuration.md)", "%s", msg))
	}
	for _, w := range o.Warnings {
		rs = append(rs, warn("see docs/configuration.md", "%s", w))
	}
	return rs
}

func (c checker) staticPods(context.Context) []Result {
	p := c.in.Opts.Config.StaticPodPath
	if p == "" {
		return []Result{ok("no static pod path configured")}
	}
	fi, err := c.in.Host.Stat(p)
	switch {
	case err != nil:
		return []Result{fail("create the directory or fix staticPodPath (--pod-manifest-path); heartlet does not start without it",
			"static pod path %s: %v", p, err)}
	case fi.Mode().IsRegular():
		return []Result{ok("%s: a single manifest file", p)}
	case !fi.IsDir():
		return []Result{fail("point staticPodPath (--pod-manifest-path) at a directory of manifests or at one manifest file", "static pod path %s is neither a directory nor a regular file", p)}
	}
	entries, err := c.in.Host.ReadDir(p)
	if err != nil {
		return []Result{fail("make the directory readable by heartlet", "static pod path %s: %v", p, err)}
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return []Result{ok("%s: %d manifest file(s)", p, n)}
}

// swap applies failSwapOn to the active swap areas, as heartlet does at
// start.
func (c checker) swap(context.Context) []Result {
	failSwapOn := c.in.Opts.Config.FailSwapOn == nil || *c.in.Opts.Config.FailSwapOn
	data, err := c.in.Host.ReadFile(c.in.Host.Swaps)
	if errors.Is(err, fs.ErrNotExist) {
		return []Result{ok("no swap (%s absent)", c.in.Host.Swaps)}
	}
	if err != nil {
		return []Result{fail("make "+c.in.Host.Swaps+" readable", "reading %s: %v", c.in.Host.Swaps, err)}
	}
	var areas []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for first := true; sc.Scan(); first = false {
		if f := strings.Fields(sc.Text()); !first && len(f) > 0 {
			areas = append(areas, f[0])
		}
	}
	switch {
	case len(areas) == 0:
		return []Result{ok("no swap; failSwapOn: %t", failSwapOn)}
	case failSwapOn:
		return []Result{fail("turn swap off (swapoff -a, and remove it from /etc/fstab) or set failSwapOn: false (--fail-swap-on=false)",
			"swap is on (%s) and failSwapOn is true: heartlet will not start", strings.Join(areas, ", "))}
	}
	return []Result{ok("swap is on (%s), allowed by failSwapOn: false; pods get no swap", strings.Join(areas, ", "))}
}

// Controllers heartlet's QoS and pod cgroups need, and those it uses when
// present.
var (
	neededV2   = []string{"cpu", "memory", "pids"}
	optionalV2 = []string{"cpuset", "hugetlb", "io"}
	neededV1   = []string{"cpu", "cpuacct", "memory", "pids", "cpuset"}
)

// cgroups reports the cgroup version and whether the controllers pods need
// are there.
func (c checker) cgroups(context.Context) []Result {
	root := c.in.Host.CgroupRoot
	data, err := c.in.Host.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err == nil {
		have := strings.Fields(string(data))
		var missing, absent []string
		for _, n := range neededV2 {
			if !slices.Contains(have, n) {
				missing = append(missing, n)
			}
		}
		for _, n := range optionalV2 {
			if !slices.Contains(have, n) {
				absent = append(absent, n)
			}
		}
		if len(missing) > 0 {
			return []Result{fail("enable the controllers in the kernel (boot parameters such as cgroup_enable=memory) or give heartlet a cgroup namespace that delegates them",
				"cgroup v2 at %s lacks the controllers %s (has: %s)", root, strings.Join(missing, ", "), strings.Join(have, " "))}
		}
		r := ok("cgroup v2 at %s; controllers %s", root, strings.Join(have, " "))
		if len(absent) > 0 {
			r.Found += " (without " + strings.Join(absent, ", ") + ")"
		}
		return []Result{r}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return []Result{fail("make "+root+" readable", "reading %s: %v", filepath.Join(root, "cgroup.controllers"), err)}
	}
	// cgroup v1: /proc/cgroups lists "name hierarchy num_cgroups enabled".
	data, err = c.in.Host.ReadFile(c.in.Host.ProcCgroups)
	if err != nil {
		return []Result{fail("mount the cgroup filesystem at "+root, "no cgroup v2 at %s and no v1 controller list: %v", root, err)}
	}
	enabled := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && !strings.HasPrefix(f[0], "#") {
			enabled[f[0]] = f[3] == "1"
		}
	}
	var missing []string
	for _, n := range neededV1 {
		if !enabled[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return []Result{fail("enable the controllers in the kernel (boot parameters such as cgroup_enable=memory)",
			"cgroup v1 lacks the controllers %s", strings.Join(missing, ", "))}
	}
	return []Result{warn("move the node to cgroup v2 (systemd.unified_cgroup_hierarchy=1): the upstream kubelet refuses v1 by default since 1.35 (failCgroupV1)",
		"cgroup v1; controllers %s enabled", strings.Join(neededV1, ", "))}
}

// ports tries to listen where heartlet's servers would.
func (c checker) ports(context.Context) []Result {
	kc := c.in.Opts.Config
	type port struct {
		what, flag, addr string
		port             int32
	}
	var ports []port
	if kc.EnableServer == nil || *kc.EnableServer {
		ports = append(ports, port{"port", "--port", kc.Address, kc.Port})
	}
	if kc.ReadOnlyPort > 0 {
		ports = append(ports, port{"readOnlyPort", "--read-only-port", kc.Address, kc.ReadOnlyPort})
	}
	if kc.HealthzPort != nil && *kc.HealthzPort > 0 {
		ports = append(ports, port{"healthzPort", "--healthz-port", kc.HealthzBindAddress, *kc.HealthzPort})
	}
	var (
		rs   []Result
		free []string
	)
	for _, p := range ports {
		addr := net.JoinHostPort(p.addr, strconv.Itoa(int(p.port)))
		l, err := c.in.Host.Listen("tcp", addr)
		if err == nil {
			_ = l.Close()
			free = append(free, fmt.Sprintf("%s (%s)", addr, p.what))
			continue
		}
		switch {
		case errors.Is(err, syscall.EADDRINUSE):
			rs = append(rs, fail(fmt.Sprintf("stop what listens there (ss -ltnp 'sport = :%d'; a heartlet or kubelet already running on this node holds it) or choose another port with %s", p.port, p.flag),
				"%s (%s) is in use", addr, p.what))
		case errors.Is(err, syscall.EADDRNOTAVAIL):
			rs = append(rs, fail("use an address of this machine, or 0.0.0.0", "%s (%s): the address is not on this machine", addr, p.what))
		default:
			rs = append(rs, fail("heartlet must be able to listen there (root, or CAP_NET_BIND_SERVICE for ports below 1024)", "%s (%s): %v", addr, p.what, err))
		}
	}
	if len(free) > 0 {
		rs = append([]Result{ok("free: %s", strings.Join(free, ", "))}, rs...)
	}
	if len(rs) == 0 {
		rs = append(rs, ok("no server ports configured"))
	}
	return rs
}

// threshold is one eviction threshold of a signal.
type threshold struct {
	kind   string // evictionHard or evictionSoft
	signal string
	value  string
}

// below reports whether free (of total) is below the threshold, and the
// threshold as an absolute amount.
func (t threshold) below(free, total uint64) (bool, uint64, error) {
	if pct, ok := strings.CutSuffix(t.value, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return false, 0, fmt.Errorf("%s %s: %w", t.kind, t.signal, err)
		}
		limit := uint64(math.Ceil(f / 100 * float64(total)))
		return free < limit, limit, nil
	}
	q, err := resource.ParseQuantity(t.value)
	if err != nil {
		return false, 0, fmt.Errorf("%s %s: %w", t.kind, t.signal, err)
	}
	limit := uint64(max(q.Value(), 0))
	return free < limit, limit, nil
}

// thresholds returns the hard and soft thresholds of signal; 0% and 100%
// turn a threshold off, as configuration validation documents.
func (c checker) thresholds(signal string) []threshold {
	var ts []threshold
	if v, ok := c.in.Opts.Config.EvictionHard[signal]; ok && v != "0%" && v != "100%" {
		ts = append(ts, threshold{"evictionHard", signal, v})
	}
	if v, ok := c.in.Opts.Config.EvictionSoft[signal]; ok && v != "0%" && v != "100%" {
		ts = append(ts, threshold{"evictionSoft", signal, v})
	}
	return ts
}

// disk compares the free space and inodes of the node filesystem (the root
// dir's), the pod log directory's and the runtime's image filesystem with
// the eviction thresholds.
func (c checker) disk(ctx context.Context) []Result {
	type target struct{ name, path, prefix string }
	targets := []target{{"nodefs", c.in.Opts.RootDir, "nodefs"}}
	if d := c.in.Opts.Config.PodLogsDir; d != "" {
		targets = append(targets, target{"pod logs", d, "nodefs"})
	}
	imagefsNote := ""
	if c.in.ConnectRuntime != nil {
		if rt, err := c.in.ConnectRuntime(ctx); err == nil {
			fsi, err := rt.ImageFsInfo(ctx)
			switch {
			case err != nil:
				imagefsNote = fmt.Sprintf("image filesystem not checked: %v", err)
			case len(fsi) > 0 && fsi[0].Mountpoint != "":
				targets = append(targets, target{"imagefs", fsi[0].Mountpoint, "imagefs"})
			}
		} else {
			imagefsNote = "image filesystem not checked: the runtime is not reachable"
		}
	}
	var rs []Result
	for _, t := range targets {
		rs = append(rs, c.diskOne(t.name, t.path, t.prefix))
	}
	if imagefsNote != "" {
		rs = append(rs, skip("%s", imagefsNote))
	}
	return rs
}

func (c checker) diskOne(name, path, prefix string) Result {
	// heartlet makes its directories at start: a missing one will be on
	// the filesystem of its nearest existing parent.
	at, note := path, ""
	for {
		if _, err := c.in.Host.Stat(at); err == nil || filepath.Dir(at) == at {
			break
		}
		at = filepath.Dir(at)
	}
	if at != path {
		note = " (not yet made; on the filesystem of " + at + ")"
	}
	st, err := c.in.Host.Statfs(at)
	if err != nil {
		return fail("fix the setting that names the directory", "%s %s: %v", name, path, err)
	}
	found := fmt.Sprintf("%s %s%s: %s of %s free (%.0f%%), %d of %d inodes free", name, path, note,
		bytesString(st.AvailableBytes), bytesString(st.TotalBytes), percent(st.AvailableBytes, st.TotalBytes), st.FreeInodes, st.TotalInodes)
	level, fix := OK, ""
	var crossed []string
	check := func(signal string, free, total uint64, format func(uint64) string) {
		for _, t := range c.thresholds(signal) {
			below, limit, err := t.below(free, total)
			if err != nil {
				crossed = append(crossed, err.Error())
				level = Error
				continue
			}
			if !below {
				continue
			}
			crossed = append(crossed, fmt.Sprintf("%s is below %s %s<%s (%s)", signal, t.kind, signal, t.value, format(limit)))
			if t.kind == "evictionHard" {
				level = Error
			} else if level == OK {
				level = Warning
			}
		}
	}
	// A filesystem that reports no inodes (some do not have a fixed
	// number) is not checked against inode thresholds.
	check(prefix+".available", st.AvailableBytes, st.TotalBytes, bytesString)
	if st.TotalInodes > 0 {
		check(prefix+".inodesFree", st.FreeInodes, st.TotalInodes, func(v uint64) string { return strconv.FormatUint(v, 10) + " inodes" })
	}
	if len(crossed) > 0 {
		found += ": " + strings.Join(crossed, "; ")
		fix = "free space on " + path + " (remove unused images: crictl rmi --prune; old logs) or grow the filesystem; the upstream kubelet evicts pods and reports DiskPressure at these thresholds"
	} else if ts := append(c.thresholds(prefix+".available"), c.thresholds(prefix+".inodesFree")...); len(ts) > 0 {
		var parts []string
		for _, t := range ts {
			parts = append(parts, fmt.Sprintf("%s %s<%s", t.kind, t.signal, t.value))
		}
		found += "; above " + strings.Join(parts, ", ")
	}
	return Result{Level: level, Found: found, Fix: fix}
}

func percent(part, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(part) / float64(total)
}

// bytesString prints a size in binary units with one decimal.
func bytesString(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
