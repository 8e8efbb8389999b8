package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// volumeStats is the collector of the kubelet_volume_stats_* metrics of
// the agent built last; registered once, on the first SetVolumeStats.
var volumeStats = &delegate{}

var registerVolumeStats sync.Once

// SetVolumeStats makes c, the stats provider's collector of the volume
// metrics, the one /metrics serves. It may be called more than once (an
// agent built again in the same process); the last c wins.
func SetVolumeStats(c prometheus.Collector) {
	volumeStats.set(c)
	registerVolumeStats.Do(func() { Registry.MustRegister(volumeStats) })
}

// delegate is an unchecked collector (its Describe sends nothing) that
// collects from the collector set last.
type delegate struct {
	mu sync.Mutex
	c  prometheus.Collector
}

func (d *delegate) set(c prometheus.Collector) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.c = c
}

func (d *delegate) Describe(chan<- *prometheus.Desc) {}

func (d *delegate) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if c != nil {
		c.Collect(ch)
	}
}
