package podsync

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/volume"
)

const (
	// etcHostsPath is where containers see the pod's hosts file, and the
	// node's hosts file a host-network pod's starts from.
	etcHostsPath = "/etc/hosts"
	// hostsFileName is the pod's hosts file in its pod directory.
	hostsFileName = "etc-hosts"
	// hostsFileMode is the hosts file's mode, as upstream.
	hostsFileMode = 0o644
	// maxHostnameLen is the longest pod hostname (a DNS label), as
	// upstream; maxFQDNLen the longest kernel nodename (64 bytes).
	maxHostnameLen = 63
	maxFQDNLen     = 64
)

// podHostnameAndDomain returns the pod's hostname and its domain, as
// upstream: hostnameOverride when set (with no domain); else spec.hostname
// or the pod's name, cut to 63 characters without a trailing '-' or '.',
// and, when spec.subdomain is set, the domain
// <subdomain>.<namespace>.svc.<clusterDomain>.
func podHostnameAndDomain(pod *v1.Pod, clusterDomain string) (hostname, domain string, err error) {
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		h, err := truncateHostname(pod, *o)
		return h, "", err
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		h = pod.Spec.Hostname
	}
	h, err = truncateHostname(pod, h)
	if err != nil {
		return "", "", err
	}
	if sub := pod.Spec.Subdomain; sub != "" {
		if msgs := validation.IsDNS1123Label(sub); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", sub, strings.Join(msgs, ";"))
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", sub, pod.Namespace, clusterDomain)
	}
	return h, domain, nil
}

// truncateHostname cuts h to maxHostnameLen characters and then drops
// trailing '-' and '.', as upstream.
func truncateHostname(pod *v1.Pod, h string) (string, error) {
	if len(h) <= maxHostnameLen {
		return h, nil
	}
	cut := strings.TrimRight(h[:maxHostnameLen], "-.")
	klog.InfoS("Hostname for pod was too long, truncated it", "pod", klog.KObj(pod), "hostnameMaxLen", maxHostnameLen, "truncatedHostname", cut)
	if cut == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", pod.Name, h)
	}
	return cut, nil
}

// kernelHostname is the name the pod's UTS namespace gets: its hostname,
// or its FQDN when setHostnameAsFQDN is true and it has a domain; an FQDN
// longer than the kernel's 64 bytes is an error, as upstream.
func kernelHostname(hostname, domain string, asFQDN *bool) (string, error) {
	if domain == "" || asFQDN == nil || !*asFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxFQDNLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxFQDNLen, len(fqdn))
	}
	return fqdn, nil
}

// managedHostsFile is the hosts file of a pod with its own network: the
// localhost entries, one line per pod IP with the FQDN (when the pod has
// a domain) and the hostname, then the host aliases.
func managedHostsFile(ips []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// nodeHostsFile is the hosts file of a host-network pod: the node's, then
// the host aliases.
func nodeHostsFile(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (host network).\n")
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries is one line per host alias, its IP then its hostnames
// separated by tabs, after a blank line and a header; nothing without
// aliases.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// mountsEtcHosts reports whether the container mounts something of its
// own at /etc/hosts, which then stays.
func mountsEtcHosts(c *v1.Container) bool {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == etcHostsPath {
			return true
		}
	}
	return false
}

// writeHostsFile writes the pod's hosts file, <root>/pods/<uid>/etc-hosts
// (mode 0644, in the pod directory kept at 0750), for pod IPs ips, and
// returns its path. It returns "" with no error when heartlet has no root
// directory, or when a pod with its own network has no IP yet (as
// upstream, containers then keep the image's /etc/hosts). The file is
// rewritten in place, so containers already running see the new content.
func (s *Syncer) writeHostsFile(pod *v1.Pod, ips []string) (string, error) {
	if s.opts.RootDir == "" || (!pod.Spec.HostNetwork && len(ips) == 0) {
		return "", nil
	}
	var content []byte
	if pod.Spec.HostNetwork {
		src := s.opts.NodeHostsFile
		if src == "" {
			src = etcHostsPath
		}
		node, err := os.ReadFile(src)
		if err != nil {
			return "", fmt.Errorf("read the node's hosts file: %w", err)
		}
		content = nodeHostsFile(node, pod.Spec.HostAliases)
	} else {
		hostname, domain, err := podHostnameAndDomain(pod, s.opts.ClusterDomain)
		if err != nil {
			return "", err
		}
		content = managedHostsFile(ips, hostname, domain, pod.Spec.HostAliases)
	}
	dir, err := volume.MakePodDir(s.opts.RootDir, pod.UID)
	if err != nil {
		return "", fmt.Errorf("create pod directory for the hosts file: %w", err)
	}
	file := filepath.Join(dir, hostsFileName)
	// No link is followed: the file is heartlet's own in a directory no
	// one else writes to.
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, hostsFileMode)
	if err != nil {
		return "", fmt.Errorf("write hosts file: %w", err)
	}
	_, werr := f.Write(content)
	cerr := f.Close()
	if werr != nil {
		return "", fmt.Errorf("write hosts file %s: %w", file, werr)
	}
	if cerr != nil {
		return "", fmt.Errorf("write hosts file %s: %w", file, cerr)
	}
	// The mode must not depend on the umask.
	if err := os.Chmod(file, hostsFileMode); err != nil {
		return "", fmt.Errorf("set hosts file mode: %w", err)
	}
	return file, nil
}

// hostsMount is the bind mount of the pod's hosts file at /etc/hosts for
// container c, or nil when there is no file or c mounts its own.
func hostsMount(file string, c *v1.Container) *runtimeapi.Mount {
	if file == "" || mountsEtcHosts(c) {
		return nil
	}
	return &runtimeapi.Mount{HostPath: file, ContainerPath: etcHostsPath, SelinuxRelabel: true}
}
