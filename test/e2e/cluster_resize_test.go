//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// In-place pod resize, as upstream's e2e tests check it
// (test/e2e/common/node/pod_resize.go, test/e2e/node/pod_resize.go):
// `kubectl patch --subresource resize` changes a running container's
// cgroup limits without a restart, the status shows the new resources and
// allocation with no resize condition left, a resize that does not fit
// beside the other pods is PodResizePending/Deferred until one of them
// stops (and does not count against new pods meanwhile), a memory limit
// below the usage is refused, and a container whose memory resizePolicy
// is RestartContainer is restarted with the new limit.

const resizeTimeout = 90 * time.Second

// resizablePod is a Burstable pod of one sleeping container with the
// given memory resize policy.
func resizablePod(name string, memPolicy v1.ResourceResizeRestartPolicy) *v1.Pod {
	return apiPod(name, func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		c := &p.Spec.Containers[0]
		c.Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}
		c.ResizePolicy = []v1.ContainerResizePolicy{
			{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
			{ResourceName: v1.ResourceMemory, RestartPolicy: memPolicy},
		}
	})
}

// resizeTo patches the container main of pod name through the resize
// subresource.
func resizeTo(t *testing.T, name, cpuReq, cpuLim, memReq, memLim string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
		cpuReq, memReq, cpuLim, memLim)
	mustKubectl(t, "patch", "pod", "-n", "default", name, "--subresource", "resize", "-p", patch)
}

// cgroupInside reads a cgroup v1 file of the container main, from inside.
func cgroupInside(t *testing.T, name, file string) int64 {
	t.Helper()
	out := mustKubectl(t, "exec", "-n", "default", name, "-c", "main", "--", "cat", "/sys/fs/cgroup/"+file)
	v, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("read %s in %s: %q: %v", file, name, out, err)
	}
	return v
}

// podCgroupFile is a cgroup v1 file of the pod's cgroup on the host.
func podCgroupFile(t *testing.T, p *v1.Pod, controller, file string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", controller, "kubepods*", "*", "pod"+string(p.UID), file))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(filepath.Join("/sys/fs/cgroup", controller, "kubepods*", "pod"+string(p.UID), file))
	}
	if len(matches) != 1 {
		t.Fatalf("pod cgroup file %s/%s of %s: found %v", controller, file, p.Name, matches)
	}
	return matches[0]
}

func hostInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func podConditionOf(p *v1.Pod, ct v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// resizedTo reports whether main's status shows the memory limit and cpu
// request as resources and allocatedResources, with no resize condition.
func resizedTo(memLim, cpuReq string) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 || podConditionOf(p, v1.PodResizePending) != nil || podConditionOf(p, v1.PodResizeInProgress) != nil {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.Resources == nil || cs.State.Running == nil {
			return false
		}
		lim, req := cs.Resources.Limits[v1.ResourceMemory], cs.AllocatedResources[v1.ResourceCPU]
		return lim.Cmp(resource.MustParse(memLim)) == 0 && req.Cmp(resource.MustParse(cpuReq)) == 0
	}
}

