package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
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
// means no reading (the upstream signal is used for that pass).
// PodActiveFile returns the active page cache charged to a pod's memory
// cgroup, in bytes; an error leaves the pod ranked by its working set.
// Both are called from one goroutine at a time.
type ReclaimableReader interface {
	Read(ctx context.Context) (Reclaimable, error)
	PodActiveFile(ctx context.Context, pod *v1.Pod) (uint64, error)
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

// reclaimablePodStats are the pods' stats for ranking them for signal s:
// under the reclaimable signal, for memory.available, each pod's working
// set less its active page cache (what the signal counts as available),
// so that a pod that only reads files is not taken for the one using the
// memory; otherwise stats as they are.
func (m *Manager) reclaimablePodStats(ctx context.Context, s Signal, pods []*v1.Pod, stats PodStats) PodStats {
	if m.opts.Reclaimable == nil || s != SignalMemoryAvailable {
		return stats
	}
	out := maps.Clone(stats)
	for _, p := range pods {
		ps, ok := out[p.UID]
		if !ok {
			continue
		}
		used, ok := stats.usage(p, v1.ResourceMemory)
		if !ok {
			continue
		}
		active, err := m.opts.Reclaimable.PodActiveFile(ctx, p)
		if err != nil {
			klog.FromContext(ctx).V(4).Info("Pod page cache unreadable; ranked by its working set", "pod", klog.KObj(p), "podUID", p.UID, "err", err)
			continue
		}
		ws := uint64(max(used.Value()-int64(min(active, uint64(used.Value()))), 0))
		mem := statsapi.MemoryStats{}
		if ps.Memory != nil {
			mem = *ps.Memory
		}
		mem.WorkingSetBytes = &ws
		ps.Memory = &mem
		out[p.UID] = ps
	}
	return out
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
// active_file and inactive_file in /sys/fs/cgroup), the memory pressure
// from /proc/pressure/memory, system-wide on either hierarchy, and a
// pod's active page cache from its cgroup's memory.stat.
type HostReclaimable struct {
	// CgroupRoot is where the cgroup hierarchies are mounted
	// (/sys/fs/cgroup); PressureFile the memory pressure file
	// (/proc/pressure/memory).
	CgroupRoot   string
	PressureFile string
	// PodCgroup is a pod's cgroup path within a hierarchy
	// (/kubepods/besteffort/pod<uid>), "" when pods have none.
	PodCgroup func(*v1.Pod) string
}

var _ ReclaimableReader = HostReclaimable{}

// errNoMemoryStat is returned when neither hierarchy has a memory.stat.
var errNoMemoryStat = errors.New("no root memory.stat on cgroup v1 or v2")

// memoryStat reads the memory.stat of cgroup path (relative to a
// hierarchy's root) on cgroup v1 or v2, with the prefix of its
// hierarchical counters ("total_" on v1).
func (h HostReclaimable) memoryStat(cgroup string) ([]byte, string, error) {
	b, err := os.ReadFile(filepath.Join(h.CgroupRoot, "memory", cgroup, "memory.stat"))
	if err == nil {
		return b, "total_", nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("read memory.stat: %w", err)
	}
	b, err = os.ReadFile(filepath.Join(h.CgroupRoot, cgroup, "memory.stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%s: %w", cgroup, errNoMemoryStat)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read memory.stat: %w", err)
	}
	return b, "", nil
}

// PodActiveFile reads the active page cache of the pod's cgroup.
func (h HostReclaimable) PodActiveFile(_ context.Context, pod *v1.Pod) (uint64, error) {
	var cg string
	if h.PodCgroup != nil {
		cg = h.PodCgroup(pod)
	}
	if cg == "" {
		return 0, errors.New("no pod cgroup")
	}
	b, prefix, err := h.memoryStat(cg)
	if err != nil {
		return 0, err
	}
	active, _, err := parseFileLRU(b, prefix)
	return active, err
}

// Read reads memory.stat and the pressure file. An absent or disabled
// pressure file (ENOENT, EOPNOTSUPP) gives a reading without PSI; a
// malformed one is an error.
func (h HostReclaimable) Read(ctx context.Context) (Reclaimable, error) {
	var r Reclaimable
	b, prefix, err := h.memoryStat("/")
	if err != nil {
		return r, err
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
