package agent

import (
	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/eviction"
)

// reclaimableReader is the eviction manager's reader of reclaimable
// memory for --eviction-memory-signal: nil (upstream's working-set
// signal) unless the signal is reclaimable.
func reclaimableReader(signal string) eviction.ReclaimableReader {
	if signal != config.EvictionMemoryReclaimable {
		return nil
	}
	return eviction.HostReclaimable{CgroupRoot: "/sys/fs/cgroup", PressureFile: "/proc/pressure/memory"}
}
