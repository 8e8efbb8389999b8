package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/volume"
)

const (
	testDriver = "hostpath.csi.example.com"
	testNode   = "node1"
)

// nodeServer is a CSI node service that records its calls.
type nodeServer struct {
	csipb.UnimplementedNodeServer
	stage      bool
	mountGroup bool
	// volumeStats: GET_VOLUME_STATS, answered with statsUsed bytes used
	// of 1 GiB, or statsErr.
	volumeStats bool
	statsUsed   int64
	statsErr    error
	stageErr    error
	publishErr  error
	// onStage and onUnstage, when set, run at the start of the call.
	onStage, onUnstage func()

	mu    sync.Mutex
	calls []string
	last  map[string]any
	reqs  []recorded // every request, in order
}

type recorded struct {
	kind string
	req  any
}

func (s *nodeServer) record(call string, req any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	if s.last == nil {
		s.last = map[string]any{}
	}
	s.last[strings.Fields(call)[0]] = req
	s.reqs = append(s.reqs, recorded{kind: strings.Fields(call)[0], req: req})
}

func (s *nodeServer) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *nodeServer) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "id-" + testNode, MaxVolumesPerNode: 7,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.example.com/node": testNode}}}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp := &csipb.NodeGetCapabilitiesResponse{}
	add := func(t csipb.NodeServiceCapability_RPC_Type) {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	if s.stage {
		add(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	}
	if s.mountGroup {
		add(csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	}
	if s.volumeStats {
		add(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	}
	return resp, nil
}

func (s *nodeServer) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	s.record("stats "+r.VolumeId+" "+r.VolumePath+" "+r.StagingTargetPath, r)
	s.mu.Lock()
	used, err := s.statsUsed, s.statsErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 1 << 30, Used: used, Available: 1<<30 - used},
		{Unit: csipb.VolumeUsage_INODES, Total: 1000, Used: 10, Available: 990},
	}}, nil
}

func (s *nodeServer) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	if _, err := os.Stat(r.StagingTargetPath); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "staging path: %v", err)
	}
	if s.onStage != nil {
		s.onStage()
	}
	if s.stageErr != nil {
		return nil, s.stageErr
	}
	s.record("stage "+r.VolumeId, r)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	if s.onUnstage != nil {
		s.onUnstage()
	}
	s.record("unstage "+r.VolumeId, r)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (s *nodeServer) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if s.publishErr != nil {
		return nil, s.publishErr
	}
	// As the spec asks: the CO made the parent, the driver makes the target.
	if err := os.Mkdir(r.TargetPath, 0o750); err != nil && !os.IsExist(err) {
		return nil, status.Errorf(codes.Internal, "target: %v", err)
	}
	s.record("publish "+r.VolumeId+" "+r.TargetPath, r)
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	s.record("unpublish "+r.VolumeId+" "+r.TargetPath, r)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// serveDriver serves srv on a Unix socket until the test ends.
func serveDriver(t *testing.T, srv csipb.NodeServer) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	csipb.RegisterNodeServer(s, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return sock
}

type env struct {
	root    string
	kube    *fake.Clientset
	srv     *nodeServer
	drivers *Drivers
	pub     *Publisher
}

func newEnv(t *testing.T, srv *nodeServer, objs ...runtime.Object) *env {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	kube := fake.NewClientset(append(objs, node)...)
	e := &env{root: t.TempDir(), kube: kube, srv: srv}
	e.drivers = NewDrivers(nil, NewNodeInfo(kubeapifake.Wrap(kube), testNode))
	t.Cleanup(e.drivers.Close)
	if err := e.drivers.Register(context.Background(), testDriver, serveDriver(t, srv), []string{"1.0.0"}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	e.pub = e.newPublisher()
	return e
}

// newPublisher is a publisher with empty memory, as after a restart.
func (e *env) newPublisher() *Publisher {
	return NewPublisher(PublisherOptions{RootDir: e.root, NodeName: testNode, Drivers: e.drivers, Kube: kubeapifake.Wrap(e.kube)})
}

func csiDriverObj(mutate func(*storagev1.CSIDriver)) *storagev1.CSIDriver {
	no := false
	cd := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}
	if mutate != nil {
		mutate(cd)
	}
	return cd
}

