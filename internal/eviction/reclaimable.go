package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// DefaultPSIBound is the memory pressure (PSI "some avg10", percent)
// from which the page cache no longer counts as available under
// ReclaimableMemory: tasks stalled on memory more than a tenth of
// the last 10 seconds.
const DefaultPSIBound = 10.0

// ReclaimableReader reads what of the node's memory the kernel can
// reclaim cheaply.
//
// Contract: Read returns the page cache on the root memory cgroup's LRU
// lists and, where the kernel reports it, the memory pressure; an error
// means no reading (the upstream signal is used for that pass). It is
// called from one goroutine at a time.
type ReclaimableReader interface {
	Read(ctx context.Context) (Reclaimable, error)
}

// Reclaimable is one reading of the node's reclaimable memory.
type Reclaimable struct {
	// ActiveFile and InactiveFile are the file-backed pages on the active
	// and inactive LRU lists, in bytes (shared memory and tmpfs are not
	// among them: they are swap-backed).
	ActiveFile, InactiveFile uint64
	// PSI is the memory pressure; nil when the kernel has none (no
	// CONFIG_PSI, or psi=0).
	PSI *PSI
}

// ReclaimableMemory is memory.available under heartlet's
// --eviction-memory-signal=reclaimable.
// Upstream's working set already leaves out the inactive page cache; this
// signal also counts the active page cache as available (a pod that only
// reads big files fills it, and the kernel drops it under pressure), up
// to the capacity. Anonymous memory, shared memory and tmpfs stay used,
// so a pod that allocates memory still makes the signal fall. Once the
// kernel stalls on memory (PSI "some avg10" at or above bound), reclaiming
// page cache is no longer cheap and the working-set signal o is kept.
func ReclaimableMemory(o Observation, r Reclaimable, bound float64) Observation {
	if r.PSI != nil && r.PSI.Some.Avg10 >= bound {
		return o
	}
	avail := o.Available.Value()
	capacity := o.Capacity.Value()
	add := int64(min(r.ActiveFile, uint64(capacity)))
	if avail+add > capacity {
		avail = capacity
	} else {
		avail += add
	}
	return Observation{
		Available: *resource.NewQuantity(avail, resource.BinarySI),
		Capacity:  o.Capacity.DeepCopy(),
	}
}

// reclaimable applies ReclaimableMemory to the observations when the
// option is on, logging (and keeping upstream's signal) when the reading
// fails.
func (m *Manager) reclaimable(ctx context.Context, obs Observations) Observations {
	if m.opts.Reclaimable == nil {
		return obs
	}
	o, ok := obs[SignalMemoryAvailable]
	if !ok {
		return obs
	}
	r, err := m.opts.Reclaimable.Read(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Eviction manager: reclaimable memory unreadable; memory.available is the working-set signal for this pass")
		return obs
	}
	bound := m.opts.PSIBound
	if bound <= 0 {
		bound = DefaultPSIBound
	}
	obs[SignalMemoryAvailable] = ReclaimableMemory(o, r, bound)
	return obs
}

// HostReclaimable reads the host's reclaimable memory: the page cache
// from the root memory cgroup's memory.stat (cgroup v1: total_active_file
// and total_inactive_file below /sys/fs/cgroup/memory; cgroup v2:
// active_file and inactive_file in /sys/fs/cgroup) and the memory
// pressure from /proc/pressure/memory, system-wide on either hierarchy.
type HostReclaimable struct {
	// CgroupRoot is where the cgroup hierarchies are mounted
	// (/sys/fs/cgroup); PressureFile the memory pressure file
	// (/proc/pressure/memory).
	CgroupRoot   string
	PressureFile string
}

var _ ReclaimableReader = HostReclaimable{}

// errNoMemoryStat is returned when neither hierarchy has a memory.stat.
var errNoMemoryStat = errors.New("no root memory.stat on cgroup v1 or v2")

// Read reads memory.stat and the pressure file. An absent or disabled
// pressure file (ENOENT, EOPNOTSUPP) gives a reading without PSI; a
// malformed one is an error.
func (h HostReclaimable) Read(ctx context.Context) (Reclaimable, error) {
	var r Reclaimable
	b, err := os.ReadFile(filepath.Join(h.CgroupRoot, "memory", "memory.stat"))
	prefix := "total_"
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile(filepath.Join(h.CgroupRoot, "memory.stat"))
		prefix = ""
		if errors.Is(err, fs.ErrNotExist) {
			return r, errNoMemoryStat
		}
	}
	if err != nil {
		return r, fmt.Errorf("read memory.stat: %w", err)
	}
	if r.ActiveFile, r.InactiveFile, err = parseFileLRU(b, prefix); err != nil {
		return r, err
	}
	p, err := os.ReadFile(h.PressureFile)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.EOPNOTSUPP):
		klog.FromContext(ctx).V(5).Info("Memory pressure unavailable", "err", err)
		return r, nil
	case err != nil:
		return r, fmt.Errorf("read %s: %w", h.PressureFile, err)
	}
	psi, err := ParsePSI(p)
	if err != nil {
		return r, fmt.Errorf("%s: %w", h.PressureFile, err)
	}
	r.PSI = &psi
	return r, nil
}

// parseFileLRU reads <prefix>active_file and <prefix>inactive_file from a
// memory.stat.
func parseFileLRU(b []byte, prefix string) (active, inactive uint64, err error) {
	var hasA, hasI bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case prefix + "active_file":
			dst, hasA = &active, true
		case prefix + "inactive_file":
			dst, hasI = &inactive, true
		default:
			continue
		}
		if *dst, err = strconv.ParseUint(strings.TrimSpace(v), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("memory.stat %s: %w", k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("memory.stat: %w", err)
	}
	if !hasA || !hasI {
		return 0, 0, fmt.Errorf("memory.stat has no %sactive_file or %sinactive_file", prefix, prefix)
	}
	return active, inactive, nil
}
