package csi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/volume"
)

func blockPV(name, handle string) *v1.PersistentVolume {
	pv := csiPV(name, handle)
	block := v1.PersistentVolumeBlock
	pv.Spec.VolumeMode = &block
	pv.Spec.CSI.FSType = ""
	return pv
}

func TestBlockStageOncePublishPerPod(t *testing.T) {
	for _, stage := range []bool{true, false} {
		t.Run(map[bool]string{true: "staging driver", false: "driver without staging"}[stage], func(t *testing.T) {
			srv := &nodeServer{stage: stage}
			e := newEnv(t, srv, csiDriverObj(nil))
			pv := blockPV("pv-1", "vol-1")
			ctx := context.Background()
			blockRoot := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", "volumeDevices")
			var targets []string
			for _, uid := range []string{"a", "b"} {
				m, err := e.pub.SetUpPersistentBlock(ctx, pod(uid), claimVolume(), pv, uid == "b")
				if err != nil {
					t.Fatalf("SetUpPersistentBlock %s: %v", uid, err)
				}
				link := filepath.Join(e.root, "pods", uid, "volumeDevices", "kubernetes.io~csi", "pv-1")
				if want := (volume.Mounted{HostPath: link, ReadOnly: uid == "b", Device: true}); m != want {
					t.Fatalf("Mounted = %+v, want %+v", m, want)
				}
				target := filepath.Join(blockRoot, "publish", "pv-1", uid)
				if got, err := os.Readlink(link); err != nil || got != target {
					t.Fatalf("link -> %q, %v; want %s", got, err, target)
				}
				targets = append(targets, target)
				req := srv.last["publish"].(*csipb.NodePublishVolumeRequest)
				if req.VolumeCapability.GetBlock() == nil || req.Readonly != (uid == "b") {
					t.Errorf("NodePublishVolume capability %v, readonly %t", req.VolumeCapability, req.Readonly)
				}
			}
			if _, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), pv, false); err != nil {
				t.Fatal(err)
			}
			staging := filepath.Join(blockRoot, "staging", "pv-1")
			want := []string{"publish vol-1 " + targets[0], "publish vol-1 " + targets[1]}
			if stage {
				want = append([]string{"stage vol-1"}, want...)
				req := srv.last["stage"].(*csipb.NodeStageVolumeRequest)
				if req.StagingTargetPath != staging || req.VolumeCapability.GetBlock() == nil {
					t.Errorf("NodeStageVolume at %s with %v, want %s and a Block access type", req.StagingTargetPath, req.VolumeCapability, staging)
				}
				if got := srv.last["publish"].(*csipb.NodePublishVolumeRequest).StagingTargetPath; got != staging {
					t.Errorf("publish got staging path %s, want %s", got, staging)
				}
			}
			if got := srv.got(); !slices.Equal(got, want) {
				t.Fatalf("driver calls %v, want %v", got, want)
			}
			var d map[string]string
			b, err := os.ReadFile(filepath.Join(blockRoot, "pv-1", "data", "vol_data.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			if d["specVolID"] != "pv-1" || d["volumeHandle"] != "vol-1" || d["driverName"] != testDriver || d["nodeName"] != testNode {
				t.Errorf("vol_data.json = %v", d)
			}
			if got := e.pub.VolumesInUse(); !slices.Equal(got, []v1.UniqueVolumeName{"kubernetes.io/csi/" + testDriver + "^vol-1"}) {
				t.Errorf("VolumesInUse = %v", got)
			}

			// After a restart the publications are found on disk: no new
			// call, and they are still released.
			e.pub = e.newPublisher()
			for _, uid := range []string{"a", "b"} {
				if err := e.pub.Reconstruct(ctx, pod(uid)); err != nil {
					t.Fatalf("Reconstruct %s: %v", uid, err)
				}
			}
			if _, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), pv, false); err != nil {
				t.Fatal(err)
			}
			n := len(want)
			if got := srv.got(); len(got) != n {
				t.Fatalf("calls after the restart: %v", got[n:])
			}
			if err := e.pub.TearDown(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if got := srv.got()[n:]; !slices.Equal(got, []string{"unpublish vol-1 " + targets[0]}) {
				t.Fatalf("calls after the first pod went: %v", got)
			}
			if err := e.pub.TearDown(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			want = []string{"unpublish vol-1 " + targets[1]}
			if stage {
				want = append(want, "unstage vol-1")
				if got := srv.last["unstage"].(*csipb.NodeUnstageVolumeRequest).StagingTargetPath; got != staging {
					t.Errorf("unstage path %s, want %s", got, staging)
				}
			}
			if got := srv.got()[n+1:]; !slices.Equal(got, want) {
				t.Fatalf("calls after the last pod went: %v, want %v", got, want)
			}
			if got := e.pub.VolumesInUse(); len(got) != 0 {
				t.Errorf("VolumesInUse after the last pod = %v", got)
			}
			for _, p := range []string{staging, filepath.Join(blockRoot, "pv-1"), filepath.Join(blockRoot, "publish", "pv-1"), filepath.Join(e.root, "pods", "b", "volumeDevices", "kubernetes.io~csi", "pv-1")} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left: %v", p, err)
				}
			}
			// Idempotent.
			if err := e.pub.TearDown(ctx, "b"); err != nil || len(srv.got()) != n+1+len(want) {
				t.Fatalf("TearDown again: %v, calls %v", err, srv.got())
			}
		})
	}
}

