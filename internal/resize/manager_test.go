package resize

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/qos"
	"github.com/heartlet/heartlet/internal/runtime"
)

// fakeNode records cgroup and container writes in one log, and keeps the
// containers' resources as a runtime would report them.
type fakeNode struct {
	log       []string
	resources map[string]*runtimeapi.LinuxContainerResources // by container ID
	updates   []*runtimeapi.LinuxContainerResources
	failOn    string
	// silent is a runtime that reports no container resources.
	silent bool
}

func (f *fakeNode) ResizePod(_ context.Context, _ *v1.Pod, r v1.ResourceName) error {
	f.log = append(f.log, "pod "+string(r))
	return nil
}

func (f *fakeNode) UpdateContainerResources(_ context.Context, id string, r *runtimeapi.LinuxContainerResources) error {
	if id == f.failOn {
		return errors.New("runtime refused")
	}
	f.log = append(f.log, "container "+id)
	f.resources[id] = r
	f.updates = append(f.updates, r)
	return nil
}

type event struct{ typ, reason, msg string }

type fakeRecorder struct{ events []event }

func (r *fakeRecorder) Eventf(_ k8sruntime.Object, typ, reason, format string, args ...any) {
	r.events = append(r.events, event{typ, reason, fmt.Sprintf(format, args...)})
}

// linux is the CRI resources of a container, as podsync computes them.
func linux(_ *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{CpuPeriod: qos.DefaultCPUPeriod}
	r.CpuShares = int64(qos.MilliCPUToShares(c.Resources.Requests.Cpu().MilliValue()))
	r.CpuQuota = qos.MilliCPUToQuota(c.Resources.Limits.Cpu().MilliValue(), qos.DefaultCPUPeriod)
	r.MemoryLimitInBytes = c.Resources.Limits.Memory().Value()
	return r
}

type harness struct {
	m       *Manager
	node    *fakeNode
	rec     *fakeRecorder
	store   *Store
	pods    []*v1.Pod
	clock   *clocktesting.FakeClock
	metrics *fakeMetrics
	mem     *fakeMemory
	// resynced receives the UIDs the Manager asks to sync.
	resynced chan types.UID
}

func newHarness(t *testing.T, allocatable v1.ResourceList) *harness {
	t.Helper()
	store, err := OpenStore(filepath.Join(t.TempDir(), StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		node: &fakeNode{resources: map[string]*runtimeapi.LinuxContainerResources{}}, rec: &fakeRecorder{}, store: store,
		clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), metrics: newFakeMetrics(), mem: &fakeMemory{usage: map[string]int64{"pod": 0}},
		resynced: make(chan types.UID, 100),
	}
	h.m = NewManager(Options{
		Store: store, Cgroups: h.node, Containers: h.node,
		Allocatable: func() v1.ResourceList { return allocatable },
		Pods:        func() []*v1.Pod { return h.pods },
		Recorder:    h.rec,
		Resync:      func(uid types.UID) { h.resynced <- uid },
		Memory:      h.mem,
		Metrics:     h.metrics,
		Clock:       h.clock,
	})
	return h
}

// set replaces the pod of the same UID in what Options.Pods lists (the
// API's spec changed).
func (h *harness) set(pod *v1.Pod) {
	for i, p := range h.pods {
		if p.UID == pod.UID {
			h.pods[i] = pod
			return
		}
	}
	h.pods = append(h.pods, pod)
}

// start admits pod and starts its containers at their resources.
func (h *harness) start(t *testing.T, pod *v1.Pod) {
	t.Helper()
	h.pods = append(h.pods, pod)
	if restart, err := h.m.Sync(context.Background(), pod, h.status(pod), linux); err != nil || restart != nil {
		t.Fatalf("first sync: %v %v", restart, err)
	}
	for i := range pod.Spec.Containers {
		h.node.resources[id(pod, pod.Spec.Containers[i].Name)] = linux(pod, &pod.Spec.Containers[i])
	}
}

