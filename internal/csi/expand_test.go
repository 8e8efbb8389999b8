package csi

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// expandServer is a nodeServer that can also expand volumes.
type expandServer struct {
	*nodeServer
	expand    bool // EXPAND_VOLUME
	expandErr error

	mu      sync.Mutex
	expands []*csipb.NodeExpandVolumeRequest
}

func (s *expandServer) NodeGetCapabilities(ctx context.Context, r *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp, err := s.nodeServer.NodeGetCapabilities(ctx, r)
	if err == nil && s.expand {
		resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_EXPAND_VOLUME}}})
	}
	return resp, err
}

func (s *expandServer) NodeExpandVolume(_ context.Context, r *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expands = append(s.expands, r)
	if s.expandErr != nil {
		return nil, s.expandErr
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}, nil
}

func (s *expandServer) calls() []*csipb.NodeExpandVolumeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.expands)
}

// resizeClaim is claim ns/c of 64Mi whose PV the resizer grew to 128Mi,
// with the resize status given ("" for none).
func resizeClaim(resizeStatus v1.ClaimResourceStatus) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "claim-uid", ResourceVersion: "5"},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1", Resources: v1.VolumeResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("128Mi")}}},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:              v1.ClaimBound,
			Capacity:           v1.ResourceList{v1.ResourceStorage: resource.MustParse("64Mi")},
			AllocatedResources: v1.ResourceList{v1.ResourceStorage: resource.MustParse("128Mi")},
			Conditions: []v1.PersistentVolumeClaimCondition{
				{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue},
			},
		},
	}
	if resizeStatus != "" {
		c.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: resizeStatus}
	}
	return c
}

func grownPV() *v1.PersistentVolume {
	pv := csiPV("pv-1", "vol-1")
	pv.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("128Mi")}
	return pv
}

