package nodestatus

import (
	"context"
	"errors"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRegister(t *testing.T) {
	opts := defaultOptions()
	opts.Hostname = "worker-1.example"
	opts.Labels = map[string]string{"team": "blue", v1.LabelHostname: "custom"}
	opts.Taints = []v1.Taint{{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule}}
	opts.ProviderID = "example://zone-a/worker-1"
	f := newFixture(t, opts)
	f.rt.images = []*runtimeapi.Image{{RepoTags: []string{"busybox:1"}, Size: 1000}}

	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.node(t)
	wantLabels := map[string]string{
		v1.LabelHostname:        "custom",
		v1.LabelOSStable:        goruntime.GOOS,
		v1.LabelArchStable:      goruntime.GOARCH,
		"beta.kubernetes.io/os": goruntime.GOOS, "beta.kubernetes.io/arch": goruntime.GOARCH,
		"team": "blue",
	}
	if len(n.Labels) != len(wantLabels) {
		t.Errorf("labels = %v, want %v", n.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if _, ok := n.Labels[v1.LabelInstanceTypeStable]; ok {
		t.Errorf("node has %s", v1.LabelInstanceTypeStable)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	if n.Spec.ProviderID != "example://zone-a/worker-1" {
		t.Errorf("providerID = %q, want the configured one", n.Spec.ProviderID)
	}
	if got := f.count("create", "nodes", ""); got != 1 {
		t.Errorf("creates = %d, want 1", got)
	}
	if got := f.count("patch", "nodes", "status"); got != 0 {
		t.Errorf("status patches right after creation = %d, want 0", got)
	}

	st := n.Status
	for name, want := range map[v1.ResourceName]string{
		v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110",
		v1.ResourceEphemeralStorage: "100Gi", "hugepages-2Mi": "0",
	} {
		if q := st.Capacity[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, q.String(), want)
		}
	}
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "worker-1.example"}}
	if len(st.Addresses) != 2 || st.Addresses[0] != wantAddrs[0] || st.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses = %v, want %v", st.Addresses, wantAddrs)
	}
	info := st.NodeInfo
	if info.MachineID != "0123456789abcdef0123456789abcdef" || info.SystemUUID != "4C4C4544-0000-1000-8000-000000000000" ||
		info.BootID != "boot-1" || info.KernelVersion != "6.1.0-test" || info.OSImage != "Debian GNU/Linux 12 (bookworm)" ||
		info.ContainerRuntimeVersion != "containerd://1.6.20" || info.OperatingSystem != goruntime.GOOS ||
		info.Architecture != goruntime.GOARCH ||
		!strings.HasSuffix(info.KubeletVersion, "+heartlet-v0.1.0") {
		t.Errorf("nodeInfo = %+v", info)
	}
	if st.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("kubelet port = %d, want 10250", st.DaemonEndpoints.KubeletEndpoint.Port)
	}
	if len(st.Images) != 1 || st.Images[0].Names[0] != "busybox:1" {
		t.Errorf("images = %v", st.Images)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, string(c.Type)+"="+string(c.Status)+"/"+c.Reason)
	}
	want := "MemoryPressure=False/KubeletHasSufficientMemory DiskPressure=False/KubeletHasNoDiskPressure PIDPressure=False/KubeletHasSufficientPID Ready=True/KubeletReady"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("conditions = %s, want %s", got, want)
	}
	if r := condition(n, v1.NodeReady); r.Message != "kubelet is posting ready status" || !r.LastTransitionTime.Time.Equal(t0) || !r.LastHeartbeatTime.Time.Equal(t0) {
		t.Errorf("Ready = %+v", r)
	}
	if f.m.Node() == nil || f.m.Node().UID != n.UID {
		t.Errorf("Node() = %v, want the created node", f.m.Node())
	}
	if a := f.m.Allocatable(); a.Memory().Cmp(resource.MustParse("8Gi")) != 0 {
		t.Errorf("Allocatable memory = %v", a.Memory())
	}
}

