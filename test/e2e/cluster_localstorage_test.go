//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// waitLocalStorageEviction waits for pod name to be evicted with message
// want, with an Evicted event of that message, and checks that
// kubelet_evictions{eviction_signal=signal} is 1.
func waitLocalStorageEviction(t *testing.T, h *heartlet, name, want, signal string) {
	t.Helper()
	evicted := waitAPIPod(t, h, name, 90*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if evicted.Status.Reason != "Evicted" || evicted.Status.Message != want {
		t.Errorf("evicted pod status = %s %q %q, want Failed Evicted %q", evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message, want)
	}
	waitFor(t, 30*time.Second, "an Evicted event on the pod", func() (bool, string) {
		evs, err := podEvents(name, "Evicted")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if e.Type == v1.EventTypeWarning && e.Message == want {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Evicted events", len(evs))
	})
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_evictions", "eviction_signal", signal); !ok || v != 1 {
		t.Errorf("kubelet_evictions{eviction_signal=%s} = %v (present %v), want 1", signal, v, ok)
	}
}

// requireUntouched fails unless pod name runs, ready, never restarted.
func requireUntouched(t *testing.T, name string) {
	t.Helper()
	p, err := getAPIPod(name)
	if err != nil || p == nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	if !podRunningReady(p) || p.Status.Reason != "" || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod %s touched: %s", name, describeStatus(p))
	}
}

func emptyDirVolume(name, sizeLimit string) v1.Volume {
	q := resource.MustParse(sizeLimit)
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &q}}}
}

// TestClusterEvictionEmptyDirLimit: a pod writing 40 MiB into an emptyDir
// of sizeLimit 20Mi is evicted (localStorageCapacityIsolation, on by
// default) with upstream's message, event and metric label, while a pod
// within its emptyDir's sizeLimit keeps running.
func TestClusterEvictionEmptyDirLimit(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }
	bystander := apiPod("ls-emptydir-bystander", func(p *v1.Pod) {
		bound(p)
		p.Spec.Volumes = []v1.Volume{emptyDirVolume("scratch", "100Mi")}
		p.Spec.Containers = []v1.Container{shContainer("fill", "dd if=/dev/zero of=/scratch/fill bs=1M count=10 && sync; "+sleeper)}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	})
	createPod(t, bystander)
	waitAPIPodRunning(t, h, bystander.Name)

	filler := apiPod("ls-emptydir-filler", func(p *v1.Pod) {
		bound(p)
		p.Spec.Volumes = []v1.Volume{emptyDirVolume("scratch", "20Mi")}
		p.Spec.Containers = []v1.Container{shContainer("fill", "dd if=/dev/zero of=/scratch/fill bs=1M count=40 && sync; "+sleeper)}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	})
	createPod(t, filler)
	waitLocalStorageEviction(t, h, filler.Name, `Usage of EmptyDir volume "scratch" exceeds the limit "20Mi". `, "emptydirfs.limit")
	requireUntouched(t, bystander.Name)
}

// TestClusterEvictionContainerLimit: a container writing 60 MiB into its
// writable layer past its ephemeral-storage limit of 20Mi is evicted with
// upstream's container message (its pod's total limit, 220Mi, is not
// reached), while a pod within its limit keeps running.
func TestClusterEvictionContainerLimit(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }
	limit := func(c *v1.Container, q string) {
		c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	bystander := apiPod("ls-container-bystander", func(p *v1.Pod) {
		bound(p)
		p.Spec.Containers = []v1.Container{shContainer("write", "dd if=/dev/zero of=/fill bs=1M count=5 && sync; "+sleeper)}
		limit(&p.Spec.Containers[0], "50Mi")
	})
	createPod(t, bystander)
	waitAPIPodRunning(t, h, bystander.Name)

	writer := apiPod("ls-container-writer", func(p *v1.Pod) {
		bound(p)
		p.Spec.Containers = []v1.Container{
			shContainer("write", "dd if=/dev/zero of=/fill bs=1M count=60 && sync; "+sleeper),
			shContainer("idle", sleeper),
		}
		limit(&p.Spec.Containers[0], "20Mi")
		limit(&p.Spec.Containers[1], "200Mi")
	})
	createPod(t, writer)
	waitLocalStorageEviction(t, h, writer.Name, `Container write exceeded its local ephemeral storage limit "20Mi". `, "ephemeralcontainerfs.limit")
	requireUntouched(t, bystander.Name)
}

