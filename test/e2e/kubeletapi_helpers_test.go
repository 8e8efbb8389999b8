//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
)

// clusterCAFile is the control plane's CA (HEARTLET_KUBE_LIB/pki/ca.crt),
// which signs the apiserver's kubelet-client certificate.
func clusterCAFile() string {
	lib := os.Getenv("HEARTLET_KUBE_LIB")
	if lib == "" {
		lib = "/var/lib/heartlet-kube"
	}
	return filepath.Join(lib, "pki", "ca.crt")
}
