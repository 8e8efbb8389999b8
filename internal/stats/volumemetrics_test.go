package stats

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestVolumesMeasuredElsewhere: the stats Options.Volumes gives for a pod
// join its volume stats (sorted with the measured ones) without counting
// toward its ephemeral storage, and the volume metrics have one series
// per claim: a claim two pods use is reported once, a volume without a
// claim not at all.
func TestVolumesMeasuredElsewhere(t *testing.T) {
	f := newFixture(t)
	u := func(v uint64) *uint64 { return &v }
	claim := func(name string, used uint64) statsapi.VolumeStats {
		return statsapi.VolumeStats{
			Name:   name,
			PVCRef: &statsapi.PVCReference{Namespace: "default", Name: "claim-" + name},
			FsStats: statsapi.FsStats{CapacityBytes: u(1000), AvailableBytes: u(1000 - used), UsedBytes: u(used),
				Inodes: u(100), InodesFree: u(90), InodesUsed: u(10)},
		}
	}
	byPod := map[types.UID][]statsapi.VolumeStats{
		uidA: {claim("shared", 300), {Name: "inline", FsStats: statsapi.FsStats{UsedBytes: u(7)}}},
		uidB: {claim("shared", 300), claim("own", 5)},
	}
	withVolumes := New(Options{
		NodeName: "node-a", Runtime: f.rt, RootDir: f.rootDir, PodLogsDir: f.logsDir, CgroupFS: f.cgroups, ProcFS: f.proc, Clock: f.clock,
		Volumes: VolumeStatsFunc(func(uid types.UID) []statsapi.VolumeStats { return byPod[uid] }),
	})
	s, err := withVolumes.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := f.provider().Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	a := findPod(t, s, "a")
	var names []string
	for _, v := range a.VolumeStats {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, ","); got != "data,inline,shared" {
		t.Errorf("pod a's volumes = %s, want data (measured), inline, shared", got)
	}
	check(t, "a ephemeral storage (claims not counted)", *a.EphemeralStorage.UsedBytes, *findPod(t, plain, "a").EphemeralStorage.UsedBytes)

	want := `
# HELP kubelet_volume_stats_used_bytes Number of used bytes in the volume
# TYPE kubelet_volume_stats_used_bytes gauge
kubelet_volume_stats_used_bytes{namespace="default",persistentvolumeclaim="claim-own"} 5
kubelet_volume_stats_used_bytes{namespace="default",persistentvolumeclaim="claim-shared"} 300
# HELP kubelet_volume_stats_inodes_free Number of free inodes in the volume
# TYPE kubelet_volume_stats_inodes_free gauge
kubelet_volume_stats_inodes_free{namespace="default",persistentvolumeclaim="claim-own"} 90
kubelet_volume_stats_inodes_free{namespace="default",persistentvolumeclaim="claim-shared"} 90
# HELP kubelet_volume_stats_available_bytes Number of available bytes in the volume
# TYPE kubelet_volume_stats_available_bytes gauge
kubelet_volume_stats_available_bytes{namespace="default",persistentvolumeclaim="claim-own"} 995
kubelet_volume_stats_available_bytes{namespace="default",persistentvolumeclaim="claim-shared"} 700
`
	if err := testutil.CollectAndCompare(withVolumes.VolumeMetrics(), strings.NewReader(want),
		"kubelet_volume_stats_used_bytes", "kubelet_volume_stats_inodes_free", "kubelet_volume_stats_available_bytes"); err != nil {
		t.Error(err)
	}
	// A scrape reads the claims' stats alone, not a whole summary.
	f.clock.Step(time.Minute)
	f.srv.ResetCalls()
	if n := testutil.CollectAndCount(withVolumes.VolumeMetrics()); n != 12 {
		t.Errorf("volume metrics: %d series, want 12 (6 per claim, 2 claims)", n)
	}
	if calls := f.srv.Calls(); slices.Contains(calls, "ListContainerStats") {
		t.Errorf("a scrape of the volume metrics collected a summary: CRI calls %v", calls)
	}
	if n := testutil.CollectAndCount(f.provider().VolumeMetrics()); n != 0 {
		t.Errorf("volume metrics without claims: %d series, want none", n)
	}
}
