package status

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/heartlet/heartlet/internal/journal"
)

// A status written to the API, or refused by it, is in the pod's journal;
// a round that writes nothing records nothing.
func TestSyncerJournal(t *testing.T) {
	tests := []struct {
		name        string
		patchErr    error
		wantReason  string
		wantMessage string
	}{
		{"written", nil, "", "status written: Running, 1/1 containers ready"},
		{"refused", apierrors.NewInternalError(errors.New("etcd timeout")), "WriteFailed", "status not written: Internal error occurred: etcd timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := boundPod("default", "web", "uid-1")
			j := journal.New(8, nil)
			e := newSyncerEnv(t, SyncerOptions{Journal: j}, pod)
			if tt.patchErr != nil {
				e.kube.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.patchErr
				})
			}
			e.m.SetPodStatus(pod, runningStatus(t0))
			e.round(t, false)
			e.round(t, false)
			es := j.Entries(pod.UID)
			if len(es) != 1 || es[0].Kind != journal.KindStatus || es[0].Reason != tt.wantReason || es[0].Message != tt.wantMessage {
				t.Fatalf("journal = %+v, want one status entry %q", es, tt.wantMessage)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		st   v1.PodStatus
		want string
	}{
		{v1.PodStatus{Phase: v1.PodPending}, "Pending"},
		{v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}, "Failed (OutOfcpu)"},
		{v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Ready: true}, {}}}, "Running, 1/2 containers ready"},
	}
	for _, tt := range tests {
		if got := Summary(&tt.st); got != tt.want {
			t.Errorf("Summary(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}