func TestClusterPodResize(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, resizablePod("resize", v1.NotRequired))
	p := waitAPIPodRunning(t, h, "resize")
	id := p.Status.ContainerStatuses[0].ContainerID
	if got := cgroupInside(t, "resize", "memory/memory.limit_in_bytes"); got != 64<<20 {
		t.Fatalf("memory limit before = %d, want 64Mi", got)
	}
	if got := cgroupInside(t, "resize", "cpu/cpu.cfs_quota_us"); got != 20000 {
		t.Fatalf("cpu quota before = %d, want 20000", got)
	}

	// Up: cpu and memory.
	resizeTo(t, "resize", "200m", "400m", "48Mi", "128Mi")
	p = waitAPIPod(t, h, "resize", resizeTimeout, "resized up", resizedTo("128Mi", "200m"))
	cs := p.Status.ContainerStatuses[0]
	if cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("the resize restarted the container: %s -> %s, restartCount %d", id, cs.ContainerID, cs.RestartCount)
	}
	for file, want := range map[string]int64{"memory/memory.limit_in_bytes": 128 << 20, "cpu/cpu.cfs_quota_us": 40000, "cpu/cpu.shares": 204} {
		if got := cgroupInside(t, "resize", file); got != want {
			t.Errorf("after the resize up, %s inside = %d, want %d", file, got, want)
		}
	}
	if got := hostInt(t, podCgroupFile(t, p, "memory", "memory.limit_in_bytes")); got != 128<<20 {
		t.Errorf("pod cgroup memory limit = %d, want 128Mi", got)
	}
	if got := hostInt(t, podCgroupFile(t, p, "cpu", "cpu.cfs_quota_us")); got != 40000 {
		t.Errorf("pod cgroup cpu quota = %d, want 40000", got)
	}
	if q := cs.Resources.Limits[v1.ResourceCPU]; q.Cmp(resource.MustParse("400m")) != 0 {
		t.Errorf("status resources cpu limit = %s, want 400m", q.String())
	}
	t.Logf("resized up: resources %v, allocated %v", cs.Resources, cs.AllocatedResources)

	// Down: the containers before the pod cgroup, so the kernel takes it.
	resizeTo(t, "resize", "150m", "300m", "32Mi", "96Mi")
	p = waitAPIPod(t, h, "resize", resizeTimeout, "resized down", resizedTo("96Mi", "150m"))
	if got := cgroupInside(t, "resize", "memory/memory.limit_in_bytes"); got != 96<<20 {
		t.Errorf("after the resize down, memory limit inside = %d, want 96Mi", got)
	}
	if got := cgroupInside(t, "resize", "cpu/cpu.cfs_quota_us"); got != 30000 {
		t.Errorf("after the resize down, cpu quota inside = %d, want 30000", got)
	}
	if got := hostInt(t, podCgroupFile(t, p, "memory", "memory.limit_in_bytes")); got != 96<<20 {
		t.Errorf("pod cgroup memory limit = %d, want 96Mi", got)
	}
	if p.Status.ContainerStatuses[0].ContainerID != id || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the resize down restarted the container")
	}

	// Beyond the node's allocatable: the 1.37 API server refuses it
	// itself, before the node sees it (heartlet's own Infeasible check is
	// unit-tested).
	patch := `{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"1000"},"limits":{"cpu":"1000"}}}]}}`
	if out, err := kubectl("patch", "pod", "-n", "default", "resize", "--subresource", "resize", "-p", patch); err == nil {
		t.Errorf("a resize beyond the node's allocatable was accepted by the API: %s", out)
	} else {
		t.Logf("refused by the API server: %v", err)
	}

	// Fits the node but not beside another pod: Deferred, until the other
	// pod goes.
	createPod(t, apiPod("resize-hog", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}
	}))
	waitAPIPodRunning(t, h, "resize-hog")
	resizeTo(t, "resize", "800m", "1", "32Mi", "96Mi")
	p = waitAPIPod(t, h, "resize", resizeTimeout, "PodResizePending Deferred", func(p *v1.Pod) bool {
		c := podConditionOf(p, v1.PodResizePending)
		return c != nil && c.Reason == v1.PodReasonDeferred
	})
	c := podConditionOf(p, v1.PodResizePending)
	if !strings.HasPrefix(c.Message, "Node didn't have enough resource: cpu, requested: 800, used: ") {
		t.Errorf("PodResizePending message %q", c.Message)
	}
	t.Logf("deferred: %s", c.Message)
	if got := cgroupInside(t, "resize", "cpu/cpu.cfs_quota_us"); got != 30000 {
		t.Errorf("a deferred resize changed the cpu quota to %d", got)
	}
	if q := p.Status.ContainerStatuses[0].AllocatedResources[v1.ResourceCPU]; q.Cmp(resource.MustParse("150m")) != 0 {
		t.Errorf("allocatedResources cpu = %s while deferred, want 150m", q.String())
	}
	waitFor(t, 30*time.Second, "a ResizeDeferred event", func() (bool, string) {
		evs, err := podEvents("resize", "ResizeDeferred")
		if err != nil {
			return false, err.Error()
		}
		return len(evs) > 0, "none yet"
	})
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_pod_pending_resizes", "reason", "deferred"); !ok || v != 1 {
		t.Errorf("kubelet_pod_pending_resizes{reason=deferred} = %v (present %v), want 1", v, ok)
	}
	// Up (100m -> 200m), down, up (150m -> 800m): each counted once.
	for _, c := range []struct {
		op   string
		want float64
	}{{"increase", 2}, {"decrease", 1}} {
		if v, _ := sample(mfs, "kubelet_container_requested_resizes_total", "resource", "cpu", "requirement", "requests", "operation", c.op); v != c.want {
			t.Errorf("kubelet_container_requested_resizes_total{cpu,requests,%s} = %v, want %v", c.op, v, c.want)
		}
	}

	// Admission counts the deferred pod at its allocation (150m), not at
	// what it asks for (800m), as upstream: a pod that fits only so is
	// admitted.
	node, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	free := node.Status.Allocatable.Cpu().MilliValue() - 1500 - 150
	if free < 100 || free-50 >= 800-150+50 {
		t.Fatalf("allocatable cpu %s does not suit the test", node.Status.Allocatable.Cpu().String())
	}
	createPod(t, apiPod("resize-admit", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(free-50, resource.DecimalSI)}
	}))
	waitAPIPodRunning(t, h, "resize-admit")

	// The deferred resize is retried as soon as the other pod stops
	// (upstream's pod_terminated trigger), not on the pod's next resync.
	deletePodAndWait(t, "resize-hog")
	waitAPIPod(t, h, "resize", 30*time.Second, "resized once room was made", resizedTo("96Mi", "800m"))
	if got := cgroupInside(t, "resize", "cpu/cpu.cfs_quota_us"); got != 100000 {
		t.Errorf("after the deferred resize, cpu quota inside = %d, want 100000", got)
	}
	mfs = families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_pod_deferred_accepted_resizes_total", "retry_trigger", "pod_terminated"); !ok || v != 1 {
		all, _ := sample(mfs, "kubelet_pod_deferred_accepted_resizes_total")
		t.Errorf("kubelet_pod_deferred_accepted_resizes_total{retry_trigger=pod_terminated} = %v (present %v; all triggers %v), want 1", v, ok, all)
	}
	if v, ok := sample(mfs, "kubelet_pod_pending_resizes"); ok && v != 0 {
		t.Errorf("kubelet_pod_pending_resizes = %v with no resize pending", v)
	}
	if v, _ := sample(mfs, "kubelet_pod_in_progress_resizes"); v != 0 {
		t.Errorf("kubelet_pod_in_progress_resizes = %v after every resize completed", v)
	}
	if v, _ := sample(mfs, "kubelet_pod_resize_duration_milliseconds", "success", "true"); v < 3 {
		t.Errorf("kubelet_pod_resize_duration_milliseconds{success=true} has %v observations, want at least 3", v)
	}
}

