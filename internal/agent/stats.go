package agent

import (
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/server"
	"github.com/heartlet/heartlet/internal/stats"
)

// newStats builds the stats provider and its endpoints: /stats/summary,
// /metrics/resource and /metrics/cadvisor.
func newStats(opts *config.Options, rt stats.Runtime, clk clock.PassiveClock) server.StatsHandlers {
	p := stats.New(stats.Options{
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
	return server.StatsHandlers{
		Summary:         p,
		ResourceMetrics: p.ResourceMetricsHandler(),
		CadvisorMetrics: p.CadvisorMetricsHandler(),
	}
}
