package podlifecycle

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/sysctl"
)

// A pod with a sysctl the node does not allow fails with upstream's reason
// SysctlForbidden (test/e2e/common/node/sysctl.go); allowedUnsafeSysctls
// lets it in.
func TestAdmitSysctls(t *testing.T) {
	safeOnly, err := sysctl.NewAllowlist(nil)
	if err != nil {
		t.Fatal(err)
	}
	unsafe, err := sysctl.NewAllowlist([]string{"kernel.msg*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		allow      *sysctl.Allowlist
		sysctl     string
		wantAdmit  bool
		wantReason string
		wantMsg    string
	}{
		{name: "safe", allow: safeOnly, sysctl: "kernel.shm_rmid_forced", wantAdmit: true},
		{name: "unsafe", allow: safeOnly, sysctl: "kernel.msgmax", wantReason: "SysctlForbidden", wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe allowed", allow: unsafe, sysctl: "kernel.msgmax", wantAdmit: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			statuses := newFakeStatuses()
			a := NewAdmitter(AdmitterOptions{
				Predicates: []Predicate{SysctlPredicate(tc.allow), NodePredicate(110)},
				Desired:    &fakeDesired{}, Workers: newFakeWorkers(), Statuses: statuses,
			})
			p := pod("u1")
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: tc.sysctl, Value: "1"}}}
			if got := a.Admit(t.Context(), p); got != tc.wantAdmit {
				t.Fatalf("Admit = %v, want %v", got, tc.wantAdmit)
			}
			if tc.wantAdmit {
				return
			}
			st, ok := statuses.statuses[p.UID]
			if !ok || st.Phase != v1.PodFailed || st.Reason != tc.wantReason || st.Message != tc.wantMsg {
				t.Errorf("status = %s %s %q, want Failed %s %q", st.Phase, st.Reason, st.Message, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

// The predicates run in order and the first refusal decides; each sees
// the node, the allocatable resources and the active pods.
func TestAdmitPredicates(t *testing.T) {
	node := &v1.Node{}
	node.Name = "n"
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	var calls []string
	record := func(name string, admit bool) Predicate {
		return func(a AdmitAttrs) admission.Result {
			calls = append(calls, name)
			if a.Node != node || !a.Allocatable.Cpu().Equal(resource.MustParse("1")) {
				t.Errorf("predicate %s saw node %v allocatable %v", name, a.Node, a.Allocatable)
			}
			if admit {
				return admission.Result{Admit: true}
			}
			return admission.Result{Reason: "Refused" + name, Message: name}
		}
	}
	tests := []struct {
		name       string
		preds      []Predicate
		wantAdmit  bool
		wantCalls  []string
		wantReason string
	}{
		{name: "none admits", wantAdmit: true},
		{name: "all admit", preds: []Predicate{record("1", true), record("2", true)}, wantAdmit: true, wantCalls: []string{"1", "2"}},
		{name: "first refusal decides", preds: []Predicate{record("1", true), record("2", false), record("3", false)}, wantCalls: []string{"1", "2"}, wantReason: "Refused2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			statuses := newFakeStatuses()
			a := NewAdmitter(AdmitterOptions{
				Predicates: tc.preds, Desired: &fakeDesired{}, Workers: newFakeWorkers(), Statuses: statuses,
				Node: func() *v1.Node { return node }, Allocatable: func() v1.ResourceList { return alloc },
			})
			if got := a.Admit(t.Context(), pod("a")); got != tc.wantAdmit {
				t.Fatalf("Admit = %v, want %v", got, tc.wantAdmit)
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("predicates called %q, want %q", calls, tc.wantCalls)
			}
			if st := statuses.statuses["a"]; st.Reason != tc.wantReason {
				t.Errorf("reason = %q, want %q", st.Reason, tc.wantReason)
			}
		})
	}
}

// Active pods are the desired ones admitted, known to the workers and not
// terminated; a pod rejected earlier does not take the room of the next.
func TestAdmitActive(t *testing.T) {
	desired := &fakeDesired{pods: []*v1.Pod{pod("running"), pod("terminating"), pod("terminated"), pod("unknown"), pod("rejected"), pod("self")}}
	workers := newFakeWorkers()
	workers.set("running", podworker.StateSyncing)
	workers.set("terminating", podworker.StateTerminating)
	workers.set("terminated", podworker.StateTerminated)
	workers.set("rejected", podworker.StateSyncing)
	workers.set("self", podworker.StateSyncing)
	var seen []types.UID
	a := NewAdmitter(AdmitterOptions{
		Predicates: []Predicate{
			refuse("OutOfpods", "rejected"),
			func(at AdmitAttrs) admission.Result {
				seen = nil
				for _, p := range at.Active {
					seen = append(seen, p.UID)
				}
				return admission.Result{Admit: true}
			},
		},
		Desired: desired, Workers: workers, Statuses: newFakeStatuses(),
	})
	if a.Admit(t.Context(), pod("rejected")) {
		t.Fatal("rejected was admitted")
	}
	if !a.Admit(t.Context(), pod("self")) {
		t.Fatal("self was refused")
	}
	if want := []types.UID{"running", "terminating"}; !slices.Equal(seen, want) {
		t.Errorf("active = %v, want %v", seen, want)
	}
	a.Forget("rejected")
	if got := a.Active(""); len(got) != 4 {
		t.Errorf("after Forget active = %d pods, want 4 (running, terminating, rejected, self)", len(got))
	}
}

// The node predicate refuses a pod over the pod capacity, as upstream.
func TestNodePredicateMaxPods(t *testing.T) {
	desired := &fakeDesired{pods: []*v1.Pod{pod("a")}}
	workers := newFakeWorkers()
	workers.set("a", podworker.StateSyncing)
	statuses := newFakeStatuses()
	a := NewAdmitter(AdmitterOptions{Predicates: []Predicate{NodePredicate(1)}, Desired: desired, Workers: workers, Statuses: statuses})
	if a.Admit(t.Context(), pod("b")) {
		t.Fatal("b admitted over a pod capacity of 1")
	}
	if st := statuses.statuses["b"]; st.Reason != admission.ReasonOutOfPods {
		t.Errorf("reason = %q, want %q", st.Reason, admission.ReasonOutOfPods)
	}
}

// The warners are asked about an admitted pod only, and each warning is
// a Warning event on it.
func TestAdmitWarners(t *testing.T) {
	warn := func(msgs ...string) Warner {
		return func(a AdmitAttrs) []Warning {
			var out []Warning
			for _, m := range msgs {
				out = append(out, Warning{Reason: "Unsupported", Message: m + " " + a.Pod.Name})
			}
			return out
		}
	}
	refuse := func(AdmitAttrs) admission.Result { return admission.Result{Reason: "Refused", Message: "no"} }
	tests := []struct {
		name   string
		preds  []Predicate
		warns  []Warner
		events []string
	}{
		{name: "no warning", warns: []Warner{warn()}},
		{name: "each warning an event", warns: []Warner{warn("x", "y"), warn("z")},
			events: []string{"Warning Unsupported x p-a", "Warning Unsupported y p-a", "Warning Unsupported z p-a"}},
		{name: "a rejected pod gets the rejection only", preds: []Predicate{refuse}, warns: []Warner{warn("x")},
			events: []string{"Warning Refused no"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeRecorder{}
			a := NewAdmitter(AdmitterOptions{
				Predicates: tc.preds, Warners: tc.warns, Desired: &fakeDesired{}, Workers: newFakeWorkers(),
				Statuses: newFakeStatuses(), Recorder: rec,
			})
			a.Admit(t.Context(), pod("a"))
			if !slices.Equal(rec.events, tc.events) {
				t.Errorf("events %q, want %q", rec.events, tc.events)
			}
		})
	}
}

// A pod with a pending resize counts at its allocation, as upstream
// (pkg/kubelet/allocation: admission sees the allocated pods): a resize
// that is not accepted yet takes nothing from a new pod, and one accepted
// counts although the spec was not changed back.
func TestAdmitCountsAllocations(t *testing.T) {
	withCPU := func(name, cpu string) *v1.Pod {
		p := pod(name)
		p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}
		return p
	}
	// big asks for 1800m through a pending resize; 200m is allocated.
	allocated := map[types.UID]*v1.Pod{"big": withCPU("big", "200m")}
	for _, tc := range []struct {
		name      string
		allocated func(*v1.Pod) *v1.Pod
		admit     bool
	}{
		{"at the allocation", func(p *v1.Pod) *v1.Pod {
			if a, ok := allocated[p.UID]; ok {
				return a
			}
			return p
		}, true},
		{"at the spec (no resize)", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := &fakeDesired{pods: []*v1.Pod{withCPU("big", "1800m")}}
			workers := newFakeWorkers()
			workers.set("big", podworker.StateSyncing)
			a := NewAdmitter(AdmitterOptions{
				Predicates:  []Predicate{NodePredicate(110)},
				Desired:     desired,
				Workers:     workers,
				Statuses:    newFakeStatuses(),
				Allocatable: func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")} },
				Allocated:   tc.allocated,
			})
			if got := a.Admit(t.Context(), withCPU("new", "1")); got != tc.admit {
				t.Errorf("admitted a 1-cpu pod beside one allocated 200m and asking 1800m: %v, want %v", got, tc.admit)
			}
		})
	}
}
