//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// nodeEvents are the events about the node with the given reason.
func nodeEvents(reason string) ([]v1.Event, error) {
	var list v1.EventList
	sel := "involvedObject.kind=Node,involvedObject.name=" + clusterNode + ",reason=" + reason
	if err := getJSON(&list, "events", "-n", "default", "--field-selector", sel); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// TestClusterAllocatableMemoryEviction: with enforceNodeAllocatable
// [pods] and systemReserved leaving the pods 3 GiB, the kubepods cgroup
// is limited to 3 GiB and the node gets NodeAllocatableEnforced; two
// BestEffort pods filling memory-backed emptyDirs (1500 and 1400 MiB,
// each within allocatable, together past it, the larger first) bring the pods within the
// hard memory.available threshold (300Mi) of their limit while the node
// as a whole has gigabytes free: the larger is evicted through
// allocatableMemory.available (Failed, Evicted, upstream's message,
// kubelet_evictions counts that signal; kernelMemcgNotification arms a
// threshold on kubepods), the node reports MemoryPressure, and the other
// keeps running.
func TestClusterAllocatableMemoryEviction(t *testing.T) {
	requireCluster(t)
	const gi = int64(1) << 30
	if avail := nodeMemoryAvailable(t); avail < 8*gi {
		t.Skipf("only %d MiB available; the test needs 8 GiB", avail>>20)
	}
	reserved := memTotal(t) - 3*gi
	h := startClusterHeartlet(t, clusterOptions{config: fmt.Sprintf(`evictionHard:
  memory.available: "300Mi"
evictionPressureTransitionPeriod: 30s
kernelMemcgNotification: true
enforceNodeAllocatable: ["pods"]
systemReserved:
  memory: "%d"
`, reserved)})
	if got := strings.TrimSpace(readString(t, "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes")); got != strconv.FormatInt(3*gi, 10) {
		t.Errorf("kubepods memory limit = %s, want %d", got, 3*gi)
	}
	waitFor(t, 30*time.Second, "a NodeAllocatableEnforced event on the node", func() (bool, string) {
		evs, err := nodeEvents("NodeAllocatableEnforced")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if e.Type == v1.EventTypeNormal && e.Message == "Updated Node Allocatable limit across pods" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs))
	})

	// The larger pod fills its memory first, so that it is the larger one
	// whenever the threshold is crossed.
	big, small := memoryHog("alloc-hog-big", 1500), memoryHog("alloc-hog-small", 1400)
	createPod(t, big)
	waitFor(t, time.Minute, big.Name+" has filled its memory", func() (bool, string) {
		out, err := kubectl("logs", "-n", "default", big.Name)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "1500+0 records out"), out
	})
	createPod(t, small)
	waitMemoryEvicted(t, h, big.Name, "300Mi")
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_evictions", "eviction_signal", "allocatableMemory.available"); !ok || v != 1 {
		t.Errorf("kubelet_evictions{eviction_signal=allocatableMemory.available} = %v (present %v), want 1", v, ok)
	}
	if v, ok := sample(mfs, "kubelet_evictions", "eviction_signal", "memory.available"); ok && v != 0 {
		t.Errorf("kubelet_evictions{eviction_signal=memory.available} = %v, want none: the node had memory", v)
	}
	waitAPIPodRunning(t, h, small.Name)
	requireUntouched(t, small.Name)
}
