package stats

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/heartlet/heartlet/internal/runtime"
)

// The volume metrics of claims, as upstream's: one series per claim,
// labelled with its namespace and name.
var (
	volumeLabels             = []string{"namespace", "persistentvolumeclaim"}
	volumeCapacityBytesDesc  = prometheus.NewDesc("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", volumeLabels, nil)
	volumeAvailableBytesDesc = prometheus.NewDesc("kubelet_volume_stats_available_bytes", "Number of available bytes in the volume", volumeLabels, nil)
	volumeUsedBytesDesc      = prometheus.NewDesc("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", volumeLabels, nil)
	volumeInodesDesc         = prometheus.NewDesc("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", volumeLabels, nil)
	volumeInodesFreeDesc     = prometheus.NewDesc("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", volumeLabels, nil)
	volumeInodesUsedDesc     = prometheus.NewDesc("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", volumeLabels, nil)
	volumeMetricDescs        = []*prometheus.Desc{
		volumeCapacityBytesDesc, volumeAvailableBytesDesc, volumeUsedBytesDesc,
		volumeInodesDesc, volumeInodesFreeDesc, volumeInodesUsedDesc,
	}
)

// VolumeMetrics is the collector of the kubelet_volume_stats_* metrics,
// for heartlet's /metrics registry: on each scrape it emits the stats of
// every volume that comes from a claim (see claimVolumeStats), once per
// claim however many pods use it.
func (p *Provider) VolumeMetrics() prometheus.Collector { return volumeMetrics{p} }

type volumeMetrics struct{ p *Provider }

func (c volumeMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range volumeMetricDescs {
		ch <- d
	}
}

func (c volumeMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	claims, err := c.p.claimVolumeStats(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to collect volume stats for metrics")
		return
	}
	seen := map[[2]string]bool{}
	for _, vs := range claims {
		key := [2]string{vs.PVCRef.Namespace, vs.PVCRef.Name}
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, m := range []struct {
			desc *prometheus.Desc
			v    *uint64
		}{
			{volumeCapacityBytesDesc, vs.CapacityBytes}, {volumeAvailableBytesDesc, vs.AvailableBytes},
			{volumeUsedBytesDesc, vs.UsedBytes}, {volumeInodesDesc, vs.Inodes},
			{volumeInodesFreeDesc, vs.InodesFree}, {volumeInodesUsedDesc, vs.InodesUsed},
		} {
			if m.v != nil {
				ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, float64(*m.v), key[0], key[1])
			}
		}
	}
}

// claimVolumeStats are the stats of the claims' volumes of the pods with a
// ready sandbox, the pods a summary reports. They all come from
// Options.Volumes: a scrape reads them without collecting a summary (the
// CPU, memory, network and disk usage of every pod and container).
func (p *Provider) claimVolumeStats(ctx context.Context) ([]statsapi.VolumeStats, error) {
	if p.opts.Volumes == nil {
		return nil, nil
	}
	pods, err := p.opts.Runtime.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	var out []statsapi.VolumeStats
	for _, rp := range pods {
		if len(rp.Sandboxes) == 0 || rp.Sandboxes[0].State != runtime.SandboxReady {
			continue
		}
		for _, vs := range p.opts.Volumes.PodVolumeStats(rp.UID) {
			if vs.PVCRef != nil {
				out = append(out, vs)
			}
		}
	}
	return out, nil
}