func csiPV(name, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: handle, FSType: "ext4"}},
		},
	}
}

func pod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid)}, Spec: v1.PodSpec{ServiceAccountName: "sa"}}
}

func claimVolume() *v1.Volume {
	return &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
}

func TestStageOncePublishPerPod(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	pv := csiPV("pv-1", "vol-1")
	ctx := context.Background()
	var targets []string
	for _, uid := range []string{"a", "b"} {
		m, err := e.pub.SetUpPersistent(ctx, pod(uid), claimVolume(), pv, false)
		if err != nil {
			t.Fatalf("SetUpPersistent %s: %v", uid, err)
		}
		want := filepath.Join(e.root, "pods", uid, "volumes", "kubernetes.io~csi", "pv-1", "mount")
		if m.HostPath != want || m.ReadOnly || !m.Ownership {
			t.Fatalf("Mounted = %+v, want %s, read-write, owned (fsType ext4, RWO)", m, want)
		}
		targets = append(targets, want)
	}
	// Again: idempotent, no new call.
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"stage vol-1", "publish vol-1 " + targets[0], "publish vol-1 " + targets[1]}
	if got := srv.got(); !slices.Equal(got, want) {
		t.Fatalf("driver calls %v, want %v", got, want)
	}
	staging := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", testDriver, sha("vol-1"), "globalmount")
	if got := srv.last["stage"].(*csipb.NodeStageVolumeRequest).StagingTargetPath; got != staging {
		t.Errorf("staging path %s, want %s", got, staging)
	}
	if got := srv.last["publish"].(*csipb.NodePublishVolumeRequest).StagingTargetPath; got != staging {
		t.Errorf("publish got staging path %s, want %s", got, staging)
	}
	var d map[string]string
	b, err := os.ReadFile(filepath.Join(filepath.Dir(targets[0]), "vol_data.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d["specVolID"] != "pv-1" || d["volumeHandle"] != "vol-1" || d["driverName"] != testDriver || d["nodeName"] != testNode || d["volumeLifecycleMode"] != "Persistent" {
		t.Errorf("vol_data.json = %v", d)
	}

	if got := e.pub.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{"kubernetes.io/csi/" + testDriver + "^vol-1"}) {
		t.Errorf("VolumesInUse = %v", got)
	}
	// The first pod goes: unpublished only; the last: unstaged too.
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got()[3:]; !slices.Equal(got, []string{"unpublish vol-1 " + targets[0]}) {
		t.Fatalf("calls after the first pod went: %v", got)
	}
	if err := e.pub.TearDown(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got()[4:]; !slices.Equal(got, []string{"unpublish vol-1 " + targets[1], "unstage vol-1"}) {
		t.Fatalf("calls after the last pod went: %v", got)
	}
	if got := e.pub.VolumesInUse(); len(got) != 0 {
		t.Errorf("VolumesInUse after the last pod = %v", got)
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
	// Idempotent.
	if err := e.pub.TearDown(ctx, "b"); err != nil || len(srv.got()) != 6 {
		t.Fatalf("second TearDown: %v, calls %v", err, srv.got())
	}
}

func TestRestartReconstruct(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	pv := csiPV("pv-1", "vol-1")
	ctx := context.Background()
	for _, uid := range []string{"running", "deleted"} {
		if _, err := e.pub.SetUpPersistent(ctx, pod(uid), claimVolume(), pv, false); err != nil {
			t.Fatal(err)
		}
	}
	before := len(srv.got())
	// heartlet restarts: new memory; the running pod is adopted.
	pub := e.newPublisher()
	if err := pub.Reconstruct(ctx, pod("running")); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.SetUpPersistent(ctx, pod("running"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	if got := srv.got()[before:]; len(got) != 0 {
		t.Fatalf("the adopted pod's volume was staged or published again: %v", got)
	}
	// The pod deleted meanwhile is torn down; the running pod keeps the
	// staged volume.
	if err := pub.TearDown(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	got := srv.got()[before:]
	if len(got) != 1 || !strings.HasPrefix(got[0], "unpublish vol-1 ") || !strings.Contains(got[0], "/deleted/") {
		t.Fatalf("calls for the deleted pod: %v, want one unpublish and no unstage", got)
	}
	if err := pub.TearDown(ctx, "running"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got(); got[len(got)-1] != "unstage vol-1" {
		t.Fatalf("the last pod's teardown did not unstage: %v", got)
	}
}

func TestAttachRequired(t *testing.T) {
	srv := &nodeServer{}
	yes := true
	pv := csiPV("pv-1", "vol-1")
	vaName := AttachmentName("vol-1", testDriver, testNode)
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: vaName}}
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) { cd.Spec.AttachRequired = &yes }))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); !errors.Is(err, ErrNotAttached) {
		t.Fatalf("without a VolumeAttachment: %v, want ErrNotAttached", err)
	}
	va.Status.AttachError = &storagev1.VolumeError{Message: "disk busy"}
	if _, err := e.kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); !errors.Is(err, ErrNotAttached) || !strings.Contains(err.Error(), "disk busy") {
		t.Fatalf("with an attach error: %v, want ErrNotAttached with the driver's message", err)
	}
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"dev": "/dev/x"}}
	if _, err := e.kube.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Attached, but the node's status does not list it yet (another
	// volume is listed).
	node, err := e.kube.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.VolumesAttached = []v1.AttachedVolume{{Name: UniqueVolumeName(testDriver, "vol-2")}}
	if node, err = e.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false)
	if ae := (*AttachError)(nil); !errors.As(err, &ae) || ae.EventReason() != "FailedAttachVolume" || !strings.Contains(err.Error(), "not attached according to node status") {
		t.Fatalf("attached but not in the node's status: %v, want a FailedAttachVolume AttachError", err)
	}
	if got := srv.got(); len(got) != 0 {
		t.Fatalf("the driver was called before the node's status listed the volume: %v", got)
	}
	node.Status.VolumesAttached = append(node.Status.VolumesAttached, v1.AttachedVolume{Name: UniqueVolumeName(testDriver, "vol-1"), DevicePath: "/dev/x"})
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	req := srv.last["publish"].(*csipb.NodePublishVolumeRequest)
	if req.PublishContext["dev"] != "/dev/x" {
		t.Errorf("publish context %v, want the attachment's metadata", req.PublishContext)
	}
	if req.StagingTargetPath != "" {
		t.Errorf("a driver without STAGE_UNSTAGE got a staging path %q", req.StagingTargetPath)
	}
}

