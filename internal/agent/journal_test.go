package agent

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/journal"
)

func TestJournalLookup(t *testing.T) {
	j := journal.New(4, testclock.NewFakePassiveClock(time.Unix(100, 0)))
	j.Record("new", journal.Entry{Kind: journal.KindAdmission, Message: "admitted"})
	j.Record("old", journal.Entry{Kind: journal.KindAdmission, Message: "rejected: x"})
	mk := func(ns, name string, uid types.UID) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
	}
	desired := func() []*v1.Pod { return []*v1.Pod{mk("ns", "web", "new")} }
	statuses := func() []*v1.Pod { return []*v1.Pod{mk("ns", "web", "old"), mk("ns", "done", "old")} }
	lookup := journalLookup(j, desired, statuses)
	tests := []struct {
		ns, name string
		wantOK   bool
		wantUID  types.UID
		wantMsg  string
	}{
		{"ns", "web", true, "new", "admitted"}, // the desired pod before an older one of the same name
		{"ns", "done", true, "old", "rejected: x"},
		{"other", "web", false, "", ""},
		{"ns", "missing", false, "", ""},
	}
	for _, tt := range tests {
		pj, ok := lookup(tt.ns, tt.name)
		if ok != tt.wantOK || pj.UID != tt.wantUID {
			t.Errorf("lookup(%s/%s) = %v %q, want %v %q", tt.ns, tt.name, ok, pj.UID, tt.wantOK, tt.wantUID)
			continue
		}
		if ok && (len(pj.Entries) != 1 || pj.Entries[0].Message != tt.wantMsg || !pj.Now.Equal(time.Unix(100, 0))) {
			t.Errorf("lookup(%s/%s) = %+v, want the entry %q", tt.ns, tt.name, pj, tt.wantMsg)
		}
	}
}