func TestRegisterExistingNode(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", UID: "old", Labels: map[string]string{
		v1.LabelHostname: "stale", "team": "red", v1.LabelOSStable: goruntime.GOOS,
	}}}
	tests := []struct {
		name      string
		createErr error
	}{
		{"already exists", nil},
		{"create forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "worker-1", errors.New("no"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, defaultOptions(), existing.DeepCopy())
			if tc.createErr != nil {
				f.kube.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.createErr
				})
			}
			if err := f.m.syncStatus(context.Background()); err != nil {
				t.Fatal(err)
			}
			n := f.node(t)
			if n.UID != "old" {
				t.Errorf("UID = %q, the node was replaced", n.UID)
			}
			if n.Labels[v1.LabelHostname] != "worker-1" || n.Labels["team"] != "red" || n.Labels[v1.LabelArchStable] != goruntime.GOARCH {
				t.Errorf("labels = %v: want default labels put back and others kept", n.Labels)
			}
			if r := condition(n, v1.NodeReady); r.Status != v1.ConditionTrue {
				t.Errorf("Ready = %+v, want the status written", r)
			}
			if n.Annotations[AnnotationControllerManagedAttach] != "true" {
				t.Errorf("annotations = %v, want the attach-detach controller to manage the node", n.Annotations)
			}
		})
	}
}

// A new node is managed by the attach-detach controller, and its status
// lists the volumes in use.
func TestVolumesInUse(t *testing.T) {
	opts := defaultOptions()
	inUse := []v1.UniqueVolumeName{"kubernetes.io/csi/d^vol-1"}
	opts.VolumesInUse = func() []v1.UniqueVolumeName { return inUse }
	f := newFixture(t, opts)
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.node(t)
	if n.Annotations[AnnotationControllerManagedAttach] != "true" {
		t.Errorf("annotations = %v", n.Annotations)
	}
	if len(n.Status.VolumesInUse) != 1 || n.Status.VolumesInUse[0] != inUse[0] {
		t.Errorf("volumesInUse = %v, want %v", n.Status.VolumesInUse, inUse)
	}
	inUse = nil
	f.clk.Step(time.Minute)
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.node(t); len(n.Status.VolumesInUse) != 0 {
		t.Errorf("volumesInUse after the volume went = %v", n.Status.VolumesInUse)
	}
}

func TestRegisterFailureBacksOff(t *testing.T) {
	f := newFixture(t, defaultOptions())
	f.kube.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	err := f.m.syncStatus(context.Background())
	if !errors.Is(err, errNotRegistered) || !strings.Contains(err.Error(), "etcd down") {
		t.Fatalf("syncStatus = %v, want errNotRegistered naming the cause", err)
	}
}

func TestAllocatable(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	tests := []struct {
		name     string
		capacity v1.ResourceList
		reserved v1.ResourceList
		evict    map[string]string
		want     map[v1.ResourceName]string
		wantErr  string
	}{
		{name: "nothing reserved", want: map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}},
		{name: "reserved and hard eviction",
			reserved: v1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1Gi"), "ephemeral-storage": resource.MustParse("1Gi")},
			evict:    map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%", "nodefs.inodesFree": "5%"},
			want:     map[v1.ResourceName]string{"cpu": "3500m", "memory": "7068Mi", "pods": "110", "ephemeral-storage": "89Gi"}},
		{name: "memory percentage", evict: map[string]string{"memory.available": "50%"},
			want: map[v1.ResourceName]string{"memory": "4Gi"}},
		{name: "huge pages come out of memory",
			capacity: v1.ResourceList{"memory": resource.MustParse("8Gi"), "hugepages-2Mi": resource.MustParse("1Gi")},
			want:     map[v1.ResourceName]string{"memory": "7Gi", "hugepages-2Mi": "1Gi"}},
		{name: "never negative", reserved: v1.ResourceList{"cpu": resource.MustParse("8")},
			want: map[v1.ResourceName]string{"cpu": "0"}},
		{name: "bad threshold", evict: map[string]string{"memory.available": "lots"}, wantErr: "evictionHard[memory.available]"},
		{name: "bad percentage", evict: map[string]string{"nodefs.available": "120%"}, wantErr: "evictionHard[nodefs.available]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := capacity
			if tc.capacity != nil {
				c = tc.capacity
			}
			got, err := allocatable(c, tc.reserved, tc.evict)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
					t.Errorf("%s = %s, want %s", name, q.String(), w)
				}
			}
		})
	}
}