// A publication that fails half-way is still unpublished and unstaged
// when the pod goes.
func TestBlockFailedPublishReleased(t *testing.T) {
	srv := &nodeServer{stage: true, publishErr: status.Error(codes.Internal, "no loop device")}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	_, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), blockPV("pv-1", "vol-1"), false)
	if err == nil || status.Code(errors.Unwrap(err)) != codes.Internal {
		t.Fatalf("SetUpPersistentBlock: %v, want the driver's error", err)
	}
	if got := e.pub.VolumesInUse(); len(got) != 0 {
		t.Errorf("VolumesInUse with a failed publication = %v", got)
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "pv-1", "a")
	if got, want := srv.got(), []string{"stage vol-1", "unpublish vol-1 " + target, "unstage vol-1"}; !slices.Equal(got, want) {
		t.Fatalf("driver calls %v, want %v", got, want)
	}
}

// Block and filesystem publications of one pod are released each by its
// own path.
func TestBlockAndFilesystemTearDown(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), blockPV("pv-b", "vol-b"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-f", "vol-f"), false); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	got := srv.got()[4:]
	slices.Sort(got)
	want := []string{
		"unpublish vol-b " + filepath.Join(e.root, "plugins", "kubernetes.io", "csi", "volumeDevices", "publish", "pv-b", "a"),
		"unpublish vol-f " + filepath.Join(e.root, "pods", "a", "volumes", "kubernetes.io~csi", "pv-f", "mount"),
		"unstage vol-b", "unstage vol-f",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("calls at tear-down %v, want %v", got, want)
	}
}

// What upstream's kubelet left at its global map path for a pod (here a
// plain file: no bind mount, no loop device) is removed with the pod's
// volume, and the volume's directory goes with its last pod.
func TestBlockUpstreamGlobalMapReleased(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistentBlock(ctx, pod("a"), claimVolume(), blockPV("pv-1", "vol-1"), false); err != nil {
		t.Fatal(err)
	}
	volDir := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", "volumeDevices", "pv-1")
	global := filepath.Join(volDir, "dev", "a")
	if err := os.MkdirAll(filepath.Dir(global), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(global, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(volDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left: %v", volDir, err)
	}
	if got := srv.got(); len(got) != 4 || got[3] != "unstage vol-1" {
		t.Errorf("driver calls %v", got)
	}
}
