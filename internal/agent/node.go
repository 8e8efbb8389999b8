package agent

import "github.com/heartlet/heartlet/internal/stats"

// machineMemory returns the machine's memory in bytes (stats.MachineMemory),
// or 0 when it cannot be read.
func machineMemory() int64 {
	n, err := stats.MachineMemory()
	if err != nil {
		return 0
	}
	return n
}