// Lowering a memory limit below what the container uses is refused
// before the kernel sees it, as upstream (KEP-1287 "Memory Limit
// Decreases"): PodResizeInProgress with reason Error and a message with
// the usage and the new limit, the limit unchanged; once the usage drops
// the resize goes through.
func TestClusterPodResizeMemoryUsage(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	pod := resizablePod("resize-mem", v1.NotRequired)
	pod.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("128Mi")
	createPod(t, pod)
	p := waitAPIPodRunning(t, h, "resize-mem")
	id := p.Status.ContainerStatuses[0].ContainerID
	// 50 MiB in tmpfs, which the kernel cannot reclaim (no swap).
	mustKubectl(t, "exec", "-n", "default", "resize-mem", "-c", "main", "--", "dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1048576", "count=50")

	resizeTo(t, "resize-mem", "100m", "200m", "32Mi", "40Mi")
	p = waitAPIPod(t, h, "resize-mem", resizeTimeout, "PodResizeInProgress Error", func(p *v1.Pod) bool {
		c := podConditionOf(p, v1.PodResizeInProgress)
		return c != nil && c.Reason == "Error"
	})
	c := podConditionOf(p, v1.PodResizeInProgress)
	if want := fmt.Sprintf(`attempting to set container "main" memory limit (%d) below current usage (`, 40<<20); !strings.Contains(c.Message, want) {
		t.Errorf("PodResizeInProgress message %q, want it to contain %q", c.Message, want)
	}
	t.Logf("refused: %s", c.Message)
	if got := cgroupInside(t, "resize-mem", "memory/memory.limit_in_bytes"); got != 128<<20 {
		t.Errorf("memory limit inside = %d after the refused resize, want still 128Mi", got)
	}

	mustKubectl(t, "exec", "-n", "default", "resize-mem", "-c", "main", "--", "rm", "/dev/shm/fill")
	p = waitAPIPod(t, h, "resize-mem", resizeTimeout, "resized once the usage dropped", resizedTo("40Mi", "100m"))
	if got := cgroupInside(t, "resize-mem", "memory/memory.limit_in_bytes"); got != 40<<20 {
		t.Errorf("memory limit inside = %d, want 40Mi", got)
	}
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("the resize restarted the container")
	}
}

