package controller

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	driverName  = "csi.example.test"
	topologyKey = "topology.csi.example.test/node"
)

// fakeDriver is a CSI controller service that records its calls.
type fakeDriver struct {
	csi.UnimplementedControllerServer
	mu    sync.Mutex
	calls []any
}

func (f *fakeDriver) note(req any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req)
}

func (f *fakeDriver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	f.note(req)
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           "vol-" + req.GetName(),
		CapacityBytes:      req.GetCapacityRange().GetRequiredBytes(),
		VolumeContext:      map[string]string{"made": "here"},
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{topologyKey: "node1"}}},
	}}, nil
}

func (f *fakeDriver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	f.note(req)
	return &csi.DeleteVolumeResponse{}, nil
}

func (f *fakeDriver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	f.note(req)
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"attached-to": req.GetNodeId()}}, nil
}

func (f *fakeDriver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	f.note(req)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (f *fakeDriver) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	f.note(req)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes(), NodeExpansionRequired: true}, nil
}

// callsOf returns the recorded requests of type T.
func callsOf[T any](f *fakeDriver) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, c := range f.calls {
		if t, ok := c.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// start serves a fake driver and runs loop against a fake API server
// holding objs.
func start(t *testing.T, run func(context.Context, Config) error, objs ...runtime.Object) (*fakeDriver, *fake.Clientset, context.Context) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	drv := &fakeDriver{}
	srv := grpc.NewServer()
	csi.RegisterControllerServer(srv, drv)
	go func() { _ = srv.Serve(l) }()
	conn, err := Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, Config{Client: client, CSI: conn, DriverName: driverName, Resync: time.Second, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller loop: %v", err)
		}
		conn.Close()
		srv.Stop()
	})
	return drv, client, ctx
}

// eventually polls cond until it holds or the test's context ends.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestProvisionAndDelete(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: driverName, VolumeBindingMode: &wffc,
		MountOptions: []string{"noatime"}, Parameters: map[string]string{ParamFSType: "ext4"}}
	other := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Provisioner: "other.example"}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", Labels: map[string]string{topologyKey: "node1"}}}
	csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driverName, NodeID: "n-1", TopologyKeys: []string{topologyKey}}}}}
	claim := func(name, class string, ann map[string]string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Annotations: ann},
			Spec: v1.PersistentVolumeClaimSpec{
				StorageClassName: ptr(class),
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
	}
	mine := claim("data", "fast", map[string]string{AnnStorageProvisioner: driverName, AnnSelectedNode: "node1"})
	unscheduled := claim("later", "fast", map[string]string{AnnStorageProvisioner: driverName})
	foreign := claim("foreign", "other", map[string]string{AnnStorageProvisioner: "other.example"})
	drv, client, ctx := start(t, RunProvisioner, sc, other, node, csiNode, mine, unscheduled, foreign)

	var pv *v1.PersistentVolume
	eventually(t, ctx, "the PV", func() bool {
		var err error
		pv, err = client.CoreV1().PersistentVolumes().Get(ctx, "pvc-uid-data", metav1.GetOptions{})
		return err == nil
	})
	creates := callsOf[*csi.CreateVolumeRequest](drv)
	if len(creates) != 1 {
		t.Fatalf("%d CreateVolume calls, want 1 (only the scheduled claim of the driver): %v", len(creates), creates)
	}
	req := creates[0]
	if req.GetName() != "pvc-uid-data" || req.GetCapacityRange().GetRequiredBytes() != 1<<30 || len(req.GetParameters()) != 0 {
		t.Errorf("CreateVolume %v", req)
	}
	if c := req.GetVolumeCapabilities()[0]; c.GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER ||
		c.GetMount().GetFsType() != "ext4" || !slices.Equal(c.GetMount().GetMountFlags(), []string{"noatime"}) {
		t.Errorf("CreateVolume capability %v", c)
	}
	if seg := req.GetAccessibilityRequirements().GetRequisite()[0].GetSegments(); seg[topologyKey] != "node1" || len(seg) != 1 {
		t.Errorf("CreateVolume requisite topology %v", seg)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != "uid-data" || pv.Spec.ClaimRef.Name != "data" ||
		pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName || pv.Spec.CSI.VolumeHandle != "vol-pvc-uid-data" || pv.Spec.CSI.FSType != "ext4" ||
		pv.Spec.CSI.VolumeAttributes["made"] != "here" || pv.Spec.StorageClassName != "fast" || !slices.Equal(pv.Spec.MountOptions, []string{"noatime"}) ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete || pv.Annotations[AnnProvisionedBy] != driverName {
		t.Errorf("PV %+v", pv.Spec)
	}
	if q := pv.Spec.Capacity[v1.ResourceStorage]; q.Value() != 1<<30 {
		t.Errorf("PV capacity %s", q.String())
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != topologyKey ||
		!slices.Equal(terms[0].MatchExpressions[0].Values, []string{"node1"}) {
		t.Errorf("PV node affinity %+v", terms)
	}

	// Released with reclaim policy Delete: the volume and the PV go.
	pv.Status.Phase = v1.VolumeReleased
	if _, err := client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the PV's deletion", func() bool {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err != nil
	})
	if dels := callsOf[*csi.DeleteVolumeRequest](drv); len(dels) != 1 || dels[0].GetVolumeId() != "vol-pvc-uid-data" {
		t.Errorf("DeleteVolume calls %v", dels)
	}
}