func TestInlineEphemeral(t *testing.T) {
	srv := &nodeServer{stage: true}
	yes := true
	ro := true
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) {
		cd.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
		cd.Spec.PodInfoOnMount = &yes
	}))
	v := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: testDriver, ReadOnly: &ro, VolumeAttributes: map[string]string{"size": "1Mi"}}}}
	if !e.pub.Handles(v) {
		t.Fatal("Handles = false for an inline CSI volume")
	}
	ctx := context.Background()
	m, err := e.pub.SetUp(ctx, pod("a"), v)
	if err != nil {
		t.Fatal(err)
	}
	if !m.ReadOnly || !strings.HasSuffix(m.HostPath, "/pods/a/volumes/kubernetes.io~csi/scratch/mount") {
		t.Fatalf("Mounted = %+v", m)
	}
	got := srv.got()
	if len(got) != 1 || !strings.HasPrefix(got[0], "publish csi-") {
		t.Fatalf("driver calls %v, want one publish and no stage", got)
	}
	req := srv.last["publish"].(*csipb.NodePublishVolumeRequest)
	want := map[string]string{"size": "1Mi", keyPodName: "p-a", keyPodNamespace: "ns", keyPodUID: "a", keyServiceAccount: "sa", keyEphemeral: "true"}
	for k, v := range want {
		if req.VolumeContext[k] != v {
			t.Errorf("volume context %s = %q, want %q", k, req.VolumeContext[k], v)
		}
	}
	if !req.Readonly {
		t.Error("publish not read-only")
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got(); len(got) != 2 || !strings.HasPrefix(got[1], "unpublish csi-") {
		t.Fatalf("driver calls %v, want an unpublish and no unstage", got)
	}
}