func TestAllocatableBeforeFirstSync(t *testing.T) {
	opts := defaultOptions()
	opts.Reserved = v1.ResourceList{"memory": resource.MustParse("1Gi")}
	f := newFixture(t, opts)
	a := f.m.Allocatable()
	if q := a[v1.ResourceMemory]; q.Cmp(resource.MustParse("7Gi")) != 0 {
		t.Errorf("allocatable memory = %s, want 7Gi", q.String())
	}
	if len(f.kube.Actions()) != 0 {
		t.Errorf("Allocatable made API calls: %v", f.kube.Actions())
	}
}

func TestReadyTransitions(t *testing.T) {
	var checkErr error
	f := newFixture(t, defaultOptions())
	f.m.ready = []func() error{func() error { return checkErr }}
	rec := record.NewFakeRecorder(100)
	f.m.opts.Recorder = rec

	steps := []struct {
		name           string
		change         func()
		status         v1.ConditionStatus
		message        string
		transitionedAt time.Duration // since t0
		event          string
	}{
		{name: "registered ready", status: v1.ConditionTrue, message: "kubelet is posting ready status", transitionedAt: 0},
		{name: "runtime down", change: func() { f.rt.set(func(r *fakeRuntime) { r.versionErr = errors.New("connection refused") }) },
			status: v1.ConditionFalse, message: "container runtime is down: connection refused", transitionedAt: 10 * time.Second, event: "NodeNotReady"},
		{name: "still down, one more reason", change: func() { checkErr = errors.New("PLEG is not healthy") },
			status: v1.ConditionFalse, message: "[container runtime is down: connection refused, PLEG is not healthy]", transitionedAt: 10 * time.Second},
		{name: "back", change: func() { f.rt.set(func(r *fakeRuntime) { r.versionErr = nil }); checkErr = nil },
			status: v1.ConditionTrue, message: "kubelet is posting ready status", transitionedAt: 30 * time.Second, event: "NodeReady"},
		{name: "network not ready", change: func() { f.rt.set(func(r *fakeRuntime) { r.network = false }) },
			status: v1.ConditionFalse, message: "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni config uninitialized",
			transitionedAt: 40 * time.Second, event: "NodeNotReady"},
		{name: "memory unknown", change: func() { f.rt.set(func(r *fakeRuntime) { r.network = true }); f.host.setFile(meminfoFile, "") },
			status: v1.ConditionFalse, message: "missing node capacity for resources: memory", transitionedAt: 40 * time.Second},
	}
	for i, s := range steps {
		if i > 0 {
			f.clk.Step(10 * time.Second)
		}
		if s.change != nil {
			s.change()
		}
		if s.name == "memory unknown" {
			// A Node whose capacity was never reported.
			n := f.node(t)
			delete(n.Status.Capacity, v1.ResourceMemory)
			if _, err := f.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for len(rec.Events) > 0 {
			<-rec.Events
		}
		if err := f.m.syncStatus(context.Background()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		r := condition(f.node(t), v1.NodeReady)
		if r.Status != s.status || r.Message != s.message {
			t.Errorf("%s: Ready = %s %q, want %s %q", s.name, r.Status, r.Message, s.status, s.message)
		}
		if want := t0.Add(s.transitionedAt); !r.LastTransitionTime.Time.Equal(want) {
			t.Errorf("%s: lastTransitionTime = %v, want %v", s.name, r.LastTransitionTime.Time, want)
		}
		if want := f.clk.Now(); !r.LastHeartbeatTime.Time.Equal(want) {
			t.Errorf("%s: lastHeartbeatTime = %v, want %v", s.name, r.LastHeartbeatTime.Time, want)
		}
		if s.event != "" {
			select {
			case e := <-rec.Events:
				if !strings.Contains(e, s.event) {
					t.Errorf("%s: event %q, want %s", s.name, e, s.event)
				}
			default:
				t.Errorf("%s: no %s event", s.name, s.event)
			}
		}
	}
}

func TestPressureConditions(t *testing.T) {
	p := &fakePressure{}
	opts := defaultOptions()
	opts.Pressure = p
	f := newFixture(t, opts)
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.mem, p.pid = true, true
	f.clk.Step(10 * time.Second)
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.node(t)
	for _, want := range []struct {
		t      v1.NodeConditionType
		status v1.ConditionStatus
		reason string
	}{
		{v1.NodeMemoryPressure, v1.ConditionTrue, "KubeletHasInsufficientMemory"},
		{v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{v1.NodePIDPressure, v1.ConditionTrue, "KubeletHasInsufficientPID"},
	} {
		c := condition(n, want.t)
		if c.Status != want.status || c.Reason != want.reason {
			t.Errorf("%s = %s/%s, want %s/%s", want.t, c.Status, c.Reason, want.status, want.reason)
		}
		wantTransition := t0
		if want.status == v1.ConditionTrue {
			wantTransition = t0.Add(10 * time.Second)
		}
		if !c.LastTransitionTime.Time.Equal(wantTransition) {
			t.Errorf("%s lastTransitionTime = %v, want %v", want.t, c.LastTransitionTime.Time, wantTransition)
		}
	}
}

type fakePressure struct{ mem, disk, pid bool }

func (p *fakePressure) MemoryPressure() bool { return p.mem }
func (p *fakePressure) DiskPressure() bool   { return p.disk }
func (p *fakePressure) PIDPressure() bool    { return p.pid }

func TestPatchOnlyOnChangeOrReportFrequency(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		advance   time.Duration
		change    func()
		wantPatch bool
	}{
		{name: "nothing changed", advance: 10 * time.Second},
		{name: "still nothing", advance: 10 * time.Second},
		{name: "new image", advance: 10 * time.Second, change: func() {
			f.rt.set(func(r *fakeRuntime) { r.images = []*runtimeapi.Image{{RepoTags: []string{"nginx:1"}, Size: 5}} })
		}, wantPatch: true},
		{name: "heartbeat only", advance: 10 * time.Second},
		{name: "just before report frequency", advance: 5*time.Minute - 10*time.Second - time.Nanosecond},
		{name: "report frequency elapsed", advance: time.Nanosecond, wantPatch: true},
		{name: "after the report", advance: 10 * time.Second},
		{name: "boot id changed", advance: 10 * time.Second, change: func() { f.host.setFile(bootIDFile, "boot-2") }, wantPatch: true},
	}
	var lastHeartbeat time.Time
	for _, s := range steps {
		f.clk.Step(s.advance)
		if s.change != nil {
			s.change()
		}
		before := f.count("patch", "nodes", "status")
		if err := f.m.syncStatus(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		patched := f.count("patch", "nodes", "status") - before
		if patched != 0 && !s.wantPatch || s.wantPatch && patched != 1 {
			t.Errorf("%s: %d patches, want patch=%v", s.name, patched, s.wantPatch)
		}
		r := condition(f.node(t), v1.NodeReady)
		if s.wantPatch {
			if !r.LastHeartbeatTime.Time.Equal(f.clk.Now()) {
				t.Errorf("%s: heartbeat %v, want %v", s.name, r.LastHeartbeatTime.Time, f.clk.Now())
			}
			if !r.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("%s: transition time moved to %v", s.name, r.LastTransitionTime.Time)
			}
		} else if !lastHeartbeat.IsZero() && !r.LastHeartbeatTime.Time.Equal(lastHeartbeat) {
			t.Errorf("%s: heartbeat moved without a patch", s.name)
		}
		lastHeartbeat = r.LastHeartbeatTime.Time
	}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "nodes" {
			t.Errorf("node was updated (%s), want only patches", a.GetSubresource())
		}
	}
}

// TestStatusAfterOutageReadsTheAPI: while the API server is unreachable
// the watch is down too, so its copy of the Node misses what others wrote
// meanwhile (the node lifecycle controller marks the node Unknown). The
// first status sync after the outage reads the Node from the API and
// reports Ready again; once the watch delivers, its copy is used again.
func TestStatusAfterOutageReadsTheAPI(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	watch := func() {
		if err := f.m.informer.GetStore().Add(f.node(t)); err != nil {
			t.Fatal(err)
		}
		f.m.watched()
	}
	watch()
	gets := func() int { return f.count("get", "nodes", "") }

	before := gets()
	f.clk.Step(10 * time.Second)
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if n := gets() - before; n != 0 {
		t.Errorf("with the watch current, the Node was read %d times, want 0", n)
	}

	down := true
	f.kube.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down {
			return true, nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		}
		return false, nil, nil
	})
	// The status is unchanged, so only the Lease renewals call the API
	// during the outage, and fail.
	f.clk.Step(10 * time.Second)
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatalf("syncStatus of an unchanged status called the API: %v", err)
	}
	if err := f.m.updateLease(ctx, nil); err == nil {
		t.Fatal("Lease renewal during the outage succeeded")
	}
	down = false
	// The node lifecycle controller, back first, marks the node Unknown;
	// the watch has not delivered it.
	lost := f.node(t)
	for i := range lost.Status.Conditions {
		if lost.Status.Conditions[i].Type == v1.NodeReady {
			lost.Status.Conditions[i].Status = v1.ConditionUnknown
			lost.Status.Conditions[i].Reason = "NodeStatusUnknown"
		}
	}
	if _, err := f.kube.CoreV1().Nodes().UpdateStatus(ctx, lost, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The first renewal that succeeds asks for the status at once.
	if err := f.m.updateLease(ctx, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.m.trigger:
	default:
		t.Error("the Lease renewal after the outage did not trigger a status update")
	}
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if r := condition(f.node(t), v1.NodeReady); r.Status != v1.ConditionTrue {
		t.Errorf("Ready after the outage = %s (%s), want True", r.Status, r.Reason)
	}

	watch()
	before = gets()
	f.clk.Step(10 * time.Second)
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if n := gets() - before; n != 0 {
		t.Errorf("once the watch delivered again, the Node was read %d times, want 0", n)
	}
}