func id(pod *v1.Pod, name string) string { return string(pod.UID) + "-" + name }

func (h *harness) status(pod *v1.Pod) *runtime.PodStatus {
	rs := &runtime.PodStatus{UID: pod.UID}
	for _, c := range pod.Spec.Containers {
		if r, ok := h.node.resources[id(pod, c.Name)]; ok {
			if h.node.silent {
				r = nil
			}
			rs.Containers = append(rs.Containers, &runtime.ContainerStatus{ID: id(pod, c.Name), Name: c.Name, State: runtime.ContainerRunning, Resources: r})
		}
	}
	return rs
}

func (h *harness) sync(t *testing.T, pod *v1.Pod) ([]string, error) {
	t.Helper()
	h.node.log = nil
	return h.m.Sync(context.Background(), pod, h.status(pod), linux)
}

func resized(pod *v1.Pod, name string, r res4) *v1.Pod {
	p := pod.DeepCopy()
	p.Generation++
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			p.Spec.Containers[i].Resources = r.reqs()
		}
	}
	return p
}

func condition(h *harness, pod *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	st := h.m.Status(pod)
	if st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

func reasons(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.reason)
	}
	return out
}

func TestManagerIncreaseInPlace(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	h.start(t, pod)
	if a, ok := h.store.Get(pod.UID); !ok || !a.Equal(FromPod(pod)) {
		t.Fatalf("first sync recorded %v %v, want the pod's resources", a, ok)
	}

	want := resized(pod, "app", res4{"500m", "1", "128Mi", "256Mi"})
	restart, err := h.sync(t, want)
	if err != nil || restart != nil {
		t.Fatalf("resize sync: %v %v", restart, err)
	}
	cid := id(pod, "app")
	if wantLog := []string{"pod memory", "container " + cid, "pod cpu", "container " + cid}; !slices.Equal(h.node.log, wantLog) {
		t.Errorf("writes %v, want %v", h.node.log, wantLog)
	}
	if got := h.node.resources[cid]; got.GetMemoryLimitInBytes() != 256<<20 || got.GetCpuQuota() != 100000 || got.GetCpuShares() != 512 {
		t.Errorf("container resources %v", got)
	}
	if a, _ := h.store.Get(pod.UID); !a.Equal(FromPod(want)) {
		t.Errorf("allocation %v, want the resized resources", a)
	}
	if c := condition(h, want, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress = %+v after every write succeeded", c)
	}
	if h.m.Allocated(want) != want {
		t.Error("Allocated of an accepted resize is not the pod itself")
	}

	// The runtime now reports the new values: the resize is done.
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	if len(h.node.log) != 0 {
		t.Errorf("a finished resize wrote again: %v", h.node.log)
	}
	if c := condition(h, want, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress stayed: %+v", c)
	}
	if got := reasons(h.rec.events); !slices.Equal(got, []string{EventResizeStarted, EventResizeCompleted}) {
		t.Errorf("events %v", got)
	}
	if !strings.HasPrefix(h.rec.events[0].msg, `Pod resize started: {"containers":[{"name":"app"`) {
		t.Errorf("started event message %q", h.rec.events[0].msg)
	}
}

func TestManagerDecreaseContainersBeforePod(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"500m", "1", "128Mi", "256Mi"}})
	h.start(t, pod)
	want := resized(pod, "app", res4{"100m", "200m", "64Mi", "128Mi"})
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	cid := id(pod, "app")
	if wantLog := []string{"container " + cid, "pod memory", "container " + cid, "pod cpu"}; !slices.Equal(h.node.log, wantLog) {
		t.Errorf("writes %v, want %v", h.node.log, wantLog)
	}
}

