//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestClusterCSIVolumeStats: a pod writes 8 MiB into a CSI claim of the
// test driver (which has GET_VOLUME_STATS); with volumeStatsAggPeriod 2s
// the pod's entry in /stats/summary (through the API server's node proxy)
// soon has the volume under its pod volume name with the claim's pvcRef and
// the driver's figures (the claim's 32 MiB or more, at least 8 MiB used);
// 4 MiB more written into the publish target show in the summary after the
// period, and /metrics has kubelet_volume_stats_used_bytes and
// _capacity_bytes for the claim.
func TestClusterCSIVolumeStats(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: "volumeStatsAggPeriod: 2s\n"})
	d := startCSIDriver(t, h)
	d.runController(t)
	_, pvName := d.dynamicClaim(t, "csi-stats")
	createPod(t, claimPod("csi-stats-writer", "csi-stats", "dd if=/dev/urandom of=/data/fill bs=1M count=8 && sync; "+sleeper, nil))
	p := waitAPIPodRunning(t, h, "csi-stats-writer")

	const mi = uint64(1) << 20
	var vol *statsapi.VolumeStats
	waitUsed := func(what string, atLeast uint64) {
		t.Helper()
		waitFor(t, time.Minute, what, func() (bool, string) {
			s, err := getSummary(t, "")
			if err != nil {
				return false, err.Error()
			}
			ps := summaryPod(s, "csi-stats-writer")
			if ps == nil {
				return false, "pod not in the summary"
			}
			for i := range ps.VolumeStats {
				if v := &ps.VolumeStats[i]; v.Name == "data" {
					vol = v
					return v.UsedBytes != nil && *v.UsedBytes >= atLeast, fmt.Sprintf("%+v", *v)
				}
			}
			return false, fmt.Sprintf("volumes %+v", ps.VolumeStats)
		})
	}
	waitUsed("the claim's volume stats in the summary", 8*mi)
	first := *vol.UsedBytes
	// Another 4 MiB written through the publish target on the host: the
	// stats follow on the period.
	if err := os.WriteFile(filepath.Join(csiTarget(h, string(p.UID), pvName), "more"), bytes.Repeat([]byte{1}, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUsed("the used bytes to grow by the 4 MiB written", first+4*mi)
	if vol.PVCRef == nil || vol.PVCRef.Name != "csi-stats" || vol.PVCRef.Namespace != "default" {
		t.Errorf("pvcRef = %+v, want default/csi-stats", vol.PVCRef)
	}
	if vol.CapacityBytes == nil || *vol.CapacityBytes < 32*mi || vol.AvailableBytes == nil || *vol.AvailableBytes > *vol.CapacityBytes-8*mi ||
		vol.Inodes == nil || vol.InodesUsed == nil || *vol.InodesUsed == 0 {
		t.Fatalf("volume stats = capacity %v available %v inodes %v used %v; want the claim's 32 MiB or more, 8 MiB less available, inodes", vol.CapacityBytes, vol.AvailableBytes, vol.Inodes, vol.InodesUsed)
	}

	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	labels := []string{"namespace", "default", "persistentvolumeclaim", "csi-stats"}
	if v, ok := sample(mfs, "kubelet_volume_stats_used_bytes", labels...); !ok || v < float64(first+4*mi) {
		t.Errorf("kubelet_volume_stats_used_bytes{default/csi-stats} = %v (present %v), want ≥ %d as in the summary", v, ok, first+4*mi)
	}
	if v, ok := sample(mfs, "kubelet_volume_stats_capacity_bytes", labels...); !ok || v != float64(*vol.CapacityBytes) {
		t.Errorf("kubelet_volume_stats_capacity_bytes{default/csi-stats} = %v (present %v), want %d as in the summary", v, ok, *vol.CapacityBytes)
	}
}