func TestRefusals(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		cd      *storagev1.CSIDriver
		setUp   func(e *env) error
		wantErr error
		text    string
	}{
		{name: "inline without Ephemeral mode", cd: csiDriverObj(nil), text: "does not support inline ephemeral volumes",
			setUp: func(e *env) error {
				_, err := e.pub.SetUp(ctx, pod("a"), &v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}})
				return err
			}},
		{name: "driver not registered", cd: csiDriverObj(nil), wantErr: ErrDriverNotRegistered,
			setUp: func(e *env) error {
				pv := csiPV("pv", "h")
				pv.Spec.CSI.Driver = "other.example.com"
				_, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false)
				return err
			}},
		{name: "static pod", cd: csiDriverObj(nil), wantErr: volume.ErrNoAPI,
			setUp: func(e *env) error {
				p := pod("a")
				p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
				_, err := e.pub.SetUpPersistent(ctx, p, claimVolume(), csiPV("pv", "h"), false)
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &nodeServer{}
			e := newEnv(t, srv, tc.cd)
			err := tc.setUp(e)
			if err == nil {
				t.Fatal("set-up succeeded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not say %q", err, tc.text)
			}
			if got := srv.got(); len(got) != 0 {
				t.Errorf("the driver was called: %v", got)
			}
		})
	}
}

func TestPublishErrorKeepsRecord(t *testing.T) {
	srv := &nodeServer{publishErr: status.Error(codes.Internal, "no space left on the pool")}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	_, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false)
	if err == nil || !strings.Contains(err.Error(), "no space left on the pool") {
		t.Fatalf("error %v, want the driver's message", err)
	}
	// The half-made publication is still unpublished when the pod goes.
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := srv.got(); len(got) != 1 || !strings.HasPrefix(got[0], "unpublish vol-1") {
		t.Fatalf("driver calls %v, want an unpublish", got)
	}
}

func TestNodeInfoPublished(t *testing.T) {
	e := newEnv(t, &nodeServer{})
	ctx := context.Background()
	cn, err := e.kube.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CSINode: %v", err)
	}
	if len(cn.Spec.Drivers) != 1 {
		t.Fatalf("CSINode drivers %+v", cn.Spec.Drivers)
	}
	d := cn.Spec.Drivers[0]
	if d.Name != testDriver || d.NodeID != "id-"+testNode || !slices.Equal(d.TopologyKeys, []string{"topology.example.com/node"}) || d.Allocatable == nil || *d.Allocatable.Count != 7 {
		t.Errorf("CSINode driver %+v", d)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != "node-uid" {
		t.Errorf("CSINode owner %+v, want the Node", cn.OwnerReferences)
	}
	node, err := e.kube.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Annotations[NodeIDAnnotation]; got != `{"`+testDriver+`":"id-`+testNode+`"}` {
		t.Errorf("annotation %q", got)
	}
	if node.Labels["topology.example.com/node"] != testNode {
		t.Errorf("topology label missing: %v", node.Labels)
	}
	e.drivers.Deregister(ctx, testDriver, "elsewhere") // another endpoint: kept
	if _, err := e.drivers.get(testDriver); err != nil {
		t.Fatal("a deregistration from another endpoint removed the driver")
	}
	for _, ep := range []string{e.drivers.drivers[testDriver].endpoint} {
		e.drivers.Deregister(ctx, testDriver, ep)
	}
	cn, _ = e.kube.StorageV1().CSINodes().Get(ctx, testNode, metav1.GetOptions{})
	node, _ = e.kube.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if len(cn.Spec.Drivers) != 0 || node.Annotations[NodeIDAnnotation] != "" {
		t.Errorf("after deregistration: CSINode drivers %v, annotation %q", cn.Spec.Drivers, node.Annotations[NodeIDAnnotation])
	}
}