func TestManagerInfeasibleAndDeferred(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	other := mkPod(ctr{name: "o", r: res4{"1", "1", "1Gi", "2Gi"}})
	other.UID = "other"
	h.start(t, other)
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	h.start(t, pod)

	huge := resized(pod, "app", res4{"100m", "200m", "64Mi", "128Gi"})
	huge.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = list("0", "8Gi")[v1.ResourceMemory]
	for range 2 {
		if _, err := h.sync(t, huge); err != nil {
			t.Fatal(err)
		}
	}
	c := condition(h, huge, v1.PodResizePending)
	if c == nil || c.Reason != v1.PodReasonInfeasible || c.Message != "Node didn't have enough capacity: memory, requested: 8589934592, capacity: 4294967296" {
		t.Fatalf("PodResizePending = %+v", c)
	}
	if len(h.node.log) != 0 {
		t.Errorf("an infeasible resize wrote %v", h.node.log)
	}
	if a := h.m.Allocated(huge); a.Spec.Containers[0].Resources.Limits.Memory().Value() != 128<<20 {
		t.Errorf("Allocated of an infeasible resize runs at %v, want the old allocation", a.Spec.Containers[0].Resources)
	}
	if got := reasons(h.rec.events); !slices.Equal(got, []string{EventResizeInfeasible}) {
		t.Errorf("events %v, want one ResizeInfeasible", got)
	}

	// Fits the node, not beside the other pod: deferred until it goes.
	big := resized(pod, "app", res4{"1500m", "2", "64Mi", "128Mi"})
	if _, err := h.sync(t, big); err != nil {
		t.Fatal(err)
	}
	if c := condition(h, big, v1.PodResizePending); c == nil || c.Reason != v1.PodReasonDeferred ||
		c.Message != "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000" {
		t.Fatalf("PodResizePending = %+v, want Deferred", c)
	}
	other.Status.Phase = v1.PodSucceeded
	if _, err := h.sync(t, big); err != nil {
		t.Fatal(err)
	}
	if c := condition(h, big, v1.PodResizePending); c != nil {
		t.Errorf("PodResizePending stayed after the room was made: %+v", c)
	}
	if got := reasons(h.rec.events); !slices.Equal(got, []string{EventResizeInfeasible, EventResizeDeferred, EventResizeStarted, EventResizeCompleted}) {
		t.Errorf("events %v", got)
	}
}

func TestManagerRestartPolicy(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}, memPol: v1.RestartContainer})
	h.start(t, pod)
	want := resized(pod, "app", res4{"200m", "400m", "64Mi", "256Mi"})
	restart, err := h.sync(t, want)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restart, []string{"app"}) {
		t.Fatalf("restart %v, want [app]", restart)
	}
	for _, l := range h.node.log {
		if strings.HasPrefix(l, "container") {
			t.Errorf("a container to restart was updated in place: %v", h.node.log)
		}
	}
	if c := condition(h, want, v1.PodResizeInProgress); c == nil {
		t.Error("no PodResizeInProgress while the container restarts")
	}
}

func TestManagerUpdateError(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	h.start(t, pod)
	h.node.failOn = id(pod, "app")
	want := resized(pod, "app", res4{"200m", "400m", "64Mi", "256Mi"})
	if _, err := h.sync(t, want); err == nil || !strings.Contains(err.Error(), "runtime refused") {
		t.Fatalf("sync = %v, want the runtime's error", err)
	}
	c := condition(h, want, v1.PodResizeInProgress)
	if c == nil || c.Reason != ReasonError || !strings.Contains(c.Message, "runtime refused") {
		t.Fatalf("PodResizeInProgress = %+v, want reason Error", c)
	}
	if got := reasons(h.rec.events); !slices.Equal(got, []string{EventResizeStarted, EventResizeError}) {
		t.Errorf("events %v", got)
	}
}