func TestStatusPatchIsStrategicOnStatus(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(6 * time.Minute)
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	var patch k8stesting.PatchAction
	for _, a := range f.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patch = p
		}
	}
	if patch == nil {
		t.Fatal("no patch")
	}
	if patch.GetSubresource() != "status" || patch.GetPatchType() != "application/strategic-merge-patch+json" {
		t.Errorf("patch on %q of type %q", patch.GetSubresource(), patch.GetPatchType())
	}
	body := string(patch.GetPatch())
	if !strings.Contains(body, `"lastHeartbeatTime"`) || strings.Contains(body, `"spec"`) || strings.Contains(body, `"capacity"`) {
		t.Errorf("patch = %s, want heartbeats only", body)
	}
}

func TestStatusPatchReplacesAddresses(t *testing.T) {
	orig := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n"},
	}}}
	node := orig.DeepCopy()
	node.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeInternalIP, Address: "fd00::2"}, {Type: v1.NodeHostName, Address: "n"},
	}
	f := newFixture(t, defaultOptions(), orig)
	got, err := f.m.heartbeat.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.m.opts.NodeName = "n"
	updated, err := f.m.patchStatus(context.Background(), got, node)
	if err != nil {
		t.Fatal(err)
	}
	if len(updated.Status.Addresses) != 3 || updated.Status.Addresses[0].Address != "10.0.0.2" || updated.Status.Addresses[1].Address != "fd00::2" {
		t.Errorf("addresses after patch = %v, want %v", updated.Status.Addresses, node.Status.Addresses)
	}
}