func attachObjects() (*v1.PersistentVolume, *storagev1.CSINode, *storagev1.VolumeAttachment) {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		VolumeMode:             ptr(v1.PersistentVolumeBlock),
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverName, VolumeHandle: "vol-1"}},
	}}
	cn := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driverName, NodeID: "n-1"}}}}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-123"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: driverName, NodeName: "node1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr("pv1")}}}
	return pv, cn, va
}

func TestAttachDetach(t *testing.T) {
	pv, cn, va := attachObjects()
	foreign := va.DeepCopy()
	foreign.Name, foreign.Spec.Attacher = "csi-other", "other.example"
	drv, client, ctx := start(t, RunAttacher, pv, cn, va, foreign)
	eventually(t, ctx, "the attachment", func() bool {
		got, err := client.StorageV1().VolumeAttachments().Get(ctx, "csi-123", metav1.GetOptions{})
		if err != nil || !got.Status.Attached {
			return false
		}
		va = got
		return true
	})
	if va.Status.AttachmentMetadata["attached-to"] != "n-1" || !slices.Contains(va.Finalizers, AttacherFinalizer(driverName)) {
		t.Errorf("attached VolumeAttachment %+v", va)
	}
	pubs := callsOf[*csi.ControllerPublishVolumeRequest](drv)
	if len(pubs) != 1 || pubs[0].GetVolumeId() != "vol-1" || pubs[0].GetNodeId() != "n-1" || pubs[0].GetVolumeCapability().GetBlock() == nil ||
		pubs[0].GetVolumeCapability().GetAccessMode().GetMode() != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER {
		t.Fatalf("ControllerPublishVolume calls %v (the foreign attachment must not be published)", pubs)
	}
	// The attach-detach controller deletes it; the finalizer holds it
	// until the attacher has detached.
	va.DeletionTimestamp = ptr(metav1.Now())
	if _, err := client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "the detach", func() bool {
		got, err := client.StorageV1().VolumeAttachments().Get(ctx, "csi-123", metav1.GetOptions{})
		return err == nil && !slices.Contains(got.Finalizers, AttacherFinalizer(driverName))
	})
	if un := callsOf[*csi.ControllerUnpublishVolumeRequest](drv); len(un) != 1 || un[0].GetVolumeId() != "vol-1" || un[0].GetNodeId() != "n-1" {
		t.Errorf("ControllerUnpublishVolume calls %v", un)
	}
}

func TestAttachErrorIsRecorded(t *testing.T) {
	pv, cn, va := attachObjects()
	cn.Spec.Drivers = nil // the node has not registered the driver
	_, client, ctx := start(t, RunAttacher, pv, cn, va)
	eventually(t, ctx, "the attach error", func() bool {
		got, err := client.StorageV1().VolumeAttachments().Get(ctx, "csi-123", metav1.GetOptions{})
		return err == nil && got.Status.AttachError != nil && !got.Status.Attached
	})
}

func TestResize(t *testing.T) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: driverName, AllowVolumeExpansion: ptr(true)}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
		Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driverName, VolumeHandle: "vol-1"}},
	}}
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr("fast"), VolumeName: "pv1",
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}}},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, Capacity: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}
	drv, client, ctx := start(t, RunResizer, sc, pv, pvc)
	eventually(t, ctx, "the claim's pending node expansion", func() bool {
		got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		return err == nil && got.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimNodeResizePending
	})
	got, err := client.CoreV1().PersistentVolumes().Get(ctx, "pv1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := got.Spec.Capacity[v1.ResourceStorage]; q.Value() != 2<<30 {
		t.Errorf("PV capacity %s, want 2Gi", q.String())
	}
	if ex := callsOf[*csi.ControllerExpandVolumeRequest](drv); len(ex) != 1 || ex[0].GetCapacityRange().GetRequiredBytes() != 2<<30 {
		t.Errorf("ControllerExpandVolume calls %v", ex)
	}
}

// testWriter sends the loops' logs to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