// TestClusterEvictionLocalStorageIsolationOff: with
// localStorageCapacityIsolation false the node reports no ephemeral-storage
// capacity (as upstream) and the same emptyDir overflow is left alone.
func TestClusterEvictionLocalStorageIsolationOff(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: "localStorageCapacityIsolation: false\n"})
	if n, err := getNode(); err != nil {
		t.Fatal(err)
	} else if c, a := n.Status.Capacity[v1.ResourceEphemeralStorage], n.Status.Allocatable[v1.ResourceEphemeralStorage]; !c.IsZero() || !a.IsZero() {
		t.Errorf("node ephemeral-storage capacity %s, allocatable %s; want none", c.String(), a.String())
	}
	filler := apiPod("ls-off-filler", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Volumes = []v1.Volume{emptyDirVolume("scratch", "20Mi")}
		p.Spec.Containers = []v1.Container{shContainer("fill", "dd if=/dev/zero of=/scratch/fill bs=1M count=40 && sync && touch /scratch/done; "+sleeper)}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	})
	createPod(t, filler)
	waitAPIPodRunning(t, h, filler.Name)
	// Three passes of the eviction manager and a refresh of the disk
	// usage after the write.
	deadline := time.Now().Add(35 * time.Second)
	for time.Now().Before(deadline) {
		p, err := getAPIPod(filler.Name)
		if err != nil || p == nil {
			t.Fatalf("pod %s: %v", filler.Name, err)
		}
		if p.Status.Phase != v1.PodRunning {
			t.Fatalf("pod over its emptyDir limit with isolation off: %s", describeStatus(p))
		}
		time.Sleep(2 * time.Second)
	}
	requireUntouched(t, filler.Name)
	if evs, err := podEvents(filler.Name, "Evicted"); err != nil || len(evs) != 0 {
		t.Errorf("Evicted events %v (%v), want none", evs, err)
	}
}

// pageCacheReader fills the page cache with a file of sizeMi MiB in an
// emptyDir on disk and keeps reading it, so that its pages are active;
// it allocates no memory of its own.
func pageCacheReader(name string, sizeMi int) *v1.Pod {
	return apiPod(name, func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers = []v1.Container{shContainer("read", fmt.Sprintf(
			"dd if=/dev/zero of=/data/f bs=1M count=%d && sync; trap 'exit 0' TERM; while true; do cat /data/f > /dev/null; sleep 1 & wait $!; done", sizeMi))}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	})
}

