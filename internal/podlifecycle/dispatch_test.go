package podlifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
)

// refuse is a predicate that rejects the pods named in uids.
func refuse(reason string, uids ...types.UID) Predicate {
	return func(a AdmitAttrs) admission.Result {
		if slices.Contains(uids, a.Pod.UID) {
			return admission.Result{Reason: reason, Message: "no room for " + string(a.Pod.UID)}
		}
		return admission.Result{Admit: true}
	}
}

func deleting(p *v1.Pod, grace int64) *v1.Pod {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	return p
}

func inPhase(p *v1.Pod, phase v1.PodPhase) *v1.Pod {
	p.Status.Phase = phase
	return p
}

func TestDispatch(t *testing.T) {
	add := func(p *v1.Pod) podconfig.Update { return podconfig.Update{Op: podconfig.OpAdd, Pod: p} }
	upd := func(p *v1.Pod) podconfig.Update { return podconfig.Update{Op: podconfig.OpUpdate, Pod: p} }
	rm := func(p *v1.Pod) podconfig.Update { return podconfig.Update{Op: podconfig.OpRemove, Pod: p} }
	tests := []struct {
		name    string
		known   map[types.UID]podworker.State
		refuse  []types.UID
		updates []podconfig.Update
		// want are the worker updates, probe and startup calls, in order.
		wantWorkers []string
		wantProbes  []string
		wantStartup []string
		// wantFailed are the pods reported Failed by admission.
		wantFailed []types.UID
	}{
		{
			name:        "new pod admitted and started",
			updates:     []podconfig.Update{add(pod("a"))},
			wantWorkers: []string{"create a"},
			wantProbes:  []string{"add a"},
			wantStartup: []string{"seen a"},
		},
		{
			name:        "admission rejection reported and never started",
			refuse:      []types.UID{"a"},
			updates:     []podconfig.Update{add(pod("a")), upd(pod("a"))},
			wantStartup: []string{"seen a"},
			wantFailed:  []types.UID{"a"},
		},
		{
			name:        "change of a known pod updates its worker",
			known:       map[types.UID]podworker.State{"a": podworker.StateSyncing},
			updates:     []podconfig.Update{upd(pod("a"))},
			wantWorkers: []string{"update a"},
			wantProbes:  []string{"add a"},
		},
		{
			name:    "change of an unknown pod is ignored",
			updates: []podconfig.Update{upd(pod("a"))},
		},
		{
			name:        "pod removed from its source is terminated and forgotten",
			updates:     []podconfig.Update{add(pod("a")), rm(pod("a"))},
			wantWorkers: []string{"create a", "kill a"},
			wantProbes:  []string{"add a", "remove a"},
			wantStartup: []string{"seen a", "forget a"},
		},
		{
			name:        "known pod deleted in the API is killed with its deletion grace, readiness goes on",
			known:       map[types.UID]podworker.State{"a": podworker.StateSyncing},
			updates:     []podconfig.Update{upd(deleting(pod("a"), 7))},
			wantWorkers: []string{"kill a/7 keep"},
			wantProbes:  []string{"add a"},
		},
		{
			name:        "unknown pod deleted in the API is killed without probes",
			updates:     []podconfig.Update{add(deleting(pod("a"), 0))},
			wantWorkers: []string{"kill a/0 keep"},
		},
		{
			name:        "terminated pod deleted in the API gets no probes, its kill keeps it until its removal",
			known:       map[types.UID]podworker.State{"a": podworker.StateTerminated},
			updates:     []podconfig.Update{upd(deleting(pod("a"), 1)), rm(deleting(pod("a"), 1))},
			wantWorkers: []string{"kill a/1 keep", "kill a"},
			wantProbes:  []string{"remove a"},
			wantStartup: []string{"forget a"},
		},
		{
			name:    "succeeded pod not known is never started",
			updates: []podconfig.Update{add(inPhase(pod("a"), v1.PodSucceeded)), upd(inPhase(pod("a"), v1.PodSucceeded))},
		},
		{
			name:    "failed pod not known is never started",
			updates: []podconfig.Update{add(inPhase(pod("a"), v1.PodFailed))},
		},
		{
			name:        "terminal phase of a known pod goes to its worker",
			known:       map[types.UID]podworker.State{"a": podworker.StateTerminated},
			updates:     []podconfig.Update{upd(inPhase(pod("a"), v1.PodSucceeded))},
			wantWorkers: []string{"update a"},
			wantProbes:  []string{"add a"},
		},
		{
			name:        "removed terminal pod is still terminated",
			known:       map[types.UID]podworker.State{"a": podworker.StateTerminated},
			updates:     []podconfig.Update{rm(inPhase(pod("a"), v1.PodFailed))},
			wantWorkers: []string{"kill a"},
			wantProbes:  []string{"remove a"},
			wantStartup: []string{"forget a"},
		},
		{
			name:    "update without a pod is ignored",
			updates: []podconfig.Update{{Op: podconfig.OpUpdate}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			workers := newFakeWorkers()
			for uid, st := range tc.known {
				workers.set(uid, st)
			}
			statuses := newFakeStatuses()
			rec := &fakeRecorder{}
			probes, startup := &fakeProbes{}, &fakeStartup{}
			adm := NewAdmitter(AdmitterOptions{
				Predicates: []Predicate{refuse("OutOfpods", tc.refuse...)},
				Desired:    &fakeDesired{}, Workers: workers, Statuses: statuses, Recorder: rec,
			})
			d := NewDispatcher(adm, workers, probes, startup)
			for _, u := range tc.updates {
				d.Handle(t.Context(), u)
			}
			if got := workers.log(); !slices.Equal(got, tc.wantWorkers) {
				t.Errorf("worker updates = %q, want %q", got, tc.wantWorkers)
			}
			if !slices.Equal(probes.calls, tc.wantProbes) {
				t.Errorf("probe calls = %q, want %q", probes.calls, tc.wantProbes)
			}
			if !slices.Equal(startup.calls, tc.wantStartup) {
				t.Errorf("startup calls = %q, want %q", startup.calls, tc.wantStartup)
			}
			for _, uid := range tc.wantFailed {
				st, ok := statuses.statuses[uid]
				if !ok || st.Phase != v1.PodFailed || st.Reason != "OutOfpods" || st.Message != "no room for "+string(uid) {
					t.Errorf("status of rejected %s = %+v, want Failed OutOfpods", uid, st)
				}
				if !adm.Rejected(uid) {
					t.Errorf("%s not remembered as rejected", uid)
				}
			}
			if len(statuses.statuses) != len(tc.wantFailed) {
				t.Errorf("statuses set for %d pods, want %d", len(statuses.statuses), len(tc.wantFailed))
			}
			if len(rec.events) != len(tc.wantFailed) {
				t.Errorf("events = %q, want one Warning per rejected pod", rec.events)
			}
		})
	}
}