func TestStatusUpdateRetries(t *testing.T) {
	tests := []struct {
		name          string
		failures      int
		wantErr       bool
		wantPatches   int
		wantRepeated  int
		wantFreshGets int
	}{
		{name: "first try fails", failures: 1, wantPatches: 2, wantRepeated: 0},
		{name: "two tries fail", failures: 2, wantPatches: 3, wantRepeated: 1},
		{name: "every try fails", failures: 99, wantErr: true, wantPatches: 5, wantRepeated: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repeated := 0
			opts := defaultOptions()
			opts.OnRepeatedFailure = func() { repeated++ }
			f := newFixture(t, opts)
			ctx := context.Background()
			if err := f.m.syncStatus(ctx); err != nil {
				t.Fatal(err)
			}
			failures := tc.failures
			f.kube.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				if failures > 0 {
					failures--
					return true, nil, apierrors.NewServiceUnavailable("busy")
				}
				return false, nil, nil
			})
			f.clk.Step(6 * time.Minute)
			err := f.m.syncStatus(ctx)
			if (err != nil) != tc.wantErr {
				t.Fatalf("syncStatus = %v, want error %v", err, tc.wantErr)
			}
			if got := f.count("patch", "nodes", "status"); got != tc.wantPatches {
				t.Errorf("patches = %d, want %d", got, tc.wantPatches)
			}
			if repeated != tc.wantRepeated {
				t.Errorf("OnRepeatedFailure called %d times, want %d", repeated, tc.wantRepeated)
			}
		})
	}
}