func TestExpandPersistent(t *testing.T) {
	for _, tc := range []struct {
		name         string
		expandCap    bool
		expandErr    error
		resizeStatus v1.ClaimResourceStatus
		pvSize       string // the PV's capacity; default 128Mi
		readOnly     bool
		online       bool // the volume was published by an earlier sync
		wantCalls    int
		wantErr      bool
		wantCapacity string // the claim's status capacity after
		wantStatus   v1.ClaimResourceStatus
		wantConds    []v1.PersistentVolumeClaimConditionType
		wantEvents   []string
	}{
		{
			name: "at mount: expanded, status finished", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending,
			wantCalls: 1, wantCapacity: "128Mi",
			wantEvents: []string{"Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume \"pv-1\" node1",
				"Normal FileSystemResizeSuccessful MountVolume.NodeExpandVolume succeeded for volume \"pv-1\" node1"},
		},
		{
			name: "online, in progress since a failed write", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizeInProgress, online: true,
			wantCalls: 1, wantCapacity: "128Mi", wantEvents: []string{"Normal FileSystemResizeSuccessful", "Normal FileSystemResizeSuccessful"},
		},
		{
			name: "driver without EXPAND_VOLUME: only recorded", resizeStatus: v1.PersistentVolumeClaimNodeResizePending,
			wantCalls: 0, wantCapacity: "128Mi",
		},
		{
			name: "no resize status: the resizer did not ask", expandCap: true,
			wantCalls: 0, wantCapacity: "64Mi", wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending},
		},
		{
			name: "infeasible status: not retried", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizeInfeasible,
			wantCalls: 0, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInfeasible,
			wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending},
		},
		{
			name: "PV not larger than the claim", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending, pvSize: "64Mi",
			wantCalls: 0, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizePending,
			wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending},
		},
		{
			name: "read-only volume: not expanded", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending, readOnly: true,
			wantCalls: 0, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizePending,
			wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending},
		},
		{
			name: "at mount, driver error: the pod waits", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending,
			expandErr: status.Error(codes.Internal, "resize2fs failed"),
			wantCalls: 1, wantErr: true, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending, v1.PersistentVolumeClaimNodeResizeError},
		},
		{
			name: "online, driver error: an event, the pod goes on", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending, online: true,
			expandErr: status.Error(codes.Internal, "resize2fs failed"),
			wantCalls: 1, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds:  []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending, v1.PersistentVolumeClaimNodeResizeError},
			wantEvents: []string{"Warning FileSystemResizeFailed NodeExpandVolume.NodeExpandVolume failed for volume \"pv-1\" : NodeExpandVolume of volume \"pv-1\""},
		},
		{
			name: "online, transient error: the claim is not marked failed", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending, online: true,
			expandErr: status.Error(codes.Unavailable, "busy"),
			wantCalls: 1, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds:  []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending},
			wantEvents: []string{"Warning FileSystemResizeFailed"},
		},
		{
			name: "invalid argument: infeasible", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending, online: true,
			expandErr: status.Error(codes.OutOfRange, "too large"),
			wantCalls: 1, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInfeasible,
			wantConds:  []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending, v1.PersistentVolumeClaimNodeResizeError},
			wantEvents: []string{"Warning FileSystemResizeFailed"},
		},
		{
			name: "failed precondition at mount: the volume is not held back", expandCap: true, resizeStatus: v1.PersistentVolumeClaimNodeResizePending,
			expandErr: status.Error(codes.FailedPrecondition, "in use"),
			wantCalls: 1, wantCapacity: "64Mi", wantStatus: v1.PersistentVolumeClaimNodeResizeInProgress,
			wantConds: []v1.PersistentVolumeClaimConditionType{v1.PersistentVolumeClaimFileSystemResizePending, v1.PersistentVolumeClaimNodeResizeError},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &expandServer{nodeServer: &nodeServer{stage: true}, expand: tc.expandCap, expandErr: tc.expandErr}
			claim := resizeClaim(tc.resizeStatus)
			e := newExpandEnv(t, srv, claim)
			rec := record.NewFakeRecorder(10)
			e.pub.opts.Events = rec
			pv := grownPV()
			if tc.pvSize != "" {
				pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse(tc.pvSize)
			}
			ctx := context.Background()
			if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, tc.readOnly); err != nil {
				t.Fatal(err)
			}
			if tc.online {
				// A previous sync found nothing to do.
				e.pub.expand.done("a/pv-1")
			}
			err := e.pub.ExpandPersistent(ctx, pod("a"), claim, pv, tc.readOnly)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ExpandPersistent = %v, want error %v", err, tc.wantErr)
			}
			calls := srv.calls()
			if len(calls) != tc.wantCalls {
				t.Fatalf("%d NodeExpandVolume calls, want %d", len(calls), tc.wantCalls)
			}
			if len(calls) > 0 {
				c := calls[0]
				target := filepath.Join(e.root, "pods", "a", "volumes", "kubernetes.io~csi", "pv-1", "mount")
				staging := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", testDriver, sha("vol-1"), "globalmount")
				if c.VolumeId != "vol-1" || c.VolumePath != target || c.StagingTargetPath != staging ||
					c.GetCapacityRange().GetRequiredBytes() != 128<<20 || c.GetVolumeCapability().GetMount().GetFsType() != "ext4" {
					t.Errorf("NodeExpandVolume request %v", c)
				}
			}
			got, gerr := e.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			if q := got.Status.Capacity[v1.ResourceStorage]; q.Cmp(resource.MustParse(tc.wantCapacity)) != 0 {
				t.Errorf("status capacity %s, want %s", q.String(), tc.wantCapacity)
			}
			if s := got.Status.AllocatedResourceStatuses[v1.ResourceStorage]; s != tc.wantStatus {
				t.Errorf("allocatedResourceStatuses[storage] = %q, want %q", s, tc.wantStatus)
			}
			if tc.wantStatus == "" && got.Status.AllocatedResourceStatuses != nil {
				t.Errorf("allocatedResourceStatuses = %v, want none", got.Status.AllocatedResourceStatuses)
			}
			var conds []v1.PersistentVolumeClaimConditionType
			for _, c := range got.Status.Conditions {
				conds = append(conds, c.Type)
			}
			if !slices.Equal(conds, tc.wantConds) {
				t.Errorf("conditions %v, want %v", conds, tc.wantConds)
			}
			if q := got.Status.AllocatedResources[v1.ResourceStorage]; q.Cmp(resource.MustParse("128Mi")) != 0 {
				t.Errorf("allocatedResources changed: %v", got.Status.AllocatedResources)
			}
			events := drain(rec)
			if len(events) != len(tc.wantEvents) {
				t.Fatalf("events %q, want %q", events, tc.wantEvents)
			}
			for i, want := range tc.wantEvents {
				if !strings.HasPrefix(events[i], want) {
					t.Errorf("event %q, want it to start with %q", events[i], want)
				}
			}
		})
	}
}

