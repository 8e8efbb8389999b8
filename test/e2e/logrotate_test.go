//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Container log rotation (containerLogMaxSize, containerLogMaxFiles,
// containerLogMonitorInterval, as upstream's container log manager): a
// container writing about 10 MB/s has its log rotated, older rotated files
// compressed, at most containerLogMaxFiles files kept, and it goes on
// writing to a fresh file after each rotation (the runtime reopened it).
// Between the passes of the 3 s interval heartlet checks fast-growing logs
// again, so no log file grows past twice the maximum size (upstream's
// would grow by about 30 MB between two passes).
func TestContainerLogRotation(t *testing.T) {
	h := newHeartlet(t, "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 4\ncontainerLogMonitorInterval: 3s\n")
	t.Cleanup(h.cleanup)
	h.start()
	h.addPod(t, "chatty.yaml", "chatty", manifest(t, "chatty", func(p *v1.Pod) {
		c := serverContainer("chatty", "-http-port", "0", "-stdout-rate", "10000", "-line-bytes", "1000")
		p.Spec.Containers = []v1.Container{c}
	}))
	pod := h.waitRunning(t, "chatty")
	dir := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "chatty")

	var maxFiles int
	var maxCurrent, maxRotated int64
	var sawGz, sawRotated, grewAgain bool
	var lastSize int64
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		maxFiles = max(maxFiles, len(entries))
		for _, e := range entries {
			switch {
			case strings.HasSuffix(e.Name(), ".gz"):
				sawGz = true
			case strings.HasPrefix(e.Name(), "0.log."):
				sawRotated = true
				// A plain rotated file has the size the log had when
				// it was rotated.
				if fi, err := e.Info(); err == nil && !strings.HasSuffix(e.Name(), ".tmp") {
					maxRotated = max(maxRotated, fi.Size())
				}
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, "0.log")); err == nil {
			maxCurrent = max(maxCurrent, fi.Size())
			if sawRotated && fi.Size() > 0 && fi.Size() > lastSize && lastSize > 0 {
				grewAgain = true
			}
			lastSize = fi.Size()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("largest current log seen: %.2f MiB, largest rotated file: %.2f MiB (max size 1 MiB); most files at once: %d",
		float64(maxCurrent)/(1<<20), float64(maxRotated)/(1<<20), maxFiles)
	if !sawRotated {
		t.Fatal("the log was never rotated")
	}
	if largest := max(maxCurrent, maxRotated); largest > 2<<20 {
		t.Errorf("a log file reached %.2f MiB, want at most twice containerLogMaxSize (2 MiB)", float64(largest)/(1<<20))
	}
	if !sawGz {
		t.Error("no rotated log was compressed")
	}
	if maxFiles > 4 {
		t.Errorf("%d log files at once, want at most containerLogMaxFiles = 4", maxFiles)
	}
	if !grewAgain {
		t.Error("the current log did not grow again after a rotation: the runtime did not reopen it")
	}
}