func TestRegisterRefusesVersions(t *testing.T) {
	d := NewDrivers(nil, nil)
	if err := d.Register(context.Background(), "x", "/nonexistent", []string{"0.3.0"}); err == nil {
		t.Fatal("a CSI 0.x driver was registered")
	}
}

func TestAttachErrorReason(t *testing.T) {
	var err error = &AttachError{Msg: "volume x"}
	err = fmt.Errorf("wrapped: %w", err)
	var r interface{ EventReason() string }
	if !errors.As(err, &r) || r.EventReason() != "FailedAttachVolume" || !errors.Is(err, ErrNotAttached) {
		t.Fatalf("AttachError %v does not carry its reason and sentinel", err)
	}
}

// A driver name that would climb out of the plugin directory is refused at
// registration, in a volume's spec and in a vol_data.json found on disk.
func TestDriverNameAttacks(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"../../etc", "a/b", "..", "", strings.Repeat("x", 64), "-x"} {
		d := NewDrivers(func(context.Context, string) (csipb.NodeClient, io.Closer, error) {
			t.Fatalf("dialled a driver named %q", name)
			return nil, nil, nil
		}, nil)
		if err := d.Register(ctx, name, "/e", []string{"1.0.0"}); err == nil {
			t.Errorf("Register(%q) succeeded", name)
		}
	}
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	pv := csiPV("pv-1", "vol-1")
	pv.Spec.CSI.Driver = "../../../../tmp"
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err == nil || !strings.Contains(err.Error(), "invalid CSI driver name") {
		t.Errorf("SetUpPersistent with driver %q: %v", pv.Spec.CSI.Driver, err)
	}
	if _, err := os.Stat(filepath.Join(e.root, "plugins")); !os.IsNotExist(err) {
		t.Errorf("a directory was made for the bad driver: %v", err)
	}
	// A vol_data.json naming a bad driver is not acted on: TearDown fails
	// and keeps everything.
	dir := e.pub.PublishDir("p", "pv-x")
	if err := os.MkdirAll(filepath.Join(dir, "mount"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vol_data.json"), []byte(`{"volumeHandle":"h","driverName":"../../../x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.TearDown(ctx, "p"); err == nil {
		t.Error("TearDown accepted a vol_data.json with a bad driver name")
	}
	if _, err := os.Stat(filepath.Join(dir, "mount")); err != nil {
		t.Errorf("TearDown removed the target of a volume it could not unpublish: %v", err)
	}
	if got := srv.got(); len(got) != 0 {
		t.Errorf("driver calls %v", got)
	}
}

// fsGroupPolicy decides whether heartlet gives the volume to the pod's
// fsGroup, and a driver with VOLUME_MOUNT_GROUP gets the group instead.
func TestFSGroup(t *testing.T) {
	file, none := storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy
	tests := []struct {
		name       string
		policy     *storagev1.FSGroupPolicy
		fsType     string
		modes      []v1.PersistentVolumeAccessMode
		mountGroup bool
		wantOwn    bool
		wantGroup  string
	}{
		{name: "default with fsType and RWO", fsType: "ext4", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, wantOwn: true},
		{name: "default without fsType", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
		{name: "default RWX", fsType: "ext4", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}},
		{name: "File", policy: &file, modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}, wantOwn: true},
		{name: "None", policy: &none, fsType: "ext4", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
		{name: "delegated to the driver", policy: &file, mountGroup: true, modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, wantGroup: "2000"},
		{name: "None is not delegated", policy: &none, mountGroup: true, modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &nodeServer{mountGroup: tc.mountGroup}
			e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) { cd.Spec.FSGroupPolicy = tc.policy }))
			pv := csiPV("pv-1", "vol-1")
			pv.Spec.CSI.FSType = tc.fsType
			pv.Spec.AccessModes = tc.modes
			p := pod("a")
			g := int64(2000)
			p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &g}
			m, err := e.pub.SetUpPersistent(context.Background(), p, claimVolume(), pv, false)
			if err != nil {
				t.Fatal(err)
			}
			if m.Ownership != tc.wantOwn {
				t.Errorf("Ownership = %v, want %v", m.Ownership, tc.wantOwn)
			}
			req := srv.last["publish"].(*csipb.NodePublishVolumeRequest)
			if got := req.GetVolumeCapability().GetMount().GetVolumeMountGroup(); got != tc.wantGroup {
				t.Errorf("VolumeMountGroup = %q, want %q", got, tc.wantGroup)
			}
		})
	}
}

