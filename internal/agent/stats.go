package agent

import (
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/server"
	"github.com/heartlet/heartlet/internal/stats"
)

// newStats builds the stats provider and its endpoints: /stats/summary,
// /metrics/resource and /metrics/cadvisor, and registers the volume
// metrics on /metrics. volumes gives the stats of CSI volumes and local
// PVs.
func newStats(opts *config.Options, rt stats.Runtime, clk clock.PassiveClock, volumes stats.VolumeStatsFunc) (server.StatsHandlers, *stats.Provider) {
	p := stats.New(stats.Options{
		Volumes:    volumes,
		NodeName:   opts.NodeName,
		Runtime:    rt,
		RootDir:    opts.RootDir,
		PodLogsDir: opts.Config.PodLogsDir,
		CgroupRoot: opts.Config.CgroupRoot,
		// The runtime's driver must be the configured one unless CRI
		// RuntimeConfig says otherwise (newCgroups).
		CgroupDriver: opts.Config.CgroupDriver,
		Clock:        clk,
	})
	metrics.SetVolumeStats(p.VolumeMetrics())
	return server.StatsHandlers{
		Summary:         p,
		ResourceMetrics: p.ResourceMetricsHandler(),
		CadvisorMetrics: p.CadvisorMetricsHandler(),
	}, p
}

// claimVolumeStats are the stats of the pod's CSI volumes and local PVs.
// Their plugins are built with the workers, after the servers; stats are
// read only once the agent runs.
func (c *components) claimVolumeStats(uid types.UID) []statsapi.VolumeStats {
	var out []statsapi.VolumeStats
	if c.csiVolumes != nil {
		out = append(out, c.csiVolumes.PodVolumeStats(uid)...)
	}
	if c.claimVolumes != nil {
		out = append(out, c.claimVolumes.PodVolumeStats(uid)...)
	}
	return out
}