// nodeMemoryFigures are the node's memory.available under both signals
// as heartlet computes them on cgroup v1: MemTotal less the root memory
// cgroup's usage less total_inactive_file (workingset), and less
// total_active_file as well (reclaimable, without memory pressure).
func nodeMemoryFigures(t *testing.T) (workingSet, reclaimable int64) {
	t.Helper()
	b, err := os.ReadFile("/sys/fs/cgroup/memory/memory.stat")
	if err != nil {
		t.Skipf("memory figures of cgroup v1 unavailable: %v", err)
	}
	var active int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "total_active_file" {
			if active, err = strconv.ParseInt(f[1], 10, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if active < 0 {
		t.Fatalf("no total_active_file in %.200q", b)
	}
	ws := nodeMemoryAvailable(t)
	return ws, ws + active
}

// pageCacheSetup starts heartlet with args and evictionHard
// memory.available 2.5 GiB below the node's available memory under the
// signal the test exercises, and starts a reader of a 4 GiB file; it
// waits until the reader's page cache is active (the working-set signal
// fell by 3 GiB) and returns the threshold in MiB.
func pageCacheSetup(t *testing.T, reclaimable bool, args ...string) (*heartlet, int64, *v1.Pod) {
	t.Helper()
	requireCluster(t)
	const gi = int64(1) << 30
	ws, rec := nodeMemoryFigures(t)
	if ws < 12*gi {
		t.Skipf("only %d MiB available; the test needs 12 GiB", ws>>20)
	}
	avail := ws
	if reclaimable {
		avail = rec
	}
	threshold := (avail - 5*gi/2) >> 20
	h := startClusterHeartlet(t, clusterOptions{args: args, config: fmt.Sprintf(`evictionHard:
  memory.available: "%dMi"
evictionPressureTransitionPeriod: 30s
enforceNodeAllocatable: ["none"]
`, threshold)})
	reader := pageCacheReader("pagecache-reader", 4096)
	createPod(t, reader)
	waitAPIPodRunning(t, h, reader.Name)
	waitFor(t, 90*time.Second, "the reader's page cache to be active", func() (bool, string) {
		if p, err := getAPIPod(reader.Name); err == nil && p != nil && p.Status.Phase == v1.PodFailed {
			return true, ""
		}
		a, _ := nodeMemoryFigures(t)
		return a < ws-3*gi, fmt.Sprintf("working-set signal %d MiB, %d MiB at the start", a>>20, ws>>20)
	})
	return h, threshold, reader
}

// TestClusterEvictionPageCacheWorkingSet: under upstream's signal (the
// default) a pod that only reads a big file is evicted for memory once
// its page cache is active.
func TestClusterEvictionPageCacheWorkingSet(t *testing.T) {
	h, threshold, reader := pageCacheSetup(t, false)
	evicted := waitAPIPod(t, h, reader.Name, 60*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantPrefix := fmt.Sprintf("The node was low on resource: memory. Threshold quantity: %dMi, available: ", threshold)
	if evicted.Status.Reason != "Evicted" || !strings.HasPrefix(evicted.Status.Message, wantPrefix) {
		t.Errorf("evicted reader status = %q %q, want Evicted %q…", evicted.Status.Reason, evicted.Status.Message, wantPrefix)
	}
}

// TestClusterEvictionPageCacheReclaimable: under
// --eviction-memory-signal=reclaimable, with a threshold 2.5 GiB below
// that signal, the same reader is left alone while the working-set signal
// is past the threshold (no MemoryPressure either), and a pod holding
// 5.6 GiB of anonymous memory (three dd buffers of 1900 MiB, blocked
// writing to a pipe nobody reads) is still evicted for memory.
func TestClusterEvictionPageCacheReclaimable(t *testing.T) {
	h, threshold, reader := pageCacheSetup(t, true, "--eviction-memory-signal=reclaimable")
	// The working-set signal is past the threshold; three passes with
	// the page cache active.
	if ws, _ := nodeMemoryFigures(t); ws>>20 >= threshold {
		t.Fatalf("working-set signal %d MiB above the threshold %d MiB: the reader proves nothing", ws>>20, threshold)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		requireUntouched(t, reader.Name)
		if n, err := getNode(); err == nil && nodeCondition(n, v1.NodeMemoryPressure) == v1.ConditionTrue {
			t.Fatalf("MemoryPressure from page cache under the reclaimable signal: %s", describeConditions(n))
		}
		if t.Failed() {
			t.FailNow()
		}
		time.Sleep(3 * time.Second)
	}

	hog := apiPod("pagecache-hog", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Containers = []v1.Container{shContainer("hog",
			"for i in 1 2 3; do dd if=/dev/zero bs=1900M count=1 2>/dev/null | sleep 3600 & done; "+sleeper)}
	})
	createPod(t, hog)
	evicted := waitAPIPod(t, h, hog.Name, 90*time.Second, "evicted", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantPrefix := fmt.Sprintf("The node was low on resource: memory. Threshold quantity: %dMi, available: ", threshold)
	if evicted.Status.Reason != "Evicted" || !strings.HasPrefix(evicted.Status.Message, wantPrefix) {
		t.Errorf("evicted hog status = %q %q, want Evicted %q…", evicted.Status.Reason, evicted.Status.Message, wantPrefix)
	}
	// The hog's memory is released: the reader is left alone afterwards
	// too (a pass once the hog is cleaned up, and the next).
	requireUntouched(t, reader.Name)
	time.Sleep(15 * time.Second)
	requireUntouched(t, reader.Name)
}