type fakeTokens struct {
	reqs []*authenticationv1.TokenRequest
}

func (f *fakeTokens) RequestToken(_ context.Context, ns, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.reqs = append(f.reqs, req)
	out := req.DeepCopy()
	out.Status.Token = "token-for-" + req.Spec.Audiences[0] + "-" + ns + "-" + sa
	return out, nil
}

// A driver with tokenRequests gets the pod's service account tokens, bound
// to the pod, in the volume context.
func TestTokenRequests(t *testing.T) {
	srv := &nodeServer{}
	exp := int64(3600)
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) {
		cd.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: &exp}}
	}))
	tokens := &fakeTokens{}
	e.pub.opts.Tokens = tokens
	if _, err := e.pub.SetUpPersistent(context.Background(), pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false); err != nil {
		t.Fatal(err)
	}
	if len(tokens.reqs) != 1 || tokens.reqs[0].Spec.BoundObjectRef == nil || tokens.reqs[0].Spec.BoundObjectRef.UID != "a" || *tokens.reqs[0].Spec.ExpirationSeconds != exp {
		t.Fatalf("token requests %+v, want one bound to the pod", tokens.reqs)
	}
	var got map[string]struct {
		Token string `json:"token"`
	}
	req := srv.last["publish"].(*csipb.NodePublishVolumeRequest)
	if err := json.Unmarshal([]byte(req.VolumeContext[keyTokens]), &got); err != nil {
		t.Fatalf("tokens in the volume context: %v (%q)", err, req.VolumeContext[keyTokens])
	}
	if got["vault"].Token != "token-for-vault-ns-sa" {
		t.Errorf("tokens %+v", got)
	}
}

// A stage that fails half-way is still undone when the pod goes.
func TestStageErrorIsUndone(t *testing.T) {
	srv := &nodeServer{stage: true, stageErr: status.Error(codes.Internal, "mount failed: device busy")}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false); err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("error %v, want the driver's message", err)
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	got := srv.got()
	if len(got) != 2 || !strings.HasPrefix(got[0], "unpublish vol-1") || got[1] != "unstage vol-1" {
		t.Fatalf("driver calls %v, want an unpublish and an unstage", got)
	}
	if _, err := os.Stat(e.pub.StagingDir(testDriver, "vol-1")); !os.IsNotExist(err) {
		t.Errorf("staging directory left: %v", err)
	}
}

// A driver registered a moment before it serves its socket (its
// registrar was quicker) is waited for.
func TestRegisterWaitsForTheDriver(t *testing.T) {
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	d := NewDrivers(nil, nil)
	defer d.Close()
	done := make(chan error, 1)
	go func() { done <- d.Register(context.Background(), testDriver, sock, []string{"1.0.0"}) }()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	csipb.RegisterNodeServer(s, &nodeServer{stage: true})
	go func() { _ = s.Serve(l) }()
	defer s.Stop()
	if err := <-done; err != nil {
		t.Fatalf("Register: %v", err)
	}
	if drv, err := d.get(testDriver); err != nil || !drv.stage {
		t.Fatalf("driver %+v, %v", drv, err)
	}
}
