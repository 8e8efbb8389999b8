// Package sysctl knows which kernel parameters a pod may set: the kernel
// namespace of a sysctl, the safe set every node allows, the patterns an
// administrator may add with allowedUnsafeSysctls, and the allowlist that
// admission checks a pod's spec.securityContext.sysctls against. The rules
// and messages are upstream's (pkg/kubelet/sysctl).
package sysctl

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Namespace is the Linux namespace a sysctl belongs to.
type Namespace string

// Namespaces a sysctl can be isolated by.
const (
	// IPC is the IPC namespace (kernel.sem, kernel.shm*, kernel.msg*,
	// fs.mqueue.*).
	IPC Namespace = "ipc"
	// Net is the network namespace (net.*).
	Net Namespace = "net"
	// Unknown: the sysctl is not known to be namespaced.
	Unknown Namespace = ""
)

// ForbiddenReason is the pod status reason of a pod refused for its
// sysctls.
const ForbiddenReason = "SysctlForbidden"

// maxLength is the longest sysctl name or pattern the API accepts.
const maxLength = 253

// namePattern is a sysctl name or pattern as the API validates it:
// segments of lower-case letters, digits, "-" and "_" separated by "." or
// "/", the last of which may end in "*" (a prefix pattern).
const namePattern = `([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]`

var nameRE = regexp.MustCompile("^" + namePattern + "$")

// Safe lists the sysctls every pod may set: namespaced, and isolated from
// the other pods of the node (upstream's safe set).
var Safe = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
}

// NamespacedBy returns the namespace of a sysctl (in dot notation), or
// Unknown.
func NamespacedBy(name string) Namespace {
	switch {
	case name == "kernel.sem",
		strings.HasPrefix(name, "kernel.shm"),
		strings.HasPrefix(name, "kernel.msg"),
		strings.HasPrefix(name, "fs.mqueue."):
		return IPC
	case strings.HasPrefix(name, "net."):
		return Net
	}
	return Unknown
}

// Normalize turns a sysctl written with "/" separators into the dot
// notation: "net/ipv4/conf/eth0.100/forwarding" becomes
// "net.ipv4.conf.eth0/100.forwarding". Names whose first separator is a dot
// are returned as they are.
func Normalize(name string) string {
	first := strings.IndexAny(name, "./")
	if first < 0 || name[first] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

// ValidatePattern checks one entry of allowedUnsafeSysctls: a valid sysctl
// name or prefix pattern (ending in "*") that is known to be namespaced.
func ValidatePattern(p string) error {
	_, _, err := parsePattern(p)
	return err
}

func parsePattern(p string) (name string, ns Namespace, err error) {
	if len(p) > maxLength || !nameRE.MatchString(p) {
		return "", Unknown, fmt.Errorf("sysctl %q must have at most %d characters and match regex %s", p, maxLength, namePattern)
	}
	p = Normalize(p)
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		if ns = NamespacedBy(prefix); ns == Unknown {
			return "", Unknown, fmt.Errorf("the sysctls %q are not known to be namespaced", p)
		}
		return p, ns, nil
	}
	if ns = NamespacedBy(p); ns == Unknown {
		return "", Unknown, fmt.Errorf("the sysctl %q are not known to be namespaced", p)
	}
	return p, ns, nil
}

// Allowlist is the set of sysctls a node accepts: exact names and prefixes,
// each with its namespace.
type Allowlist struct {
	names    map[string]Namespace
	prefixes map[string]Namespace
}

// NewAllowlist returns the allowlist of the safe sysctls plus the given
// unsafe patterns (names, or prefixes ending in "*").
func NewAllowlist(unsafe []string) (*Allowlist, error) {
	w := &Allowlist{names: map[string]Namespace{}, prefixes: map[string]Namespace{}}
	for _, p := range append(append([]string(nil), Safe...), unsafe...) {
		name, ns, err := parsePattern(p)
		if err != nil {
			return nil, err
		}
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			w.prefixes[prefix] = ns
		} else {
			w.names[name] = ns
		}
	}
	return w, nil
}

// Validate checks one sysctl of a pod: it must be on the list, and a
// sysctl of the network or IPC namespace is refused when the pod shares
// that namespace with the host.
func (w *Allowlist) Validate(name string, hostNet, hostIPC bool) error {
	name = Normalize(name)
	ns, ok := w.names[name]
	if !ok {
		prefixes := make([]string, 0, len(w.prefixes))
		for p := range w.prefixes {
			prefixes = append(prefixes, p)
		}
		sort.Strings(prefixes)
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = w.prefixes[p], true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", name)
	}
	if (ns == IPC && hostIPC) || (ns == Net && hostNet) {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