// A rejected pod is forgotten by admission once it leaves its source.
func TestDispatchRemoveForgetsRejection(t *testing.T) {
	workers := newFakeWorkers()
	adm := NewAdmitter(AdmitterOptions{
		Predicates: []Predicate{refuse("OutOfcpu", "a")},
		Desired:    &fakeDesired{}, Workers: workers, Statuses: newFakeStatuses(),
	})
	d := NewDispatcher(adm, workers, &fakeProbes{}, &fakeStartup{})
	d.Handle(t.Context(), podconfig.Update{Op: podconfig.OpAdd, Pod: pod("a")})
	if !adm.Rejected("a") {
		t.Fatal("a not rejected")
	}
	d.Handle(t.Context(), podconfig.Update{Op: podconfig.OpRemove, Pod: pod("a")})
	if adm.Rejected("a") {
		t.Error("a still remembered as rejected after its removal")
	}
}

// Run handles the updates in order and ends with its context.
func TestDispatcherRun(t *testing.T) {
	workers := newFakeWorkers()
	adm := NewAdmitter(AdmitterOptions{Desired: &fakeDesired{}, Workers: workers, Statuses: newFakeStatuses()})
	d := NewDispatcher(adm, workers, &fakeProbes{}, &fakeStartup{})
	ctx, cancel := context.WithCancel(t.Context())
	updates := make(chan podconfig.Update)
	done := make(chan error)
	go func() { done <- d.Run(ctx, updates) }()
	updates <- podconfig.Update{Op: podconfig.OpAdd, Pod: pod("a")}
	updates <- podconfig.Update{Op: podconfig.OpRemove, Pod: pod("a")}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got, want := workers.log(), []string{"create a", "kill a"}; !slices.Equal(got, want) {
		t.Errorf("worker updates = %q, want %q", got, want)
	}
}
