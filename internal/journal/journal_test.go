package journal

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

func messages(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

func TestRecordKeepsNewestEntriesInOrder(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		records int
		want    []string
	}{
		{"fewer than size", 4, 2, []string{"m0", "m1"}},
		{"exactly size", 3, 3, []string{"m0", "m1", "m2"}},
		{"wraps once", 3, 5, []string{"m2", "m3", "m4"}},
		{"wraps many times", 2, 9, []string{"m7", "m8"}},
		{"size one", 1, 4, []string{"m3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.NewFakePassiveClock(t0)
			j := New(tt.size, clk)
			for i := range tt.records {
				clk.SetTime(t0.Add(time.Duration(i) * time.Second))
				j.Record("u1", Entry{Kind: KindContainer, Message: fmt.Sprintf("m%d", i)})
			}
			got := j.Entries("u1")
			if fmt.Sprint(messages(got)) != fmt.Sprint(tt.want) {
				t.Fatalf("entries = %v, want %v", messages(got), tt.want)
			}
			for i := 1; i < len(got); i++ {
				if !got[i].Time.After(got[i-1].Time) {
					t.Errorf("entry %d at %v is not after entry %d at %v", i, got[i].Time, i-1, got[i-1].Time)
				}
			}
		})
	}
}

func TestRepeatsAreFolded(t *testing.T) {
	clk := testclock.NewFakePassiveClock(t0)
	j := New(3, clk)
	rec := func(msg string, at time.Duration) {
		clk.SetTime(t0.Add(at))
		j.Record("u", Entry{Kind: KindBackoff, Message: msg, Container: "c"})
	}
	rec("a", 0)
	rec("back-off", time.Second)
	rec("back-off", 2*time.Second)
	rec("back-off", 3*time.Second)
	// Three more distinct entries wrap the ring past the folded one.
	rec("b", 4*time.Second)
	got := j.Entries("u")
	if len(got) != 3 {
		t.Fatalf("entries = %+v, want 3", got)
	}
	f := got[1]
	if f.Message != "back-off" || f.Count != 3 || !f.First.Equal(t0.Add(time.Second)) || !f.Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("folded entry = %+v, want count 3 from +1s to +3s", f)
	}
	// A different container is not a repeat.
	j.Record("u", Entry{Kind: KindBackoff, Message: "b", Container: "other"})
	if got := j.Entries("u"); len(got) != 3 || got[2].Container != "other" || got[2].Count != 0 {
		t.Errorf("entries = %+v, want a new entry for the other container", got)
	}
	// Folding also works once the ring has wrapped.
	j.Record("u", Entry{Kind: KindBackoff, Message: "b", Container: "other"})
	if got := j.Entries("u"); got[2].Count != 2 || got[1].Message != "b" {
		t.Errorf("entries after wrap = %+v, want the last folded", got)
	}
}

func TestRecordKeepsGivenTimeAndIgnoresCallerCount(t *testing.T) {
	j := New(4, testclock.NewFakePassiveClock(t0))
	at := t0.Add(-time.Minute)
	j.Record("u", Entry{Time: at, Kind: KindImage, Message: "pulled", Count: 7, First: t0})
	got := j.Entries("u")[0]
	if !got.Time.Equal(at) || got.Count != 0 || !got.First.IsZero() {
		t.Errorf("entry = %+v, want the given time and no count", got)
	}
}

func TestForgetAndPods(t *testing.T) {
	j := New(2, testclock.NewFakePassiveClock(t0))
	j.Record("b", Entry{Kind: KindAdmission, Message: "admitted"})
	j.Record("a", Entry{Kind: KindAdmission, Message: "admitted"})
	j.Record("", Entry{Kind: KindAdmission, Message: "no uid"})
	if got := fmt.Sprint(j.Pods()); got != "[a b]" {
		t.Fatalf("pods = %s, want [a b]", got)
	}
	j.Forget("a")
	j.Forget("unknown")
	if got := fmt.Sprint(j.Pods()); got != "[b]" {
		t.Fatalf("pods after forget = %s, want [b]", got)
	}
	if j.Entries("a") != nil {
		t.Error("a forgotten pod still has entries")
	}
}

func TestEntriesIsACopy(t *testing.T) {
	j := New(2, testclock.NewFakePassiveClock(t0))
	j.Record("u", Entry{Kind: KindStatus, Message: "x"})
	got := j.Entries("u")
	got[0].Message = "changed"
	if j.Entries("u")[0].Message != "x" {
		t.Error("changing the returned entries changed the journal")
	}
}

func TestLatest(t *testing.T) {
	j := New(10, testclock.NewFakePassiveClock(t0))
	for i := range 5 {
		j.Record("u", Entry{Kind: KindProbe, Message: fmt.Sprint(i)})
	}
	if got := fmt.Sprint(messages(j.Latest("u", 2))); got != "[3 4]" {
		t.Errorf("latest 2 = %s, want [3 4]", got)
	}
	if got := len(j.Latest("u", 20)); got != 5 {
		t.Errorf("latest 20 has %d entries, want 5", got)
	}
}

func TestNilJournal(t *testing.T) {
	var j *Journal
	j.Record("u", Entry{Message: "x"})
	j.Forget("u")
	if j.Entries("u") != nil || j.Pods() != nil || j.Latest("u", 3) != nil {
		t.Error("the nil journal holds entries")
	}
}

func TestConcurrentUse(t *testing.T) {
	j := New(8, testclock.NewFakePassiveClock(t0))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			uid := types.UID(fmt.Sprint("pod", w%2))
			for i := range 200 {
				j.Record(uid, Entry{Kind: KindContainer, Message: fmt.Sprint(i)})
				_ = j.Entries(uid)
				if i%50 == 0 {
					j.Forget(uid)
				}
			}
		}()
	}
	wg.Wait()
	for _, uid := range j.Pods() {
		if n := len(j.Entries(uid)); n > 8 {
			t.Errorf("pod %s has %d entries, more than the size 8", uid, n)
		}
	}
}
