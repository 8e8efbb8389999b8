//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nodeName is the --hostname-override every test heartlet runs with: static
// pods are named <manifest name>-<nodeName>.
const nodeName = "e2e-node"

var (
	// criEndpoint is the private containerd's CRI endpoint (unix://...).
	criEndpoint string
	// heartletBin is the absolute path of the binary under test.
	heartletBin string
	// busyboxImage is the test image every test pod runs.
	busyboxImage = "localhost:5000/busybox:1.35"
	// testserverImage is the busybox image plus /testserver
	// (test/images/testserver), for probes, hooks and API clients.
	testserverImage = "localhost:5000/testserver:1.0"
	// artifactsDir, when set, receives the heartlet logs of failed tests.
	artifactsDir string
)

func TestMain(m *testing.M) {
	if reason := skipReason(); reason != "" {
		fmt.Printf("e2e: skipping all end-to-end tests: %s\n", reason)
		os.Exit(0)
	}
	heartletBin = os.Getenv("HEARTLET_BIN")
	if heartletBin == "" {
		heartletBin = filepath.Join("..", "..", "bin", "heartlet")
	}
	abs, err := filepath.Abs(heartletBin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: resolve heartlet binary %s: %v\n", heartletBin, err)
		os.Exit(1)
	}
	heartletBin = abs
	if _, err := os.Stat(heartletBin); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: heartlet binary: %v (build it with: go build -o bin/heartlet ./cmd/heartlet)\n", err)
		os.Exit(1)
	}
	if img := os.Getenv("HEARTLET_BUSYBOX_IMAGE"); img != "" {
		busyboxImage = img
	}
	if img := os.Getenv("HEARTLET_TESTSERVER_IMAGE"); img != "" {
		testserverImage = img
	}
	artifactsDir = os.Getenv("HEARTLET_ARTIFACTS")
	os.Exit(m.Run())
}

// skipReason says why the end-to-end tests cannot run here, or "".
func skipReason() string {
	if os.Geteuid() != 0 {
		return "they need root"
	}
	criEndpoint = os.Getenv("HEARTLET_CRI_ENDPOINT")
	if criEndpoint == "" {
		return "HEARTLET_CRI_ENDPOINT is not set (run hack/env.sh start, then source /run/heartlet-env/env)"
	}
	sock, ok := strings.CutPrefix(criEndpoint, "unix://")
	if !ok {
		return fmt.Sprintf("HEARTLET_CRI_ENDPOINT %q is not a unix:// endpoint", criEndpoint)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		return fmt.Sprintf("CRI endpoint %s is absent: %v (run hack/env.sh start)", criEndpoint, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Sprintf("CRI endpoint %s is not a socket", criEndpoint)
	}
	return ""
}
