//go:build integration

package main

import (
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// TestVolumeStatsNeedsTheMount: NodeGetVolumeStats answers for a
// published target while it is a mount of the volume, and NotFound once
// the target is unmounted behind the driver's back or is a mount of
// something else.
func TestVolumeStatsNeedsTheMount(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-stats", VolumeCapabilities: []*csi.VolumeCapability{mountCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}})
	must(t, "CreateVolume", err)
	id := vol.GetVolume().GetVolumeId()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "pods", "a", "vol")
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCap()})
	must(t, "NodeStageVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap()})
	must(t, "NodePublishVolume", err)

	stats := func() error {
		_, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
		return err
	}
	must(t, "NodeGetVolumeStats of the published target", stats())
	_, err = c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: staging})
	must(t, "NodeGetVolumeStats of the staging path", err)

	must(t, "unmounting the target", unix.Unmount(target, 0))
	wantCode(t, "NodeGetVolumeStats of an unmounted target", stats(), codes.NotFound)

	other := t.TempDir()
	must(t, "bind-mounting another directory at the target", unix.Mount(other, target, "", unix.MS_BIND, ""))
	wantCode(t, "NodeGetVolumeStats of a target that is another mount", stats(), codes.NotFound)
	must(t, "unmounting the other directory", unix.Unmount(target, 0))

	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	must(t, "NodeUnpublishVolume", err)
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	must(t, "DeleteVolume", err)
}

// TestBlockVolumeStats: a published block volume's target is a mount of
// its loop device, and its stats are its capacity.
func TestBlockVolumeStats(t *testing.T) {
	td := startDriver(t, nil)
	c, ctx := dial(t, td), testContext(t)
	dir := filepath.Dir(td.cfg.Endpoint)
	vol, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-block-stats", VolumeCapabilities: []*csi.VolumeCapability{blockCap()},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	must(t, "CreateVolume", err)
	id := vol.GetVolume().GetVolumeId()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "publish", "a")
	_, err = c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: blockCap()})
	must(t, "NodeStageVolume", err)
	_, err = c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap()})
	must(t, "NodePublishVolume", err)
	st, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	must(t, "NodeGetVolumeStats of the block target", err)
	if u := st.GetUsage(); len(u) != 1 || u[0].GetUnit() != csi.VolumeUsage_BYTES || u[0].GetTotal() != 16<<20 {
		t.Errorf("block volume usage %v, want 16 MiB total", u)
	}
	_, err = c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	must(t, "NodeUnpublishVolume", err)
	_, err = c.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	must(t, "NodeUnstageVolume", err)
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	must(t, "DeleteVolume", err)
}
