package nodestatus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/heartlet/heartlet/internal/stats"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// host reads what the node reports about the machine. Its functions are
// fields so that tests replace them.
type host struct {
	readFile func(name string) ([]byte, error)
	readDir  func(name string) ([]os.DirEntry, error)
	// statfs returns the size in bytes of the filesystem holding path.
	statfs func(path string) (uint64, error)
	numCPU func() int
	// interfaceAddrs lists every address of the host's interfaces;
	// interfaceAddrsByName those of one interface.
	interfaceAddrs       func() ([]net.Addr, error)
	interfaceAddrsByName func(name string) ([]net.Addr, error)
	lookupIP             func(host string) ([]net.IP, error)
}

func realHost() host {
	return host{
		readFile: os.ReadFile,
		readDir:  os.ReadDir,
		statfs: func(path string) (uint64, error) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(path, &st); err != nil {
				return 0, err
			}
			return st.Blocks * uint64(st.Bsize), nil
		},
		numCPU:         goruntime.NumCPU,
		interfaceAddrs: net.InterfaceAddrs,
		interfaceAddrsByName: func(name string) ([]net.Addr, error) {
			ifc, err := net.InterfaceByName(name)
			if err != nil {
				return nil, err
			}
			return ifc.Addrs()
		},
		lookupIP: net.LookupIP,
	}
}

// Files and directories read from the machine.
const (
	cpuOnlineFile  = "/sys/devices/system/cpu/online"
	meminfoFile    = stats.MeminfoFile
	hugepagesDir   = "/sys/kernel/mm/hugepages"
	machineIDFile  = "/etc/machine-id"
	dbusMachineID  = "/var/lib/dbus/machine-id"
	productUUID    = "/sys/class/dmi/id/product_uuid"
	bootIDFile     = "/proc/sys/kernel/random/boot_id"
	osReleaseFile  = "/proc/sys/kernel/osrelease"
	etcOSRelease   = "/etc/os-release"
	usrOSRelease   = "/usr/lib/os-release"
	ipv4RouteFile  = "/proc/net/route"
	ipv6RouteFile  = "/proc/net/ipv6_route"
	defaultOSImage = "Linux"
)

// cpus is the number of online CPUs of the machine (not only those this
// process may run on).
func (h host) cpus() int {
	if b, err := h.readFile(cpuOnlineFile); err == nil {
		if n, err := parseCPUList(strings.TrimSpace(string(b))); err == nil && n > 0 {
			return n
		}
	}
	return h.numCPU()
}

