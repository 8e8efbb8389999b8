package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ifaceStats are the counters of one network interface.
type ifaceStats struct {
	name                         string
	rxBytes, rxPackets, rxErrors uint64
	rxDropped                    uint64
	txBytes, txPackets, txErrors uint64
	txDropped                    uint64
}

// ignoredIface reports whether an interface is left out of network stats,
// as cAdvisor leaves out loopback, veth pairs and docker bridges: their
// traffic is counted elsewhere or never leaves the machine.
func ignoredIface(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// parseNetDev parses /proc/net/dev, leaving out ignored interfaces; the
// result is sorted by name.
func parseNetDev(data []byte) ([]ifaceStats, error) {
	var out []ifaceStats
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue // the two header lines
		}
		name = strings.TrimSpace(name)
		if ignoredIface(name) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev: interface %s: %d fields, want 16", name, len(f))
		}
		var v [16]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev: interface %s: %w", name, err)
			}
			v[i] = n
		}
		out = append(out, ifaceStats{
			name:    name,
			rxBytes: v[0], rxPackets: v[1], rxErrors: v[2], rxDropped: v[3],
			txBytes: v[8], txPackets: v[9], txErrors: v[10], txDropped: v[11],
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, sc.Err()
}

// defaultRouteIface returns the interface of the IPv4 default route from
// /proc/net/route, or "".
func defaultRouteIface(data []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// MeminfoFile is the kernel's memory report; MemTotal in it is the
// machine's memory.
const MeminfoFile = "/proc/meminfo"

// maxMeminfoKB bounds a meminfo figure so that it fits an int64 in bytes.
const maxMeminfoKB = math.MaxInt64 / 1024

// MemTotal returns MemTotal of /proc/meminfo content in bytes. It is the
// one reading of the machine's memory: node capacity (nodestatus), the OOM
// score adjustment of containers (podsync) and node stats all use it.
func MemTotal(data []byte) (int64, error) {
	m, err := parseMeminfo(data)
	if err != nil {
		return 0, err
	}
	return int64(m.total), nil
}

// MachineMemory reads MemTotal of MeminfoFile in bytes.
func MachineMemory() (int64, error) {
	b, err := os.ReadFile(MeminfoFile)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", MeminfoFile, err)
	}
	n, err := MemTotal(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", MeminfoFile, err)
	}
	return n, nil
}

// meminfo are the /proc/meminfo figures the node stats need, in bytes.
type meminfo struct {
	total, free, available uint64
	inactiveFile           uint64
	swapTotal, swapFree    uint64
}

func parseMeminfo(data []byte) (meminfo, error) {
	var m meminfo
	fields := map[string]*uint64{
		"MemTotal": &m.total, "MemFree": &m.free, "MemAvailable": &m.available,
		"Inactive(file)": &m.inactiveFile, "SwapTotal": &m.swapTotal, "SwapFree": &m.swapFree,
	}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		dst, ok := fields[key]
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("meminfo %s: %w", key, err)
		}
		switch {
		case len(f) == 1:
		case f[1] != "kB":
			return m, fmt.Errorf("meminfo %s: unexpected unit %q", key, f[1])
		case v > maxMeminfoKB:
			return m, fmt.Errorf("meminfo %s: %d kB is out of range", key, v)
		default:
			v *= 1024
		}
		*dst = v
		if key == "MemTotal" {
			found = true
		}
	}
	if !found {
		return m, fmt.Errorf("meminfo: no MemTotal")
	}
	return m, nil
}

// parseStat reads the boot time and the total CPU time of all CPUs from
// /proc/stat, the node's CPU usage where no root cgroup reports it.
func parseStat(data []byte, userHZ uint64) (boot time.Time, cpuNanos uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "btime":
			s, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return boot, 0, fmt.Errorf("stat btime: %w", err)
			}
			boot = time.Unix(s, 0)
		case "cpu":
			// user nice system idle iowait irq softirq steal: busy time
			// is everything but idle and iowait.
			var ticks uint64
			for i, s := range f[1:] {
				if i >= 8 {
					break // guest times are already in user and nice
				}
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return boot, 0, fmt.Errorf("stat cpu: %w", err)
				}
				if i != 3 && i != 4 {
					ticks += v
				}
			}
			cpuNanos = ticks * uint64(time.Second) / userHZ
		}
	}
	return boot, cpuNanos, sc.Err()
}

// procFS reads the files of a proc filesystem mounted at root.
type procFS struct{ root string }

func (p procFS) read(rel ...string) ([]byte, error) {
	return os.ReadFile(filepath.Join(append([]string{p.root}, rel...)...))
}

// netNS returns the network namespace of pid ("net:[inode]").
func (p procFS) netNS(pid int) (string, error) {
	if pid <= 0 {
		return os.Readlink(filepath.Join(p.root, "self", "ns", "net"))
	}
	return os.Readlink(filepath.Join(p.root, strconv.Itoa(pid), "ns", "net"))
}

// pidMax reads kernel.pid_max.
func (p procFS) pidMax() (int64, error) {
	b, err := p.read("sys", "kernel", "pid_max")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
