package pvc

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/volume"
)

// expandingCSI is a fakeCSI that is also a CSIExpander.
type expandingCSI struct {
	fakeCSI
	err      error
	claim    string
	pv       string
	readOnly bool
	expands  int
}

func (f *expandingCSI) ExpandPersistent(_ context.Context, _ *v1.Pod, claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, readOnly bool) error {
	f.expands++
	f.claim, f.pv, f.readOnly = claim.Name, pv.Name, readOnly
	return f.err
}

func TestSetUpExpandsCSIVolumes(t *testing.T) {
	csiPV := pvWith("pv-csi", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}})
	roPod := testPod()
	roPod.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = true
	failed := errors.New("expansion at mount failed")
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		err     error
		wantRO  bool
		wantErr error
	}{
		{name: "expanded after set-up", pod: testPod()},
		{name: "read-only claim", pod: roPod, wantRO: true},
		{name: "a failure the pod must wait for", pod: testPod(), err: failed, wantErr: failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &expandingCSI{err: tc.err}
			p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(boundClaim("claim", "pv-csi"), csiPV)), nodeName), c)
			m, err := p.SetUp(context.Background(), tc.pod, &tc.pod.Spec.Volumes[0])
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("SetUp error %v, want %v", err, tc.wantErr)
			}
			if err != nil && m != (volume.Mounted{}) {
				t.Errorf("SetUp returned %+v with its error", m)
			}
			if c.calls != 1 || c.expands != 1 || c.claim != "claim" || c.pv != "pv-csi" || c.readOnly != tc.wantRO {
				t.Errorf("set-ups %d, expansions %d of claim %q, PV %q, read-only %v", c.calls, c.expands, c.claim, c.pv, c.readOnly)
			}
		})
	}
}
