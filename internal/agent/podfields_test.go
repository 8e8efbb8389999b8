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
	st     *runtimeapi.StatusResponse
	err    error
	ver    *runtimeapi.VersionResponse
	verErr error
}

func (f fakeStatuser) Status(context.Context) (*runtimeapi.StatusResponse, error) { return f.st, f.err }

func (f fakeStatuser) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	if f.verErr != nil {
		return nil, f.verErr
	}
	return f.ver, nil
}

func TestRuntimeFeatures(t *testing.T) {
	ctx := t.Context()
	if got := runtimeFeatures(ctx, fakeStatuser{err: errors.New("down")}); got.SupplementalGroupsPolicy {
		t.Error("a runtime that cannot be asked supports Strict")
	}
	if got := runtimeFeatures(ctx, fakeStatuser{st: &runtimeapi.StatusResponse{}}); got.SupplementalGroupsPolicy {
		t.Error("a runtime without features (containerd 1.6) supports Strict")
	}
	st := &runtimeapi.StatusResponse{Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}}
	if got := runtimeFeatures(ctx, fakeStatuser{st: st}); !got.SupplementalGroupsPolicy || got.RecursiveReadOnlyMounts {
		t.Errorf("features %+v, want SupplementalGroupsPolicy only", got)
	}
	st.RuntimeHandlers = []*runtimeapi.RuntimeHandler{
		{Name: "kata", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}},
	}
	if got := runtimeFeatures(ctx, fakeStatuser{st: st}); got.RecursiveReadOnlyMounts {
		t.Error("another handler's recursive read-only mounts taken for the default handler's")
	}
	st.RuntimeHandlers[1].Features.RecursiveReadOnlyMounts = true
	if got := runtimeFeatures(ctx, fakeStatuser{st: st}); !got.RecursiveReadOnlyMounts {
		t.Error("the default handler's recursive read-only mounts are lost")
	}
}

func TestRuntimeFeaturesImageVolumes(t *testing.T) {
	ctx := t.Context()
	st := &runtimeapi.StatusResponse{}
	for _, tc := range []struct {
		name string
		rt   fakeStatuser
		want bool
	}{
		{"containerd 2.4", fakeStatuser{st: st, ver: &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2"}}, true},
		{"containerd 1.6", fakeStatuser{st: st, ver: &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1"}}, false},
		{"version unknown", fakeStatuser{st: st, verErr: errors.New("down")}, false},
		{"status unknown", fakeStatuser{err: errors.New("down"), ver: &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2"}}, false},
	} {
		if got := runtimeFeatures(ctx, tc.rt).ImageVolumes; got != tc.want {
			t.Errorf("%s: ImageVolumes = %v, want %v", tc.name, got, tc.want)
		}
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
