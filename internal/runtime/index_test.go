package runtime

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// lists counts the list calls in calls.
func lists(calls []string) int {
	return countCalls(calls, "ListPodSandbox") + countCalls(calls, "ListContainers")
}

// podIDs is the sorted IDs of a pod status's sandboxes and containers.
func podIDs(st *PodStatus) []string {
	var ids []string
	for _, s := range st.Sandboxes {
		ids = append(ids, "sandbox "+s.ID)
	}
	for _, c := range st.Containers {
		ids = append(ids, "container "+c.ID+" in "+c.SandboxID)
	}
	slices.Sort(ids)
	return ids
}

// TestGetPodStatusFromIndex: once a full list has primed it, GetPodStatus
// lists nothing, sees what was created and removed through the Runtime at
// once and what others did at the next full list (or when the runtime
// answers NotFound), and reports what the listing path reports.
func TestGetPodStatusFromIndex(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	// other is another client of the same runtime: what it does, w.r only
	// learns from the runtime.
	other, err := New(ctx, w.srv.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(ctx) })
	ow := &world{r: other, srv: w.srv}

	pod := testPod("web", "uid-web")
	sb0 := w.sandbox(t, pod, 0, false)
	w.container(t, pod, sb0, &pod.Spec.Containers[0], 0, false, true)
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}

	// want is the pod's status as a Runtime that never listed in full
	// (the filtered lists) reports it.
	want := func() []string {
		t.Helper()
		fresh, err := New(ctx, w.srv.Endpoint(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close(ctx)
		st, err := fresh.GetPodStatus(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		return podIDs(st)
	}
	check := func(step string) {
		t.Helper()
		w.srv.ResetCalls()
		st, err := w.r.GetPodStatus(ctx, pod.UID)
		if err != nil {
			t.Fatalf("%s: GetPodStatus: %v", step, err)
		}
		if n := lists(w.srv.Calls()); n != 0 {
			t.Errorf("%s: %d list calls, want none", step, n)
		}
		if got, want := podIDs(st), want(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", step, got, want)
		}
	}
	check("primed")

	sb1 := w.sandbox(t, pod, 1, false)
	c1 := w.container(t, pod, sb1, &pod.Spec.Containers[0], 1, false, true)
	check("created through the Runtime")

	if err := w.r.RemoveContainer(ctx, c1); err != nil {
		t.Fatal(err)
	}
	check("container removed through the Runtime")

	w.container(t, pod, sb1, &pod.Spec.Containers[0], 2, false, true)
	if err := w.r.StopPodSandbox(ctx, sb0); err != nil {
		t.Fatal(err)
	}
	if err := w.r.RemovePodSandbox(ctx, sb0); err != nil {
		t.Fatal(err)
	}
	check("sandbox removed with its container through the Runtime")

	// Another client's sandbox is unknown until the next full list.
	sb2 := ow.sandbox(t, pod, 2, false)
	st, err := w.r.GetPodStatus(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(podIDs(st), "sandbox "+sb2) {
		t.Errorf("a sandbox another client made is known before a full list")
	}
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}
	check("another client's sandbox after a full list")

	// Another client removes a sandbox whose status was read: the index
	// learns it at the next full list.
	if err := other.StopPodSandbox(ctx, sb2); err != nil {
		t.Fatal(err)
	}
	if err := other.RemovePodSandbox(ctx, sb2); err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}
	check("another client's removal after a full list")

	// Another client removes a sandbox the index knows but whose status
	// was never read: its status call answers NotFound and it is
	// forgotten.
	sb3 := ow.sandbox(t, pod, 3, false)
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.StopPodSandbox(ctx, sb3); err != nil {
		t.Fatal(err)
	}
	if err := other.RemovePodSandbox(ctx, sb3); err != nil {
		t.Fatal(err)
	}
	check("another client's removal of a sandbox never read")
	w.srv.ResetCalls()
	if _, err := w.r.GetPodStatus(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := countCalls(w.srv.Calls(), "PodSandboxStatus"); got != 0 {
		t.Errorf("sandbox status calls after the NotFound = %d, want 0 (the gone sandbox is forgotten, the others' statuses kept)", got)
	}
}

func countCalls(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

// TestGetPodStatusListsUntilPrimed: before any full list, GetPodStatus
// lists with the pod's UID label, as it always did.
func TestGetPodStatusListsUntilPrimed(t *testing.T) {
	w := newWorld(t)
	pod := testPod("web", "uid-web")
	w.sandbox(t, pod, 0, false)
	w.srv.ResetCalls()
	if _, err := w.r.GetPodStatus(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if n := lists(w.srv.Calls()); n != 2 {
		t.Errorf("list calls before a full list = %d, want 2", n)
	}
}

// TestIndexReplace: a full list replaces the index with what it saw, plus
// what was created through the Runtime while it ran, minus what was
// removed while it ran.
func TestIndexReplace(t *testing.T) {
	sandbox := func(uid, id string) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, Labels: map[string]string{LabelPodUID: uid}}
	}
	container := func(uid, sb, id string) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, PodSandboxId: sb, Labels: map[string]string{LabelPodUID: uid}}
	}
	tests := []struct {
		name string
		// during runs between begin and replace.
		during     func(x *objectIndex)
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		want       map[types.UID][]string
	}{
		{
			name:       "what the list saw",
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("a", "sa"), sandbox("b", "sb"), {Id: "foreign"}},
			containers: []*runtimeapi.Container{container("a", "sa", "ca")},
			want:       map[types.UID][]string{"a": {"ca", "sa"}, "b": {"sb"}},
		},
		{
			name:      "created while listing",
			during:    func(x *objectIndex) { x.addContainer("a", container("a", "sa", "new")) },
			sandboxes: []*runtimeapi.PodSandbox{sandbox("a", "sa")},
			want:      map[types.UID][]string{"a": {"new", "sa"}},
		},
		{
			name:       "removed while listing",
			during:     func(x *objectIndex) { x.remove("ca") },
			sandboxes:  []*runtimeapi.PodSandbox{sandbox("a", "sa")},
			containers: []*runtimeapi.Container{container("a", "sa", "ca")},
			want:       map[types.UID][]string{"a": {"sa"}},
		},
		{
			name:      "created before the list, gone from it",
			sandboxes: []*runtimeapi.PodSandbox{sandbox("b", "sb")},
			want:      map[types.UID][]string{"b": {"sb"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newObjectIndex()
			x.addSandbox("old", "s-old") // before the list: the list decides
			mark := x.begin()
			if tt.during != nil {
				tt.during(x)
			}
			x.replace(mark, tt.sandboxes, tt.containers)
			got := map[types.UID][]string{}
			for uid := range x.pods {
				sbs, cs, ok := x.lookup(uid)
				if !ok {
					t.Fatal("not primed after replace")
				}
				var ids []string
				for _, sb := range sbs {
					ids = append(ids, sb.id)
				}
				for _, c := range cs {
					ids = append(ids, c.listed.GetId())
				}
				slices.Sort(ids)
				got[uid] = ids
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("index = %v, want %v", got, tt.want)
			}
		})
	}
}
