package version

import (
	"runtime/debug"
	"strings"
)

// apiModule is the module whose version says which Kubernetes release
// heartlet's API types come from (k8s.io/api v0.X.Y is Kubernetes v1.X.Y).
const apiModule = "k8s.io/api"

// fallbackKubernetesVersion is used when the binary carries no module
// information.
const fallbackKubernetesVersion = "v1.37.0"

// Kubernetes is the Kubernetes release whose API heartlet implements,
// e.g. "v1.37.2".
func Kubernetes() string {
	return kubernetesVersion()
}

// KubernetesMinor is "<major>.<minor>" of Kubernetes(), e.g. "1.37", the
// version in the User-Agent of probes and lifecycle hooks.
func KubernetesMinor() string {
	v := strings.TrimPrefix(kubernetesVersion(), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// Kubelet is what heartlet reports as nodeInfo.kubeletVersion: the
// Kubernetes release whose API heartlet implements, with heartlet's own
// version as semver build metadata, e.g. "v1.37.2+heartlet-v0.3.0".
// Version parsers see the Kubernetes release (build metadata does not
// count in comparisons), and people see that the node runs heartlet.
func Kubelet(heartletVersion string) string {
	return kubeletVersion(kubernetesVersion(), heartletVersion)
}

func kubeletVersion(kube, heartlet string) string {
	meta := "heartlet"
	if heartlet != "" {
		meta += "-" + sanitizeBuildMetadata(heartlet)
	}
	return kube + "+" + meta
}

// kubernetesVersion maps the k8s.io/api module version to the Kubernetes
// release.
func kubernetesVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallbackKubernetesVersion
	}
	for _, d := range bi.Deps {
		if d.Path != apiModule {
			continue
		}
		v := d.Version
		if d.Replace != nil && d.Replace.Version != "" {
			v = d.Replace.Version
		}
		if k, ok := apiToKubernetes(v); ok {
			return k
		}
	}
	return fallbackKubernetesVersion
}

// apiToKubernetes turns "v0.37.2" into "v1.37.2"; pre-release suffixes
// are dropped.
func apiToKubernetes(v string) (string, bool) {
	rest, ok := strings.CutPrefix(v, "v0.")
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, "-+"); i >= 0 {
		rest = rest[:i]
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", false
	}
	for _, p := range parts {
		for _, c := range p {
			if c < '0' || c > '9' {
				return "", false
			}
		}
	}
	return "v1." + rest, true
}

// sanitizeBuildMetadata keeps what semver allows in build metadata
// ([0-9A-Za-z-] in dot-separated identifiers) and turns anything else into
// "-".
func sanitizeBuildMetadata(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '-' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			b[i] = '-'
		}
	}
	// No empty identifiers.
	out := strings.Trim(string(b), ".")
	for strings.Contains(out, "..") {
		out = strings.ReplaceAll(out, "..", ".")
	}
	if out == "" {
		return "unknown"
	}
	return out
}
