package csi

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestVolumeStats: the stats of a published claim volume come from the
// driver's NodeGetVolumeStats on its publish path (with the staging path),
// under the pod's volume name and claim; they are read on the period, not
// when asked for, and go with the publication. A generic ephemeral
// volume's claim is <pod>-<volume>; an inline volume has no claim.
func TestVolumeStats(t *testing.T) {
	srv := &nodeServer{stage: true, volumeStats: true, statsUsed: 4096}
	e := newEnv(t, srv, csiDriverObj(func(cd *storagev1.CSIDriver) {
		cd.Spec.VolumeLifecycleModes = append(cd.Spec.VolumeLifecycleModes, "Persistent", "Ephemeral")
	}))
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e.pub.opts.Clock, e.pub.opts.StatsPeriod = clk, time.Minute
	ctx := context.Background()
	a := pod("a")
	if _, err := e.pub.SetUpPersistent(ctx, a, claimVolume(), csiPV("pv-1", "vol-1"), false); err != nil {
		t.Fatal(err)
	}
	eph := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}
	if _, err := e.pub.SetUpPersistent(ctx, a, eph, csiPV("pv-2", "vol-2"), false); err != nil {
		t.Fatal(err)
	}
	inline := &v1.Volume{Name: "inline", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: testDriver}}}
	if _, err := e.pub.SetUp(ctx, a, inline); err != nil {
		t.Fatal(err)
	}
	if got := e.pub.PodVolumeStats("a"); len(got) != 0 {
		t.Fatalf("stats before any read: %+v", got)
	}

	read := make(chan struct{}, 1)
	e.pub.afterStats = func() { read <- struct{}{} }
	waitRead := func(what string) {
		t.Helper()
		select {
		case <-read:
		case <-time.After(10 * time.Second):
			t.Fatalf("no read of the stats %s", what)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.pub.RunStats(runCtx) }()
	waitRead("at start")
	got := e.pub.PodVolumeStats("a")
	names := func(vs []statsapi.VolumeStats) []string {
		var out []string
		for _, v := range vs {
			ref := "-"
			if v.PVCRef != nil {
				ref = v.PVCRef.Namespace + "/" + v.PVCRef.Name
			}
			out = append(out, v.Name+"="+ref)
		}
		return out
	}
	if want := []string{"data=ns/c", "inline=-", "scratch=ns/p-a-scratch"}; !slices.Equal(names(got), want) {
		t.Fatalf("volume stats %v, want %v", names(got), want)
	}
	d := got[0]
	if *d.UsedBytes != 4096 || *d.CapacityBytes != 1<<30 || *d.AvailableBytes != 1<<30-4096 || *d.Inodes != 1000 || *d.InodesUsed != 10 || *d.InodesFree != 990 {
		t.Errorf("stats of data = used %d capacity %d available %d inodes %d/%d/%d", *d.UsedBytes, *d.CapacityBytes, *d.AvailableBytes, *d.Inodes, *d.InodesUsed, *d.InodesFree)
	}
	target := filepath.Join(e.root, "pods", "a", "volumes", "kubernetes.io~csi", "pv-1", "mount")
	staging := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", testDriver, sha("vol-1"), "globalmount")
	if !slices.Contains(srv.got(), "stats vol-1 "+target+" "+staging) {
		t.Errorf("driver calls %v, want NodeGetVolumeStats of vol-1 on %s with %s", srv.got(), target, staging)
	}

	// Read on the period only.
	srv.mu.Lock()
	srv.statsUsed = 8192
	srv.mu.Unlock()
	if *e.pub.PodVolumeStats("a")[0].UsedBytes != 4096 {
		t.Error("stats changed before the period")
	}
	clk.Step(time.Minute) // the ticker exists: made before the first read
	waitRead("after the period")
	if got := *e.pub.PodVolumeStats("a")[0].UsedBytes; got != 8192 {
		t.Errorf("used bytes after the period = %d, want 8192", got)
	}

	// A failing driver drops the volume's stats rather than keeping old
	// ones.
	srv.mu.Lock()
	srv.statsErr = errors.New("boom")
	srv.mu.Unlock()
	clk.Step(time.Minute)
	waitRead("with the driver failing")
	if got := e.pub.PodVolumeStats("a"); len(got) != 0 {
		t.Errorf("stats with the driver failing: %v", names(got))
	}
	// An unpublished volume is not asked for any more.
	srv.mu.Lock()
	srv.statsErr = nil
	srv.mu.Unlock()
	if err := e.pub.TearDown(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	calls := len(srv.got())
	clk.Step(time.Minute)
	waitRead("after the pod went")
	if got := e.pub.PodVolumeStats("a"); len(got) != 0 || len(srv.got()) != calls {
		t.Errorf("after the pod went: stats %v, calls %v", names(got), srv.got()[calls:])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := e.pub.PodVolumeStats(types.UID("b")); len(got) != 0 {
		t.Errorf("stats of an unknown pod: %v", names(got))
	}
}

// TestVolumeStatsWithoutCapability: a driver without GET_VOLUME_STATS is
// never asked, and its volumes have no stats, as upstream.
func TestVolumeStatsWithoutCapability(t *testing.T) {
	srv := &nodeServer{stage: true}
	e := newEnv(t, srv, csiDriverObj(nil))
	ctx := context.Background()
	if _, err := e.pub.SetUpPersistent(ctx, pod("a"), claimVolume(), csiPV("pv-1", "vol-1"), false); err != nil {
		t.Fatal(err)
	}
	e.pub.refreshStats(ctx)
	if got := e.pub.PodVolumeStats("a"); len(got) != 0 {
		t.Errorf("stats = %+v, want none", got)
	}
	for _, c := range srv.got() {
		if c[:5] == "stats" {
			t.Errorf("driver asked for stats without the capability: %s", c)
		}
	}
}
