//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// mountSmallFS mounts a tmpfs of size at dir, so that a pod can fill the
// node filesystem; it is unmounted when the test ends, after heartlet
// stopped if heartlet's cleanup is registered later.
func mountSmallFS(t *testing.T, dir, size string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		t.Fatalf("mount a %s tmpfs at %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// TestClusterEviction fills a small node filesystem (the root dir) from a
// pod's emptyDir below evictionHard's nodefs.available: that pod, and only
// it, is evicted (Failed, reason Evicted, upstream's message, an event,
// kubelet_evictions), the node reports DiskPressure and is tainted, a new
// pod is refused meanwhile, and the condition clears after the transition
// period once the evicted pod's volume is gone.
func TestClusterEviction(t *testing.T) {
	requireCluster(t)
	h := newClusterHeartlet(t, clusterOptions{config: `evictionHard:
  nodefs.available: "120Mi"
evictionPressureTransitionPeriod: 40s
`})
	mountSmallFS(t, h.rootDir, "300m")
	t.Cleanup(h.cleanup)
	startCluster(t, h, clusterOptions{})
	waitNodeSchedulable(t, h)
	if n, err := getNode(); err != nil || nodeCondition(n, v1.NodeDiskPressure) != v1.ConditionFalse {
		t.Fatalf("node before the fill: %v %s", err, describeConditions(n))
	}

	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }
	bystander := apiPod("evict-bystander", func(p *v1.Pod) {
		bound(p)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Mi")}
	})
	createPod(t, bystander)
	waitAPIPodRunning(t, h, bystander.Name)

	filler := apiPod("evict-filler", func(p *v1.Pod) {
		bound(p)
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers = []v1.Container{shContainer("fill", "dd if=/dev/zero of=/scratch/fill bs=1M count=220 && sync; "+sleeper)}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	})
	createPod(t, filler)
	sawPressure := false
	evicted := waitAPIPod(t, h, filler.Name, 2*time.Minute, "evicted", func(p *v1.Pod) bool {
		if n, err := getNode(); err == nil && nodeCondition(n, v1.NodeDiskPressure) == v1.ConditionTrue {
			sawPressure = true
		}
		return p.Status.Phase == v1.PodFailed
	})
	const wantPrefix = "The node was low on resource: ephemeral-storage. Threshold quantity: 120Mi, available: "
	if evicted.Status.Reason != "Evicted" || !strings.HasPrefix(evicted.Status.Message, wantPrefix) {
		t.Errorf("evicted pod status = %s %q %q, want Failed Evicted %q…", evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message, wantPrefix)
	}
	if got := podCondition(evicted, v1.DisruptionTarget); got != v1.ConditionTrue {
		t.Errorf("evicted pod's DisruptionTarget condition = %q, want True", got)
	}
	waitFor(t, 30*time.Second, "an Evicted event on the pod", func() (bool, string) {
		evs, err := podEvents(filler.Name, "Evicted")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if e.Type == v1.EventTypeWarning && strings.HasPrefix(e.Message, wantPrefix) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Evicted events", len(evs))
	})

	// DiskPressure is reported (and held for the transition period),
	// the node lifecycle controller taints the node for it.
	waitFor(t, 30*time.Second, "DiskPressure and its taint on the node", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		if nodeCondition(n, v1.NodeDiskPressure) == v1.ConditionTrue {
			sawPressure = true
		}
		tainted := false
		for _, tt := range n.Spec.Taints {
			if tt.Key == "node.kubernetes.io/disk-pressure" && tt.Effect == v1.TaintEffectNoSchedule {
				tainted = true
			}
		}
		return sawPressure && tainted, describeConditions(n) + fmt.Sprintf(" taints %v", n.Spec.Taints)
	})

	// A new pod is refused while the node is under disk pressure.
	late := apiPod("evict-latecomer", bound)
	createPod(t, late)
	refused := waitAPIPod(t, h, late.Name, 30*time.Second, "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if refused.Status.Reason != "Evicted" || refused.Status.Message != "The node had condition: [DiskPressure]. " {
		t.Errorf("refused pod status = %q %q, want Evicted \"The node had condition: [DiskPressure]. \"", refused.Status.Reason, refused.Status.Message)
	}

	// Only the filler was evicted.
	by, err := getAPIPod(bystander.Name)
	if err != nil || by == nil {
		t.Fatalf("bystander: %v", err)
	}
	if !podRunningReady(by) || by.Status.Reason != "" || len(by.Status.ContainerStatuses) != 1 || by.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("bystander touched: %s", describeStatus(by))
	}
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_evictions", "eviction_signal", "nodefs.available"); !ok || v != 1 {
		t.Errorf("kubelet_evictions{eviction_signal=nodefs.available} = %v (present %v), want 1", v, ok)
	}

	// The evicted pod's volume is gone: the condition clears after the
	// transition period.
	waitFor(t, 90*time.Second, "DiskPressure False again", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		return nodeCondition(n, v1.NodeDiskPressure) == v1.ConditionFalse, describeConditions(n)
	})
	if by, err := getAPIPod(bystander.Name); err != nil || by == nil || !podRunningReady(by) {
		t.Errorf("bystander not running after the pressure: %v", err)
	}
}