// An expansion due at mount that failed is retried on the next sync and,
// once done, not again.
func TestExpandRetriedThenDone(t *testing.T) {
	srv := &expandServer{nodeServer: &nodeServer{stage: true}, expand: true, expandErr: status.Error(codes.Internal, "not yet")}
	claim := resizeClaim(v1.PersistentVolumeClaimNodeResizePending)
	e := newExpandEnv(t, srv, claim)
	ctx := context.Background()
	pv := grownPV()
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.ExpandPersistent(ctx, pod("a"), claim, pv, false); err == nil {
		t.Fatal("a failed expansion at mount did not fail")
	}
	srv.mu.Lock()
	srv.expandErr = nil
	srv.mu.Unlock()
	for i := range 2 {
		// Each sync reads the claim anew.
		claim, err := e.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), pv, false); err != nil {
			t.Fatal(err)
		}
		if err := e.pub.ExpandPersistent(ctx, pod("a"), claim, pv, false); err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	if n := len(srv.calls()); n != 2 {
		t.Errorf("%d NodeExpandVolume calls, want 2 (the failed one and its retry)", n)
	}
	got, err := e.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := got.Status.Capacity[v1.ResourceStorage]; q.String() != "128Mi" || len(got.Status.Conditions) != 0 || got.Status.AllocatedResourceStatuses != nil {
		t.Errorf("claim status %+v", got.Status)
	}
}

// A volume not published for the pod is not expanded.
func TestExpandUnpublished(t *testing.T) {
	srv := &expandServer{nodeServer: &nodeServer{stage: true}, expand: true}
	claim := resizeClaim(v1.PersistentVolumeClaimNodeResizePending)
	e := newExpandEnv(t, srv, claim)
	if err := e.pub.ExpandPersistent(context.Background(), pod("a"), claim, grownPV(), false); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.calls()); n != 0 {
		t.Errorf("%d NodeExpandVolume calls for a volume not published", n)
	}
}

// TestExpandPendingGoesWithThePod: a publication whose expansion has not
// been done yet is forgotten with its pod, not kept until a restart.
func TestExpandPendingGoesWithThePod(t *testing.T) {
	srv := &expandServer{nodeServer: &nodeServer{stage: true}, expand: true}
	e := newExpandEnv(t, srv, resizeClaim(v1.PersistentVolumeClaimNodeResizePending))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), grownPV(), false); err != nil {
		t.Fatal(err)
	}
	if !e.pub.expand.pending("a/pv-1") {
		t.Fatal("a fresh publication is not pending its expansion")
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if e.pub.expand.pending("a/pv-1") {
		t.Error("the expansion is still pending after the pod went")
	}
}

// newExpandEnv is newEnv for an expandServer, with the claim.
func newExpandEnv(t *testing.T, srv *expandServer, claim *v1.PersistentVolumeClaim) *env {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	kube := fake.NewClientset(csiDriverObj(nil), claim, node)
	e := &env{root: t.TempDir(), kube: kube, srv: srv.nodeServer}
	e.drivers = NewDrivers(nil, NewNodeInfo(kubeapifake.Wrap(kube), testNode))
	t.Cleanup(e.drivers.Close)
	if err := e.drivers.Register(context.Background(), testDriver, serveDriver(t, srv), []string{"1.0.0"}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	e.pub = e.newPublisher()
	return e
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A raw block claim is expanded on the node too: NodeExpandVolume on the
// pod's block publication, with the block access type and the block
// staging path, then the claim's status as for a filesystem.
func TestExpandPersistentBlock(t *testing.T) {
	srv := &expandServer{nodeServer: &nodeServer{stage: true}, expand: true}
	claim := resizeClaim(v1.PersistentVolumeClaimNodeResizePending)
	e := newExpandEnv(t, srv, claim)
	rec := record.NewFakeRecorder(10)
	e.pub.opts.Events = rec
	pv := grownPV()
	block := v1.PersistentVolumeBlock
	pv.Spec.VolumeMode = &block
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), pv, false); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.ExpandPersistent(ctx, pod("a"), claim, pv, false); err != nil {
		t.Fatalf("ExpandPersistent = %v", err)
	}
	calls := srv.calls()
	if len(calls) != 1 {
		t.Fatalf("%d NodeExpandVolume calls, want 1", len(calls))
	}
	c := calls[0]
	if c.VolumePath != e.pub.BlockPublishPath("pv-1", "a") || c.StagingTargetPath != e.pub.BlockStagingPath("pv-1") ||
		c.GetVolumeCapability().GetBlock() == nil || c.GetCapacityRange().GetRequiredBytes() != 128<<20 {
		t.Errorf("NodeExpandVolume request %v", c)
	}
	got, err := e.kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := got.Status.Capacity[v1.ResourceStorage]; q.Cmp(resource.MustParse("128Mi")) != 0 || got.Status.AllocatedResourceStatuses != nil {
		t.Errorf("claim status capacity %s, allocatedResourceStatuses %v; want 128Mi and none", q.String(), got.Status.AllocatedResourceStatuses)
	}
	if events := drain(rec); len(events) != 2 || !strings.HasPrefix(events[0], "Normal FileSystemResizeSuccessful") {
		t.Errorf("events %q, want FileSystemResizeSuccessful on the pod and the claim", events)
	}
}
