package podsync

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/journal"
)

// withJournal gives the harness's syncer a journal on its clock.
func withJournal(h *harness) *journal.Journal {
	j := journal.New(32, h.clock)
	h.syncer.opts.Journal = j
	return j
}

// find returns the entries of kind (and reason, when not empty) for
// container.
func find(es []journal.Entry, kind journal.Kind, container, reason string) []journal.Entry {
	var out []journal.Entry
	for _, e := range es {
		if e.Kind == kind && e.Container == container && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

// A pod started, crashing and held by its backoff leaves the sandbox, the
// containers created and started, and the backoff with its next retry in
// its journal.
func TestJournalContainersAndCrashBackoff(t *testing.T) {
	h := newHarness(t)
	j := withJournal(h)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	h.sync(pod)
	es := j.Entries(pod.UID)
	if len(es) == 0 || es[0].Kind != journal.KindContainer || !strings.HasPrefix(es[0].Message, "pod sandbox started") {
		t.Fatalf("first entry = %+v, want the sandbox started", es)
	}
	if got := find(es, journal.KindContainer, "app", ""); len(got) != 2 || got[0].Message != "container created (restart count 0)" || got[1].Message != "container started" {
		t.Fatalf("app entries = %+v, want created then started", got)
	}

	for range 2 { // the first exit restarts at once, the second is held
		h.fake.SetExit(h.running("app").ID, 1, "")
		h.sync(pod)
	}
	now := h.clock.Now()
	bo := find(j.Entries(pod.UID), journal.KindBackoff, "app", ReasonCrashLoopBackOff)
	if len(bo) != 1 || !bo[0].NextRetry.After(now) || bo[0].NextRetry.After(now.Add(initialBackoff)) {
		t.Fatalf("backoff entries = %+v, want one with its next retry within %v of %v", bo, initialBackoff, now)
	}
	// Syncs during the backoff fold into that entry.
	h.sync(pod)
	if bo := find(j.Entries(pod.UID), journal.KindBackoff, "app", ""); len(bo) != 1 || bo[0].Count != 2 {
		t.Errorf("backoff entries after another sync = %+v, want one with count 2", bo)
	}
}

// Killing a container says why.
func TestJournalKill(t *testing.T) {
	h := newHarness(t)
	j := withJournal(h)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	h.sync(pod)
	id := h.running("app").ID
	if err := h.syncer.killContainer(h.ctx, pod, "app", id, time.Second, "Container app failed liveness probe, will be restarted"); err != nil {
		t.Fatal(err)
	}
	k := find(j.Entries(pod.UID), journal.KindContainer, "app", "Killing")
	if len(k) != 1 || !strings.Contains(k[0].Message, "failed liveness probe") {
		t.Errorf("kill entries = %+v, want the reason", k)
	}
}