// parseCPUList counts the CPUs of a kernel CPU list such as "0-3,6,8-9".
func parseCPUList(s string) (int, error) {
	if s == "" {
		return 0, errors.New("empty cpu list")
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("cpu list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		if b-a >= 1<<20 {
			return 0, fmt.Errorf("cpu list %q: range %q too large", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

// memTotal is MemTotal of /proc/meminfo in bytes.
func (h host) memTotal() (int64, error) {
	b, err := h.readFile(meminfoFile)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", meminfoFile, err)
	}
	n, err := stats.MemTotal(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", meminfoFile, err)
	}
	return n, nil
}

// hugepages returns the capacity of every huge page size the kernel
// supports, named as resources ("hugepages-2Mi").
func (h host) hugepages() v1.ResourceList {
	entries, err := h.readDir(hugepagesDir)
	if err != nil {
		return nil
	}
	out := v1.ResourceList{}
	for _, e := range entries {
		size, ok := parseHugepageDir(e.Name())
		if !ok {
			continue
		}
		var count int64
		if b, err := h.readFile(filepath.Join(hugepagesDir, e.Name(), "nr_hugepages")); err == nil {
			count, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		name := v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(size, resource.BinarySI).String())
		out[name] = *resource.NewQuantity(size*count, resource.BinarySI)
	}
	return out
}

// parseHugepageDir parses "hugepages-2048kB" to the page size in bytes.
func parseHugepageDir(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "hugepages-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "kB")
	if !ok {
		return 0, false
	}
	kb, err := strconv.ParseInt(s, 10, 64)
	if err != nil || kb <= 0 || kb > 1<<40 {
		return 0, false
	}
	return kb * 1024, true
}

// filesystemSize is the size of the filesystem holding dir, or of its
// nearest existing ancestor when dir does not exist yet.
func (h host) filesystemSize(dir string) (uint64, error) {
	if dir == "" {
		dir = "/"
	}
	p := filepath.Clean(dir)
	for {
		size, err := h.statfs(p)
		if err == nil {
			return size, nil
		}
		if !errors.Is(err, os.ErrNotExist) || p == "/" {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
		p = filepath.Dir(p)
	}
}

// firstLine returns the trimmed content of the first readable file.
func (h host) firstLine(files ...string) string {
	for _, f := range files {
		if b, err := h.readFile(f); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return ""
}

// osImage is PRETTY_NAME of os-release, or "Linux".
func (h host) osImage() string {
	for _, f := range []string{etcOSRelease, usrOSRelease} {
		if b, err := h.readFile(f); err == nil {
			if name := parseOSRelease(b)["PRETTY_NAME"]; name != "" {
				return name
			}
		}
	}
	return defaultOSImage
}

// parseOSRelease parses os-release(5) content: KEY=value lines, values
// optionally quoted with shell-style escapes.
func parseOSRelease(b []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" {
			continue
		}
		out[k] = unquoteOSRelease(v)
	}
	return out
}

func unquoteOSRelease(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		q := v[0]
		v = v[1 : len(v)-1]
		if q == '\'' {
			return v
		}
		var sb strings.Builder
		for i := 0; i < len(v); i++ {
			if v[i] == '\\' && i+1 < len(v) {
				i++
			}
			sb.WriteByte(v[i])
		}
		return sb.String()
	}
	return v
}

// defaultRouteInterfaces returns the interfaces of the IPv4 and IPv6
// default routes ("" when none).
func (h host) defaultRouteInterfaces() (v4, v6 string) {
	if b, err := h.readFile(ipv4RouteFile); err == nil {
		v4 = parseIPv4DefaultRoute(b)
	}
	if b, err := h.readFile(ipv6RouteFile); err == nil {
		v6 = parseIPv6DefaultRoute(b)
	}
	return v4, v6
}

// parseIPv4DefaultRoute returns the interface of the first usable default
// route in /proc/net/route content.
func parseIPv4DefaultRoute(b []byte) string {
	const rtfUp = 0x1
	sc := bufio.NewScanner(bytes.NewReader(b))
	first := true
	for sc.Scan() {
		if first { // header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		flags, err := strconv.ParseUint(f[3], 16, 32)
		if err != nil || flags&rtfUp == 0 {
			continue
		}
		if f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// parseIPv6DefaultRoute returns the interface of the first default route
// in /proc/net/ipv6_route content (no header; destination, prefix length,
// ..., flags, device).
func parseIPv6DefaultRoute(b []byte) string {
	const rtfUp = 0x1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		flags, err := strconv.ParseUint(f[8], 16, 32)
		if err != nil || flags&rtfUp == 0 {
			continue
		}
		if f[0] == strings.Repeat("0", 32) && f[1] == "00" && f[9] != "lo" {
			return f[9]
		}
	}
	return ""
}

// validNodeIP says why ip cannot be a node address: it must be a unicast
// address present on one of the host's interfaces.
func (h host) validNodeIP(ip net.IP) error {
	switch {
	case ip == nil:
		return errors.New("not an IP address")
	case ip.IsLoopback():
		return fmt.Errorf("node IP %s is a loopback address", ip)
	case ip.IsMulticast():
		return fmt.Errorf("node IP %s is a multicast address", ip)
	case ip.IsLinkLocalUnicast():
		return fmt.Errorf("node IP %s is a link-local address", ip)
	case ip.IsUnspecified():
		return fmt.Errorf("node IP %s is unspecified", ip)
	}
	addrs, err := h.interfaceAddrs()
	if err != nil {
		return fmt.Errorf("listing interface addresses: %w", err)
	}
	for _, a := range addrs {
		if addrIP(a).Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("node IP %s is not an address of any interface of this host", ip)
}

func addrIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.IPNet:
		return v.IP
	case *net.IPAddr:
		return v.IP
	}
	return nil
}

// nodeAddresses returns the node's addresses: the configured node IPs, or
// one detected as upstream does (the hostname when it is an IP, the node
// name's DNS addresses that belong to this host, the address of the
// default route's interface), then the hostname.
func (h host) nodeAddresses(nodeName, hostname string, nodeIPs []string) ([]v1.NodeAddress, error) {
	var configured []net.IP
	preferV4 := true
	for i, s := range nodeIPs {
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil {
			return nil, fmt.Errorf("node IP %q: not an IP address", s)
		}
		if i == 0 && ip.To4() == nil {
			preferV4 = false
		}
		if ip.IsUnspecified() {
			continue
		}
		if err := h.validNodeIP(ip); err != nil {
			return nil, err
		}
		configured = append(configured, ip)
	}
	var out []v1.NodeAddress
	if len(configured) > 0 {
		for _, ip := range configured {
			out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
		}
		return append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: hostname}), nil
	}

	ip, err := h.detectIP(nodeName, hostname, preferV4)
	if err != nil {
		return nil, err
	}
	return []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: ip.String()},
		{Type: v1.NodeHostName, Address: hostname},
	}, nil
}

func (h host) detectIP(nodeName, hostname string, preferV4 bool) (net.IP, error) {
	if ip := net.ParseIP(hostname); ip != nil {
		return ip, nil
	}
	preferred := func(ip net.IP) bool { return (ip.To4() != nil) == preferV4 }

	var found net.IP
	var lookupErr error
	ips, err := h.lookupIP(nodeName)
	if err != nil {
		lookupErr = err
	}
	for _, ip := range ips {
		if h.validNodeIP(ip) != nil {
			continue
		}
		if preferred(ip) {
			return ip, nil
		}
		if found == nil {
			found = ip
		}
	}
	if found != nil {
		return found, nil
	}

	v4, v6 := h.defaultRouteInterfaces()
	type candidate struct {
		ifc  string
		ipv4 bool
	}
	order := []candidate{{v4, true}, {v6, false}}
	if !preferV4 {
		order[0], order[1] = order[1], order[0]
	}
	for _, c := range order {
		if c.ifc == "" {
			continue
		}
		addrs, err := h.interfaceAddrsByName(c.ifc)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ip := addrIP(a)
			if ip != nil && ip.IsGlobalUnicast() && (ip.To4() != nil) == c.ipv4 {
				return ip, nil
			}
		}
	}
	if lookupErr != nil {
		return nil, fmt.Errorf("no IP address for node %s: looking up its name: %w; and no default route interface with a usable address", nodeName, lookupErr)
	}
	return nil, fmt.Errorf("no IP address for node %s: its name resolves to no address of this host and no default route interface has a usable address", nodeName)
}

// NodeIPs returns the node's internal IPs: the configured ones (--node-ip),
// or the one detected as upstream does when none is configured. The
// agent reports them as hostIP(s) of pods and podIP(s) of host-network
// pods, in standalone and cluster mode alike.
func NodeIPs(nodeName, hostname string, configured []string) ([]string, error) {
	addrs, err := realHost().nodeAddresses(nodeName, hostname, configured)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range addrs {
		if a.Type == v1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	return ips, nil
}