func TestManagerAllocationSurvivesRestart(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	h.start(t, pod)
	// A resize the node cannot take: the pod keeps running at its
	// allocation, also for a new Manager reading the same record.
	huge := resized(pod, "app", res4{"100m", "200m", "64Mi", "128Mi"})
	huge.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = list("3", "0")[v1.ResourceCPU]
	huge.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = list("4", "0")[v1.ResourceCPU]
	if _, err := h.sync(t, huge); err != nil {
		t.Fatal(err)
	}
	store, err := OpenStore(h.store.path)
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Store: store, Containers: h.node})
	if got := m.Allocated(huge).Spec.Containers[0].Resources.Requests.Cpu(); got.MilliValue() != 100 {
		t.Errorf("after a restart the pod runs at cpu %s, want its allocation 100m", got.String())
	}
}

// A runtime that reports no container resources (containerd 1.6): what
// heartlet set is what the container runs with, and each update changes
// one resource in the plan's order.
func TestManagerRuntimeWithoutResources(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	h.node.silent = true
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	h.start(t, pod)
	want := resized(pod, "app", res4{"500m", "1", "128Mi", "256Mi"})
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	if len(h.node.updates) != 2 {
		t.Fatalf("%d container updates, want 2 (memory, then cpu)", len(h.node.updates))
	}
	mem, cpu := h.node.updates[0], h.node.updates[1]
	if mem.GetMemoryLimitInBytes() != 256<<20 || mem.GetCpuQuota() != 20000 {
		t.Errorf("the memory step sent %v, want the new memory limit and the old cpu quota", mem)
	}
	if cpu.GetMemoryLimitInBytes() != 256<<20 || cpu.GetCpuQuota() != 100000 || cpu.GetCpuShares() != 512 {
		t.Errorf("the cpu step sent %v", cpu)
	}
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	if len(h.node.log) != 0 {
		t.Errorf("an applied resize was written again: %v", h.node.log)
	}
	if c := condition(h, want, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress stayed: %+v", c)
	}
	st := h.m.Status(want)
	if got := st.Actuated["app"].Limits[v1.ResourceMemory]; got.Value() != 256<<20 {
		t.Errorf("status actuated memory limit %s, want 256Mi", got.String())
	}
}

// A pod-level resize (spec.resources) writes the pod cgroup (memory
// before cpu; growing before the containers, which are unchanged) and
// the status reports the pod-level allocation and what the pod cgroup
// runs with.
func TestManagerPodLevelResize(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "", "32Mi", ""}})
	pod.Spec.Resources = &v1.ResourceRequirements{Requests: list("200m", "64Mi"), Limits: list("400m", "128Mi")}
	h.start(t, pod)
	want := pod.DeepCopy()
	want.Generation++
	want.Spec.Resources = &v1.ResourceRequirements{Requests: list("300m", "64Mi"), Limits: list("800m", "256Mi")}
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	if wantLog := []string{"pod memory", "pod cpu"}; !slices.Equal(h.node.log, wantLog) {
		t.Errorf("writes %v, want %v", h.node.log, wantLog)
	}
	st := h.m.Status(want)
	if st.PodAllocated == nil || !st.PodAllocated.Limits.Memory().Equal(resource.MustParse("256Mi")) {
		t.Errorf("status pod-level allocation %v, want the new limits", st.PodAllocated)
	}
	if st.PodActual == nil || !st.PodActual.Limits.Cpu().Equal(resource.MustParse("800m")) {
		t.Errorf("status pod-level resources %v, want the new cpu limit", st.PodActual)
	}
	if _, ok := st.Allocated[PodLevel]; ok {
		t.Error("the pod-level resources are reported as a container's")
	}
	if c := condition(h, want, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress = %+v after the writes", c)
	}
	// Applied: nothing more to write.
	if _, err := h.sync(t, want); err != nil {
		t.Fatal(err)
	}
	if len(h.node.log) != 0 {
		t.Errorf("an applied pod-level resize was written again: %v", h.node.log)
	}

	// Down: the pod cgroup's memory limit is checked against its usage.
	down := want.DeepCopy()
	down.Generation++
	down.Spec.Resources.Limits = list("800m", "96Mi")
	h.mem.usage["pod"] = 100 << 20
	if _, err := h.sync(t, down); err == nil || !strings.Contains(err.Error(), "Aborting attempt to set pod memory limit less than current memory usage") {
		t.Fatalf("sync = %v, want the usage check's error", err)
	}
	if st := h.m.Status(down); !st.PodActual.Limits.Memory().Equal(resource.MustParse("256Mi")) {
		t.Errorf("status pod-level memory limit %v after the refused write, want still 256Mi", st.PodActual.Limits.Memory())
	}
}

