package probe

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/journal"
)

// Failed and errored probes are written to the pod's journal, with the
// container; successes are not.
func TestWorkerJournal(t *testing.T) {
	f := newFixture()
	j := journal.New(8, testclock.NewFakePassiveClock(t0))
	f.m.opts.Journal = j
	pod := testPod(v1.Container{Name: "app", LivenessProbe: execProbe(nil)})
	pod.UID = "uid-journal"
	f.status.set(pod.UID, running("app", "c1", t0))
	w := newWorker(f.m, pod, &pod.Spec.Containers[0], Liveness)
	ctx := context.Background()
	f.exec.set(execOK, nil)
	w.doProbe(ctx)
	f.exec.set(execFail, nil)
	w.doProbe(ctx)
	f.exec.set(execOK, fmt.Errorf("container gone"))
	w.doProbe(ctx)

	es := j.Entries(pod.UID)
	if len(es) != 2 {
		t.Fatalf("journal = %+v, want a failure and an error", es)
	}
	if e := es[0]; e.Kind != journal.KindProbe || e.Container != "app" || e.Message != "Liveness probe failed: boom" {
		t.Errorf("first entry = %+v, want the liveness failure", e)
	}
	if e := es[1]; e.Kind != journal.KindProbe || !strings.HasPrefix(e.Message, "Liveness probe errored: ") {
		t.Errorf("second entry = %+v, want the probe error", e)
	}
}
