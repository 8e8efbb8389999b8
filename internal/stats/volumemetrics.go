package stats

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
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
// for heartlet's /metrics registry: on each scrape it reads the summary
// (a collection shared for CacheTTL) and emits the stats of every volume
// that comes from a claim, once per claim however many pods use it.
func (p *Provider) VolumeMetrics() prometheus.Collector { return volumeMetrics{p} }

type volumeMetrics struct{ p *Provider }

func (c volumeMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range volumeMetricDescs {
		ch <- d
	}
}

func (c volumeMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	s, err := c.p.Summary(ctx, false)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to collect volume stats for metrics")
		return
	}
	seen := map[[2]string]bool{}
	for _, ps := range s.Pods {
		for _, vs := range ps.VolumeStats {
			if vs.PVCRef == nil {
				continue
			}
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
}