func TestReregisterAfterDelete(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	first := f.node(t).UID
	if err := f.kube.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(10 * time.Second)
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	n := f.node(t)
	if n.UID == first || n.UID == "" {
		t.Errorf("UID = %q, want a new node (old %q)", n.UID, first)
	}
	if got := f.count("create", "nodes", ""); got != 2 {
		t.Errorf("creates = %d, want 2", got)
	}
	if condition(n, v1.NodeReady).Status != v1.ConditionTrue {
		t.Error("re-registered node has no Ready status")
	}
}

func TestNoRegisterNode(t *testing.T) {
	opts := defaultOptions()
	opts.RegisterNode = false
	f := newFixture(t, opts)
	err := f.m.syncStatus(context.Background())
	if !errors.Is(err, errNotRegistered) {
		t.Errorf("syncStatus = %v, want errNotRegistered", err)
	}
	if got := f.count("create", "nodes", ""); got != 0 {
		t.Errorf("creates = %d, want 0", got)
	}
}

func TestLease(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	getLease := func() *coordinationv1.Lease {
		t.Helper()
		l, err := f.kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("getting lease: %v", err)
		}
		return l
	}

	f.m.syncLease(ctx)
	l := getLease()
	if *l.Spec.HolderIdentity != "worker-1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	nodeUID := f.node(t).UID
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].APIVersion != "v1" ||
		l.OwnerReferences[0].Name != "worker-1" || l.OwnerReferences[0].UID != nodeUID {
		t.Errorf("owner references = %+v, want the node %s", l.OwnerReferences, nodeUID)
	}
	if f.m.renewInterval() != 10*time.Second {
		t.Errorf("renew interval = %v, want 10s", f.m.renewInterval())
	}

	f.clk.Step(10 * time.Second)
	f.m.syncLease(ctx)
	if l := getLease(); !l.Spec.RenewTime.Time.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("renewTime = %v, want advanced by 10s", l.Spec.RenewTime.Time)
	}
	if c, u := f.count("create", "leases", ""), f.count("update", "leases", ""); c != 1 || u != 1 {
		t.Errorf("creates, updates = %d, %d; want 1, 1", c, u)
	}

	// A conflict: someone else wrote the lease; heartlet reads it again.
	conflicts := 1
	f.kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "worker-1", errors.New("changed"))
		}
		return false, nil, nil
	})
	f.clk.Step(10 * time.Second)
	f.m.syncLease(ctx)
	if l := getLease(); !l.Spec.RenewTime.Time.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("after a conflict renewTime = %v, want renewed", l.Spec.RenewTime.Time)
	}

	// The node is registered again with another UID: the owner follows.
	if err := f.kube.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.m.syncStatus(ctx); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(10 * time.Second)
	f.m.syncLease(ctx)
	newUID := f.node(t).UID
	if l := getLease(); len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != newUID {
		t.Errorf("owner references = %+v, want the new node %s", l.OwnerReferences, newUID)
	}
}

