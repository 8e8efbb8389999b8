package pvc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/volume"
)

const nodeName = "node1"

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"},
		Spec: v1.PodSpec{NodeName: nodeName, Volumes: []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
		}},
	}
}

func boundClaim(name, pvName string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "claim-uid"},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pvName},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
}

func pvWith(name string, src v1.PersistentVolumeSource) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeSource: src,
			ClaimRef:               &v1.ObjectReference{Namespace: "ns", Name: "claim", UID: "claim-uid"},
		},
	}
}

func affinity(value string) *v1.VolumeNodeAffinity {
	return &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{value}}},
	}}}}
}

type fakeCSI struct{ calls int }

func (f *fakeCSI) SetUpPersistentBlock(_ context.Context, _ *v1.Pod, _ *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error) {
	f.calls++
	return volume.Mounted{HostPath: "/csi-block/" + pv.Name, ReadOnly: readOnly, Device: true}, nil
}

func (f *fakeCSI) SetUpPersistent(_ context.Context, _ *v1.Pod, _ *v1.Volume, pv *v1.PersistentVolume, readOnly bool) (volume.Mounted, error) {
	f.calls++
	return volume.Mounted{HostPath: "/csi/" + pv.Name, ReadOnly: readOnly}, nil
}

func TestSetUp(t *testing.T) {
	dir := t.TempDir()
	localDir := filepath.Join(dir, "local")
	if err := os.Mkdir(localDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dirType := v1.HostPathDirectory
	block := v1.PersistentVolumeBlock
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}}
	local := pvWith("pv-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: localDir}})
	local.Spec.NodeAffinity = affinity(nodeName)
	elsewhere := local.DeepCopy()
	elsewhere.Spec.NodeAffinity = affinity("other")
	missingPath := pvWith("pv-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: filepath.Join(dir, "nope")}})
	blockPV := local.DeepCopy()
	blockPV.Spec.VolumeMode = &block
	hostPathPV := pvWith("pv-local", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: localDir, Type: &dirType}})
	hostPathWrongType := pvWith("pv-local", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: file, Type: &dirType}})
	nfs := pvWith("pv-local", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}})
	csiPV := pvWith("pv-local", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}})
	otherClaim := local.DeepCopy()
	otherClaim.Spec.ClaimRef.UID = "someone-else"
	pending := boundClaim("claim", "")
	pending.Status.Phase = v1.ClaimPending

	roPod := testPod()
	roPod.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = true

	tests := []struct {
		name    string
		pod     *v1.Pod
		objs    []runtime.Object
		want    volume.Mounted
		wantErr error
		errText string
	}{
		{name: "local", objs: []runtime.Object{boundClaim("claim", "pv-local"), local, node},
			want: volume.Mounted{HostPath: localDir, Ownership: true}},
		{name: "local read-only claim", pod: roPod, objs: []runtime.Object{boundClaim("claim", "pv-local"), local, node},
			want: volume.Mounted{HostPath: localDir, ReadOnly: true, Ownership: true}},
		{name: "node affinity of another node", objs: []runtime.Object{boundClaim("claim", "pv-local"), elsewhere, node}, wantErr: ErrNodeAffinity},
		{name: "local path missing", objs: []runtime.Object{boundClaim("claim", "pv-local"), missingPath, node}, errText: "nope"},
		{name: "block mode without a root directory refused", objs: []runtime.Object{boundClaim("claim", "pv-local"), blockPV, node}, wantErr: volume.ErrUnsupported, errText: "volumeMode Block"},
		{name: "hostPath", objs: []runtime.Object{boundClaim("claim", "pv-local"), hostPathPV, node}, want: volume.Mounted{HostPath: localDir}},
		{name: "hostPath type check", objs: []runtime.Object{boundClaim("claim", "pv-local"), hostPathWrongType, node}, errText: "is not a directory"},
		{name: "nfs refused", objs: []runtime.Object{boundClaim("claim", "pv-local"), nfs, node}, wantErr: volume.ErrUnsupported, errText: "nfs"},
		{name: "csi delegated", objs: []runtime.Object{boundClaim("claim", "pv-local"), csiPV, node}, want: volume.Mounted{HostPath: "/csi/pv-local"}},
		{name: "claim missing", objs: []runtime.Object{node}, wantErr: volume.ErrMissingObject},
		{name: "claim pending", objs: []runtime.Object{pending, node}, wantErr: ErrUnbound},
		{name: "pv bound to another claim", objs: []runtime.Object{boundClaim("claim", "pv-local"), otherClaim, node}, wantErr: ErrUnbound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod
			if pod == nil {
				pod = testPod()
			}
			p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(tc.objs...)), nodeName), &fakeCSI{})
			if !p.Handles(&pod.Spec.Volumes[0]) {
				t.Fatal("Handles = false for a claim volume")
			}
			got, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0])
			if tc.wantErr == nil && tc.errText == "" {
				if err != nil {
					t.Fatalf("SetUp: %v", err)
				}
				if got != tc.want {
					t.Fatalf("SetUp = %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("SetUp succeeded with %+v, want an error", got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("SetUp error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("SetUp error %q does not contain %q", err, tc.errText)
			}
		})
	}
}

func TestEphemeralClaimOwner(t *testing.T) {
	pod := testPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
	dir := t.TempDir()
	pv := pvWith("pv", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}})
	yes := true
	owned := boundClaim("web-scratch", "pv")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: &yes}}
	foreign := owned.DeepCopy()
	foreign.OwnerReferences[0].UID = "another-pod"

	p := New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(owned, pv)), nodeName), nil)
	got, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0])
	if err != nil || got.HostPath != dir {
		t.Fatalf("SetUp = %+v, %v; want %s", got, err, dir)
	}
	// A claim of the same name that another pod owns must not be mounted.
	p = New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(foreign, pv)), nodeName), nil)
	if _, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0]); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("SetUp of a foreign claim: %v, want ErrNotOwner", err)
	}
}

func TestNoAPI(t *testing.T) {
	pod := testPod()
	p := New(nil, nil)
	if _, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0]); !errors.Is(err, volume.ErrNoAPI) {
		t.Fatalf("SetUp without API: %v, want ErrNoAPI", err)
	}
	csiPV := pvWith("pv", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}})
	p = New(NewClientGetter(kubeapifake.Wrap(fake.NewClientset(boundClaim("claim", "pv"), csiPV)), nodeName), nil)
	if _, err := p.SetUp(context.Background(), pod, &pod.Spec.Volumes[0]); !errors.Is(err, volume.ErrUnsupported) {
		t.Fatalf("SetUp of a CSI volume without a publisher: %v, want ErrUnsupported", err)
	}
}
