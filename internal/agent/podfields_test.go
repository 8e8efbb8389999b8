package agent

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/podfields"
	"github.com/heartlet/heartlet/internal/podlifecycle"
)

type fakeStatuser struct {
	st  *runtimeapi.StatusResponse
	err error
}

func (f fakeStatuser) Status(context.Context) (*runtimeapi.StatusResponse, error) { return f.st, f.err }

func TestRuntimeFeatures(t *testing.T) {
	ctx := t.Context()
	if got := runtimeFeatures(ctx, fakeStatuser{err: errors.New("down")}); got.SupplementalGroupsPolicy {
		t.Error("a runtime that cannot be asked supports Strict")
	}
	if got := runtimeFeatures(ctx, fakeStatuser{st: &runtimeapi.StatusResponse{}}); got.SupplementalGroupsPolicy {
		t.Error("a runtime without features (containerd 1.6) supports Strict")
	}
	st := &runtimeapi.StatusResponse{Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}}
	if got := runtimeFeatures(ctx, fakeStatuser{st: st}); !got.SupplementalGroupsPolicy {
		t.Error("the reported feature is lost")
	}
}

func TestPodFieldsAdmission(t *testing.T) {
	pred, warn := podFieldsAdmission(podfields.Features{})
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Lifecycle: &v1.Lifecycle{StopSignal: ptr.To(v1.SIGINT)}}}}}
	if res := pred(podlifecycle.AdmitAttrs{Pod: pod}); !res.Admit {
		t.Errorf("refused %+v", res)
	}
	if ws := warn(podlifecycle.AdmitAttrs{Pod: pod}); len(ws) != 1 || ws[0].Reason != podfields.Reason {
		t.Errorf("warnings %+v", ws)
	}
	pod.Spec.HostUsers = ptr.To(false)
	if res := pred(podlifecycle.AdmitAttrs{Pod: pod}); res.Admit || res.Reason != podfields.Reason {
		t.Errorf("hostUsers: false admitted: %+v", res)
	}
}
