package podlifecycle

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/podworker"
)

// Admission writes its decision, with the predicate's reason, to the
// pod's journal.
func TestAdmitJournal(t *testing.T) {
	refuse := func(AdmitAttrs) admission.Result {
		return admission.Result{Reason: "OutOfpods", Message: "Node didn't have enough resource: pods"}
	}
	tests := []struct {
		name        string
		preds       []Predicate
		wantReason  string
		wantMessage string
	}{
		{"admitted", nil, "", "admitted"},
		{"rejected", []Predicate{refuse}, "OutOfpods", "rejected: Node didn't have enough resource: pods"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := journal.New(8, testclock.NewFakePassiveClock(time.Unix(0, 0)))
			a := NewAdmitter(AdmitterOptions{Predicates: tc.preds, Desired: &fakeDesired{}, Workers: newFakeWorkers(), Statuses: newFakeStatuses(), Journal: j})
			a.Admit(t.Context(), pod("a"))
			got := j.Entries("a")
			if len(got) != 1 || got[0].Kind != journal.KindAdmission || got[0].Reason != tc.wantReason || got[0].Message != tc.wantMessage {
				t.Fatalf("journal = %+v, want one admission entry %q (%q)", got, tc.wantMessage, tc.wantReason)
			}
		})
	}
}

// Housekeeping drops the journal of a pod no source wants and no worker
// knows, and keeps the others'.
func TestHousekeepingForgetsJournal(t *testing.T) {
	j := journal.New(8, testclock.NewFakePassiveClock(time.Unix(0, 0)))
	for _, uid := range []types.UID{"wanted", "terminating", "gone"} {
		j.Record(uid, journal.Entry{Kind: journal.KindAdmission, Message: "admitted"})
	}
	workers := newFakeWorkers()
	workers.states["terminating"] = podworker.StateTerminating
	h := NewHousekeeper(HousekeeperOptions{
		Desired:  &fakeDesired{pods: podsOf("wanted"), seen: []string{"file"}},
		Sources:  []string{"file"},
		Workers:  workers,
		Statuses: newFakeStatuses(),
		Journal:  j,
	})
	h.Once(t.Context())
	if got := j.Pods(); !slices.Equal(got, []types.UID{"terminating", "wanted"}) {
		t.Errorf("journal pods = %v, want [terminating wanted]", got)
	}
}

func podsOf(uids ...string) []*v1.Pod {
	var out []*v1.Pod
	for _, u := range uids {
		out = append(out, pod(u))
	}
	return out
}