func TestClusterPodResizeRestartContainer(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, resizablePod("resize-restart", v1.RestartContainer))
	p := waitAPIPodRunning(t, h, "resize-restart")
	id := p.Status.ContainerStatuses[0].ContainerID

	resizeTo(t, "resize-restart", "100m", "200m", "32Mi", "128Mi")
	p = waitAPIPod(t, h, "resize-restart", resizeTimeout, "restarted with the new memory limit", func(p *v1.Pod) bool {
		return resizedTo("128Mi", "100m")(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	if p.Status.ContainerStatuses[0].ContainerID == id {
		t.Errorf("container ID unchanged after a RestartContainer resize")
	}
	if got := cgroupInside(t, "resize-restart", "memory/memory.limit_in_bytes"); got != 128<<20 {
		t.Errorf("memory limit inside the restarted container = %d, want 128Mi", got)
	}
}

// Pod-level resources (spec.resources) resize in place as upstream 1.37
// does with its default gates (InPlacePodLevelResourcesVerticalScaling,
// beta and on; upstream's test/e2e/common/node/pod_level_resources_resize.go):
// the pod cgroup takes the new values, the containers run on, and the
// pod's status.allocatedResources and status.resources follow.
func TestClusterPodResizePodLevel(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("resize-pod-level", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		p.Spec.Resources = &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}
	}))
	p := waitAPIPodRunning(t, h, "resize-pod-level")
	id := p.Status.ContainerStatuses[0].ContainerID
	// The API server lets a pod-level resize through only to a node that
	// declares the feature.
	node, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(node.Status.DeclaredFeatures, "InPlacePodLevelResourcesVerticalScaling") ||
		!slices.Contains(node.Status.DeclaredFeatures, "InPlacePodVerticalScalingInitContainers") {
		t.Errorf("node declaredFeatures %v, want the in-place resize features", node.Status.DeclaredFeatures)
	}
	if got := hostInt(t, podCgroupFile(t, p, "memory", "memory.limit_in_bytes")); got != 64<<20 {
		t.Fatalf("pod cgroup memory limit = %d, want 64Mi", got)
	}
	if got := hostInt(t, podCgroupFile(t, p, "cpu", "cpu.cfs_quota_us")); got != 20000 {
		t.Fatalf("pod cgroup cpu quota = %d, want 20000", got)
	}

	mustKubectl(t, "patch", "pod", "-n", "default", "resize-pod-level", "--subresource", "resize", "-p",
		`{"spec":{"resources":{"requests":{"cpu":"200m","memory":"48Mi"},"limits":{"cpu":"400m","memory":"128Mi"}}}}`)
	p = waitAPIPod(t, h, "resize-pod-level", resizeTimeout, "the pod-level resize in the status", func(p *v1.Pod) bool {
		if podConditionOf(p, v1.PodResizePending) != nil || podConditionOf(p, v1.PodResizeInProgress) != nil || p.Status.Resources == nil {
			return false
		}
		lim, req := p.Status.Resources.Limits[v1.ResourceMemory], p.Status.AllocatedResources[v1.ResourceCPU]
		return lim.Cmp(resource.MustParse("128Mi")) == 0 && req.Cmp(resource.MustParse("200m")) == 0
	})
	t.Logf("status resources %v, allocatedResources %v", p.Status.Resources, p.Status.AllocatedResources)
	if got := hostInt(t, podCgroupFile(t, p, "memory", "memory.limit_in_bytes")); got != 128<<20 {
		t.Errorf("pod cgroup memory limit = %d after the resize, want 128Mi", got)
	}
	if got := hostInt(t, podCgroupFile(t, p, "cpu", "cpu.cfs_quota_us")); got != 40000 {
		t.Errorf("pod cgroup cpu quota = %d after the resize, want 40000", got)
	}
	if got := hostInt(t, podCgroupFile(t, p, "cpu", "cpu.shares")); got != 204 {
		t.Errorf("pod cgroup cpu shares = %d after the resize, want 204", got)
	}
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("the pod-level resize restarted the container")
	}
	if q := p.Status.Resources.Limits[v1.ResourceCPU]; q.Cmp(resource.MustParse("400m")) != 0 {
		t.Errorf("status resources cpu limit = %s, want 400m", q.String())
	}
}