// TestLeaseWait: after a renewal the lease loop waits the renew interval
// plus up to 4 % of it, as upstream's lease controller.
func TestLeaseWait(t *testing.T) {
	for _, tt := range []struct {
		jitter float64
		want   time.Duration
	}{
		{0, 10 * time.Second},
		{0.5, 10200 * time.Millisecond},
		{0.999, 10*time.Second + 399600*time.Microsecond},
	} {
		f := newFixture(t, defaultOptions())
		f.m.jitter = func() float64 { return tt.jitter }
		if got := f.m.leaseWait(); got != tt.want {
			t.Errorf("jitter %v: wait %v, want %v", tt.jitter, got, tt.want)
		}
	}
}

func TestLeaseRecreatedWhenDeleted(t *testing.T) {
	f := newFixture(t, defaultOptions())
	ctx := context.Background()
	f.m.syncLease(ctx)
	if err := f.kube.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clk.Step(10 * time.Second)
	f.m.syncLease(ctx)
	l, err := f.kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease not recreated: %v", err)
	}
	if !l.Spec.RenewTime.Time.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("renewTime = %v", l.Spec.RenewTime.Time)
	}
	if len(l.OwnerReferences) != 0 {
		t.Errorf("owner references = %v without a node", l.OwnerReferences)
	}
}

// TestRun drives the loops on the fake clock: registration and the lease
// at start, then a lease renewal and a status computation every 10 s.
func TestRun(t *testing.T) {
	f := newFixture(t, defaultOptions())
	leaseWrites := make(chan string, 100)
	f.kube.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			leaseWrites <- a.GetVerb()
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.m.Run(ctx) }()

	wait := func(what string, ch <-chan string, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("%s: %s, want %s", what, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: timed out", what)
		}
	}
	wait("lease at start", leaseWrites, "create")
	// Both loops wait on their timers (the informer runs on the real clock).
	waitForWaiters(t, f, 2)
	if f.m.Node() == nil {
		t.Fatal("no node after start")
	}
	computed := f.rt.calls()
	f.clk.Step(10 * time.Second)
	wait("lease renewal", leaseWrites, "update")
	waitForWaiters(t, f, 2)
	if f.rt.calls() == computed {
		t.Error("no status computation 10s later")
	}
	// A trigger computes the status at once.
	computed = f.rt.calls()
	f.m.Trigger()
	deadline := time.Now().Add(10 * time.Second)
	for f.rt.calls() == computed {
		if time.Now().After(deadline) {
			t.Fatal("Trigger did not compute the status")
		}
		goruntime.Gosched()
	}
	waitForWaiters(t, f, 2)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err := f.m.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

// waitForWaiters waits until n timers wait on the fake clock.
func waitForWaiters(t *testing.T, f *fixture, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.clk.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers wait on the clock, want %d", f.clk.Waiters(), n)
		}
		goruntime.Gosched()
	}
}

// The node declares the features it was given, sorted, as
// status.declaredFeatures; the API server checks pod updates against them.
func TestStatusDeclaresFeatures(t *testing.T) {
	opts := defaultOptions()
	opts.DeclaredFeatures = []string{"InPlacePodVerticalScalingInitContainers", "InPlacePodLevelResourcesVerticalScaling"}
	f := newFixture(t, opts)
	if err := f.m.syncStatus(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, err := f.kube.CoreV1().Nodes().Get(context.Background(), "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers"}; !slices.Equal(n.Status.DeclaredFeatures, want) {
		t.Errorf("declaredFeatures = %v, want %v", n.Status.DeclaredFeatures, want)
	}
}

// The node informer's transform drops the managed fields of the Node and
// leaves the rest, and anything else, as it was.
func TestDropManagedFields(t *testing.T) {
	node := func(mf []metav1.ManagedFieldsEntry) *v1.Node {
		return &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, ManagedFields: mf},
			Status:     v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"busybox"}}}},
		}
	}
	mf := []metav1.ManagedFieldsEntry{{Manager: "heartlet", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
	for _, tc := range []struct {
		name     string
		in, want any
	}{
		{"node with managed fields", node(mf), node(nil)},
		{"node without", node(nil), node(nil)},
		{"other object", &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf}}, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: mf}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dropManagedFields(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("dropManagedFields = %#v, want %#v", got, tc.want)
			}
		})
	}
}