// nodeMemoryAvailable is the node's memory.available as heartlet computes
// it on cgroup v1: MemTotal less the root memory cgroup's usage less its
// total_inactive_file.
func nodeMemoryAvailable(t *testing.T) int64 {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Skipf("memory figures of cgroup v1 unavailable: %v", err)
		}
		return string(b)
	}
	field := func(text, key string) int64 {
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && strings.TrimSuffix(f[0], ":") == key {
				v, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				return v
			}
		}
		t.Fatalf("no %s in %.200q", key, text)
		return 0
	}
	total := field(read("/proc/meminfo"), "MemTotal") * 1024
	usage, err := strconv.ParseInt(strings.TrimSpace(read("/sys/fs/cgroup/memory/memory.usage_in_bytes")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	inactive := field(read("/sys/fs/cgroup/memory/memory.stat"), "total_inactive_file")
	return total - (usage - inactive)
}

// TestClusterEvictionMemory sets evictionHard memory.available 4 GiB
// below what the node has available (a wide margin: other users of the
// machine move its available memory by gigabytes), and a BestEffort pod
// fills 5.5 GiB of a memory-backed emptyDir (the threshold also lowers
// allocatable, which bounds the tmpfs; the kubepods cgroup is left
// unlimited so that no OOM kill interferes): it is evicted for memory (Failed, Evicted,
// upstream's message naming its container), the node reports
// MemoryPressure, and a pod using less than its requests keeps running.
// kernelMemcgNotification is on, so the crossing is seen at once.
func TestClusterEvictionMemory(t *testing.T) {
	requireCluster(t)
	const gi = int64(1) << 30
	avail := nodeMemoryAvailable(t)
	if avail < 10*gi {
		t.Skipf("only %d MiB available; the test needs 10 GiB", avail>>20)
	}
	threshold := (avail - 4*gi) >> 20
	h := startClusterHeartlet(t, clusterOptions{config: fmt.Sprintf(`evictionHard:
  memory.available: "%dMi"
evictionPressureTransitionPeriod: 30s
kernelMemcgNotification: true
enforceNodeAllocatable: ["none"]
`, threshold)})
	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }
	modest := apiPod("evict-mem-modest", func(p *v1.Pod) {
		bound(p)
		q := resource.MustParse("64Mi")
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q}, Limits: v1.ResourceList{v1.ResourceMemory: q}}
	})
	createPod(t, modest)
	waitAPIPodRunning(t, h, modest.Name)

	hog := memoryHog("evict-mem-hog", 5632)
	createPod(t, hog)
	waitMemoryEvicted(t, h, hog.Name, fmt.Sprintf("%dMi", threshold))
	m, err := getAPIPod(modest.Name)
	if err != nil || m == nil {
		t.Fatalf("modest pod: %v", err)
	}
	if !podRunningReady(m) || m.Status.Reason != "" || m.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod within its requests touched: %s", describeStatus(m))
	}
}

// memoryHog is a pod bound to the node that fills mi MiB of a
// memory-backed emptyDir in its container "hog", then sleeps.
func memoryHog(name string, mi int) *v1.Pod {
	return apiPod(name, func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Volumes = []v1.Volume{{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
		p.Spec.Containers = []v1.Container{shContainer("hog", fmt.Sprintf("dd if=/dev/zero of=/mem/fill bs=1M count=%d; %s", mi, sleeper))}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}}
	})
}

// waitMemoryEvicted waits until the memoryHog pod name is evicted with
// upstream's message for a memory threshold of the given quantity, and
// until the node has shown MemoryPressure (while waiting or after).
func waitMemoryEvicted(t *testing.T, h *heartlet, name, threshold string) {
	t.Helper()
	sawPressure := false
	evicted := waitAPIPod(t, h, name, 2*time.Minute, "evicted", func(p *v1.Pod) bool {
		if n, err := getNode(); err == nil && nodeCondition(n, v1.NodeMemoryPressure) == v1.ConditionTrue {
			sawPressure = true
		}
		return p.Status.Phase == v1.PodFailed
	})
	wantPrefix := "The node was low on resource: memory. Threshold quantity: " + threshold + ", available: "
	if evicted.Status.Reason != "Evicted" || !strings.HasPrefix(evicted.Status.Message, wantPrefix) ||
		!strings.Contains(evicted.Status.Message, "Container hog was using ") {
		t.Errorf("evicted pod status = %q %q, want Evicted %q… Container hog was using …", evicted.Status.Reason, evicted.Status.Message, wantPrefix)
	}
	waitFor(t, 30*time.Second, "MemoryPressure on the node", func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		if nodeCondition(n, v1.NodeMemoryPressure) == v1.ConditionTrue {
			sawPressure = true
		}
		return sawPressure, describeConditions(n)
	})
}