// An init container resizes as upstream 1.37 (InPlacePodVerticalScalingInitContainers
// is GA): a completed one's allocation follows the resize, reported in
// initContainerStatuses[].allocatedResources, and nothing restarts.
func TestClusterPodResizeInitContainer(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("resize-init", func(p *v1.Pod) {
		p.Spec.NodeName = clusterNode
		init := shContainer("init", "true")
		init.Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m")}
		p.Spec.InitContainers = []v1.Container{init}
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
	}))
	p := waitAPIPodRunning(t, h, "resize-init")
	id := p.Status.ContainerStatuses[0].ContainerID
	if len(p.Status.InitContainerStatuses) != 1 {
		t.Fatalf("init container statuses %v", p.Status.InitContainerStatuses)
	}
	if q := p.Status.InitContainerStatuses[0].AllocatedResources[v1.ResourceCPU]; q.Cmp(resource.MustParse("50m")) != 0 {
		t.Errorf("init allocatedResources cpu = %s, want 50m", q.String())
	}
	out, err := kubectl("patch", "pod", "-n", "default", "resize-init", "--subresource", "resize", "-p",
		`{"spec":{"initContainers":[{"name":"init","resources":{"requests":{"cpu":"80m"}}}]}}`)
	if err != nil {
		t.Fatalf("the API server refused an init container's resize: %v %s", err, out)
	}
	p = waitAPIPod(t, h, "resize-init", resizeTimeout, "the init container's new allocation", func(p *v1.Pod) bool {
		if len(p.Status.InitContainerStatuses) != 1 || podConditionOf(p, v1.PodResizePending) != nil || podConditionOf(p, v1.PodResizeInProgress) != nil {
			return false
		}
		q := p.Status.InitContainerStatuses[0].AllocatedResources[v1.ResourceCPU]
		return q.Cmp(resource.MustParse("80m")) == 0
	})
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != id || cs.RestartCount != 0 {
		t.Errorf("the init container's resize restarted the app container")
	}
}
