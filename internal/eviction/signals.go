// Package eviction protects the node from running out of memory, disk or
// process IDs, as the upstream kubelet's eviction manager does: it reads
// the node's signals from the stats summary, compares them with the hard
// and soft thresholds (evictionHard, evictionSoft with their grace
// periods, evictionMinimumReclaim), reports the pressure conditions
// (MemoryPressure, DiskPressure, PIDPressure, held for
// evictionPressureTransitionPeriod after the signal recovers), refuses new
// pods under pressure, and evicts one pod per pass, ranked as upstream
// ranks them, through the pod workers.
//
// The decisions are pure functions of their inputs (observations,
// thresholds, times, pods and their stats); Manager holds the state
// between passes and performs the effects through the interfaces declared
// in types.go.
package eviction

import (
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Signal is an eviction signal, named as in the kubelet configuration.
type Signal string

// The signals heartlet observes.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
	// SignalAllocatableMemoryAvailable is what the pods may still use of
	// the kubepods cgroup's memory limit (node allocatable when
	// enforceNodeAllocatable has "pods"): the limit less the pods' working
	// set. As upstream, ParseThresholds copies every hard memory.available
	// threshold to it when pods are enforced.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
)

// Signals are every signal heartlet observes, in the order thresholds are
// acted on when several are met at once: memory first, then disk, then
// process IDs, as upstream.
var Signals = []Signal{
	SignalMemoryAvailable,
	SignalAllocatableMemoryAvailable,
	SignalNodeFsAvailable,
	SignalNodeFsInodesFree,
	SignalImageFsAvailable,
	SignalImageFsInodesFree,
	SignalPIDAvailable,
}

// Observation is one signal's reading: what is available and of how much.
type Observation struct {
	Available resource.Quantity
	Capacity  resource.Quantity
}

// Observations are the readings of one pass by signal; a signal without a
// reading is absent.
type Observations map[Signal]Observation

// Observe reads the signals from a stats summary:
//   - memory.available is the node's available memory (its memory less
//     the working set: on cgroup v1 the root memory cgroup's usage less
//     its total_inactive_file), of the working set plus that;
//   - nodefs.* are the root directory's filesystem (bytes and inodes);
//   - imagefs.* are the runtime's image filesystem;
//   - pid.available is the largest PID less the running processes, of
//     the largest PID;
//   - allocatableMemory.available is the pods' system container's
//     available memory (the kubepods cgroup's limit less its working set),
//     of the limit; absent while kubepods has no memory limit.
func Observe(s *statsapi.Summary) Observations {
	obs := Observations{}
	if s == nil {
		return obs
	}
	n := s.Node
	if m := n.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		obs[SignalMemoryAvailable] = bytesObservation(*m.AvailableBytes, *m.AvailableBytes+*m.WorkingSetBytes)
	}
	for _, c := range n.SystemContainers {
		if m := c.Memory; c.Name == statsapi.SystemContainerPods && m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
			obs[SignalAllocatableMemoryAvailable] = bytesObservation(*m.AvailableBytes, *m.AvailableBytes+*m.WorkingSetBytes)
		}
	}
	fsObservations(obs, n.Fs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	if n.Runtime != nil {
		fsObservations(obs, n.Runtime.ImageFs, SignalImageFsAvailable, SignalImageFsInodesFree)
	}
	if r := n.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		avail := max(*r.MaxPID-*r.NumOfRunningProcesses, 0)
		obs[SignalPIDAvailable] = Observation{
			Available: *resource.NewQuantity(avail, resource.DecimalSI),
			Capacity:  *resource.NewQuantity(*r.MaxPID, resource.DecimalSI),
		}
	}
	return obs
}

func fsObservations(obs Observations, fs *statsapi.FsStats, bytes, inodes Signal) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		obs[bytes] = bytesObservation(*fs.AvailableBytes, *fs.CapacityBytes)
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		obs[inodes] = Observation{
			Available: *resource.NewQuantity(int64(*fs.InodesFree), resource.DecimalSI),
			Capacity:  *resource.NewQuantity(int64(*fs.Inodes), resource.DecimalSI),
		}
	}
}

func bytesObservation(avail, capacity uint64) Observation {
	return Observation{
		Available: *resource.NewQuantity(int64(avail), resource.BinarySI),
		Capacity:  *resource.NewQuantity(int64(capacity), resource.BinarySI),
	}
}