// A record written before init containers and pod-level resources were
// resizable lacks them: they are adopted at their spec, without a resize.
// A later change of an init container's resources is a resize.
func TestManagerAdoptsOlderRecords(t *testing.T) {
	h := newHarness(t, list("2", "4Gi"))
	pod := mkPod(ctr{name: "app", r: res4{"100m", "200m", "64Mi", "128Mi"}})
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: res4{"50m", "", "", ""}.reqs()}}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: list("1", "1Gi")}
	h.pods = append(h.pods, pod)
	if err := h.store.Set(pod.UID, Allocation{"app": pod.Spec.Containers[0].Resources}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(t, pod); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.store.Get(pod.UID); !a.Equal(FromPod(pod)) {
		t.Errorf("allocation %v, want the init container and pod-level resources adopted", a)
	}
	if len(h.rec.events) != 0 || len(h.node.log) != 0 {
		t.Errorf("adopting an older record resized: events %v, writes %v", reasons(h.rec.events), h.node.log)
	}

	more := pod.DeepCopy()
	more.Generation++
	more.Spec.InitContainers[0].Resources = res4{"80m", "", "", ""}.reqs()
	h.set(more)
	if _, err := h.sync(t, more); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.store.Get(pod.UID); !a.Equal(FromPod(more)) {
		t.Errorf("allocation %v after an init container's resize", a)
	}
	if got := reasons(h.rec.events); !slices.Equal(got, []string{EventResizeStarted, EventResizeCompleted}) {
		t.Errorf("events %v", got)
	}
}

// TestManagerSyncReadsNodePodsOnlyForAResize: a sync of a pod that asks for
// its allocation does not list the node's pods, however many there are; a
// sync that asks for a resize lists them once to count what the others
// hold.
func TestManagerSyncReadsNodePodsOnlyForAResize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		others    int
		resize    bool
		wantLists int
	}{
		{name: "no resize, 1 other pod", others: 1, wantLists: 0},
		{name: "no resize, 100 other pods", others: 100, wantLists: 0},
		{name: "resize, 1 other pod", others: 1, resize: true, wantLists: 1},
		{name: "resize, 100 other pods", others: 100, resize: true, wantLists: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, list("200", "400Gi"))
			lists := 0
			h.m.opts.Pods = func() []*v1.Pod { lists++; return h.pods }
			r := res4{"100m", "200m", "64Mi", "128Mi"}
			for i := range tc.others {
				o := mkPod(ctr{name: "app", r: r})
				o.Name, o.UID = fmt.Sprintf("other-%d", i), types.UID(fmt.Sprintf("other-%d", i))
				h.start(t, o)
			}
			pod := mkPod(ctr{name: "app", r: r})
			h.start(t, pod)
			lists = 0
			next := pod
			if tc.resize {
				next = resized(pod, "app", res4{"200m", "400m", "64Mi", "128Mi"})
				h.set(next)
			}
			if _, err := h.sync(t, next); err != nil {
				t.Fatal(err)
			}
			if lists != tc.wantLists {
				t.Errorf("the sync listed the node's pods %d times, want %d", lists, tc.wantLists)
			}
			if a, _ := h.store.Get(pod.UID); !a.Equal(FromPod(next)) {
				t.Errorf("allocation %v, want the pod's resources %v", a, FromPod(next))
			}
		})
	}
}
