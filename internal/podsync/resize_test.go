package podsync

import (
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/resize"
)

// resizePod is a Burstable pod of one container.
func resizePod(memPolicy v1.ResourceResizeRestartPolicy) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, nil, "app")
	c := &p.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = "busybox:1.35", v1.PullIfNotPresent
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	if memPolicy != "" {
		c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: memPolicy}}
	}
	return p
}

func (h *harness) useResizer() {
	h.t.Helper()
	store, err := resize.OpenStore(filepath.Join(h.t.TempDir(), resize.StateFileName))
	if err != nil {
		h.t.Fatal(err)
	}
	h.syncer.opts.Resizer = resize.NewManager(resize.Options{
		Store:      store,
		Containers: h.rt,
		Allocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
		},
		Clock: h.clock,
	})
}

func withResources(pod *v1.Pod, cpuLim, memLim string) *v1.Pod {
	p := pod.DeepCopy()
	p.Generation++
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)}
	return p
}

func linuxOf(c interface {
	GetLinux() *runtimeapi.LinuxContainerConfig
}) *runtimeapi.LinuxContainerResources {
	return c.GetLinux().GetResources()
}

func hasCondition(st v1.PodStatus, t v1.PodConditionType) *v1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestSyncPodResizesInPlace(t *testing.T) {
	h := newHarness(t)
	h.useResizer()
	pod := resizePod("")
	h.sync(pod)
	before := h.running("app")

	want := withResources(pod, "500m", "128Mi")
	h.sync(want)
	after := h.running("app")
	if after.ID != before.ID || len(h.containers("app")) != 1 {
		t.Fatalf("the resize replaced the container: %s -> %s", before.ID, after.ID)
	}
	if r := linuxOf(after.Config); r.GetMemoryLimitInBytes() != 128<<20 || r.GetCpuQuota() != 50000 {
		t.Errorf("container resources after the resize: %v", r)
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	cs := st.ContainerStatuses[0]
	if q := cs.Resources.Limits[v1.ResourceMemory]; q.Value() != 128<<20 {
		t.Errorf("status resources memory limit %s, want 128Mi", q.String())
	}
	if q := cs.AllocatedResources[v1.ResourceCPU]; q.MilliValue() != 100 {
		t.Errorf("status allocatedResources cpu %s, want 100m", q.String())
	}
	if cs.RestartCount != 0 {
		t.Errorf("restart count %d", cs.RestartCount)
	}
	if c := hasCondition(st, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress stayed after the resize was applied: %+v", c)
	}
	h.sync(want)
	if n := len(h.containers("app")); n != 1 {
		t.Errorf("%d app containers after another sync, want 1", n)
	}
}

func TestSyncPodResizeInfeasible(t *testing.T) {
	h := newHarness(t)
	h.useResizer()
	pod := resizePod("")
	h.sync(pod)
	before := h.running("app")
	want := withResources(pod, "200m", "64Mi")
	want.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3")
	want.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("3500m")
	h.sync(want)
	st, _ := h.status.GetPodStatus(pod.UID)
	c := hasCondition(st, v1.PodResizePending)
	if c == nil || c.Reason != v1.PodReasonInfeasible || c.Message != "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000" {
		t.Fatalf("PodResizePending = %+v", c)
	}
	if r := linuxOf(h.running("app").Config); r.GetCpuQuota() != 20000 {
		t.Errorf("an infeasible resize changed the container: %v", r)
	}
	if h.running("app").ID != before.ID {
		t.Error("an infeasible resize replaced the container")
	}
}

func TestSyncPodResizeRestartsContainer(t *testing.T) {
	h := newHarness(t)
	h.useResizer()
	pod := resizePod(v1.RestartContainer)
	h.sync(pod)
	before := h.running("app")
	want := withResources(pod, "200m", "128Mi")
	res := h.sync(want)
	if res.RequeueAfter <= 0 {
		t.Errorf("no requeue after stopping the container for its restart: %+v", res)
	}
	h.sync(want)
	after := h.running("app")
	if after.ID == before.ID {
		t.Fatal("the container was not restarted")
	}
	if r := linuxOf(after.Config); r.GetMemoryLimitInBytes() != 128<<20 {
		t.Errorf("the restarted container runs with %v, want the new memory limit", r)
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if n := st.ContainerStatuses[0].RestartCount; n != 1 {
		t.Errorf("restart count %d, want 1", n)
	}
}
