package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// MemoryNotifier tells when the node's memory usage crosses a threshold,
// so a pass runs at once rather than at the next interval.
//
// Contract: Arm replaces the threshold (usage of the root memory cgroup
// in bytes, page cache included); C receives (without blocking the
// notifier: at most one pending value) when usage crosses it; Close
// releases it and ends what it started. Arm and Close are called from
// one goroutine.
type MemoryNotifier interface {
	Arm(ctx context.Context, usage uint64) error
	C() <-chan struct{}
	Close() error
}

// MemcgNotifier is a MemoryNotifier on a cgroup v1 memory hierarchy: an
// eventfd registered in cgroup.event_control on memory.usage_in_bytes.
type MemcgNotifier struct {
	dir string
	ch  chan struct{}

	mu    sync.Mutex
	efd   *os.File // nil until armed
	watch *os.File // memory.usage_in_bytes, open while armed
	usage uint64
	wg    sync.WaitGroup
}

// NewMemcgNotifier returns a notifier on the memory cgroup dir (the
// hierarchy's root for the node, e.g. /sys/fs/cgroup/memory). It fails
// when dir has no cgroup v1 memory files.
func NewMemcgNotifier(dir string) (*MemcgNotifier, error) {
	for _, f := range []string{"memory.usage_in_bytes", "cgroup.event_control"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Errorf("memory cgroup notification needs cgroup v1: %w", err)
		}
	}
	return &MemcgNotifier{dir: dir, ch: make(chan struct{}, 1)}, nil
}

// NewMemcgNotifierBelow returns a notifier on the memory cgroup cg below
// the hierarchy root (e.g. the kubepods cgroup, which may not exist yet:
// arming fails until it does). It fails when root has no cgroup v1 memory
// files.
func NewMemcgNotifierBelow(root, cg string) (*MemcgNotifier, error) {
	if _, err := NewMemcgNotifier(root); err != nil {
		return nil, err
	}
	return &MemcgNotifier{dir: filepath.Join(root, filepath.FromSlash(cg)), ch: make(chan struct{}, 1)}, nil
}

// C receives when usage crossed the armed threshold.
func (n *MemcgNotifier) C() <-chan struct{} { return n.ch }

// Arm registers a threshold of usage bytes, replacing the previous one
// (unchanged thresholds are kept as they are).
func (n *MemcgNotifier) Arm(ctx context.Context, usage uint64) error {
	n.mu.Lock()
	if n.efd != nil && n.usage == usage {
		n.mu.Unlock()
		return nil
	}
	n.mu.Unlock()
	if err := n.Close(); err != nil {
		return err
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	efd := os.NewFile(uintptr(fd), "memcg-eventfd")
	usageFile, err := os.Open(filepath.Join(n.dir, "memory.usage_in_bytes"))
	if err != nil {
		efd.Close()
		return fmt.Errorf("memory cgroup notification: %w", err)
	}
	line := fmt.Sprintf("%d %d %s", fd, usageFile.Fd(), strconv.FormatUint(usage, 10))
	if err := os.WriteFile(filepath.Join(n.dir, "cgroup.event_control"), []byte(line), 0); err != nil {
		efd.Close()
		usageFile.Close()
		return fmt.Errorf("memory cgroup notification: register threshold: %w", err)
	}
	n.mu.Lock()
	n.efd, n.watch, n.usage = efd, usageFile, usage
	n.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Eviction manager: memory threshold notification armed", "usageBytes", usage)
	n.wg.Add(1)
	go n.wait(efd)
	return nil
}

// wait relays the eventfd's events until it is closed.
func (n *MemcgNotifier) wait(efd *os.File) {
	defer n.wg.Done()
	buf := make([]byte, 8)
	for {
		if _, err := efd.Read(buf); err != nil {
			return // closed
		}
		select {
		case n.ch <- struct{}{}:
		default:
		}
	}
}

// Close drops the threshold; the kernel forgets it with the eventfd.
func (n *MemcgNotifier) Close() error {
	n.mu.Lock()
	efd, watch := n.efd, n.watch
	n.efd, n.watch = nil, nil
	n.mu.Unlock()
	if efd == nil {
		return nil
	}
	err := efd.Close()
	watch.Close()
	n.wg.Wait()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("memory cgroup notification: %w", err)
	}
	return nil
}

// MemoryUsageThreshold is the root memory cgroup usage at which the
// working set leaves less than the lowest of the memory.available
// thresholds (the first to be crossed): capacity less the threshold plus
// the inactive page cache, which usage counts and the working set does
// not. ok is false without a memory threshold or figures.
func MemoryUsageThreshold(ts []Threshold, s *statsapi.Summary) (usage uint64, ok bool) {
	if s == nil {
		return 0, false
	}
	return usageThreshold(ts, SignalMemoryAvailable, s.Node.Memory)
}

// AllocatableUsageThreshold is, likewise, the kubepods cgroup usage at
// which the pods' working set crosses the first allocatableMemory.available
// threshold, from the summary's pods system container.
func AllocatableUsageThreshold(ts []Threshold, s *statsapi.Summary) (usage uint64, ok bool) {
	if s == nil {
		return 0, false
	}
	for _, c := range s.Node.SystemContainers {
		if c.Name == statsapi.SystemContainerPods {
			return usageThreshold(ts, SignalAllocatableMemoryAvailable, c.Memory)
		}
	}
	return 0, false
}

func usageThreshold(ts []Threshold, sig Signal, m *statsapi.MemoryStats) (usage uint64, ok bool) {
	if m == nil || m.UsageBytes == nil || m.WorkingSetBytes == nil || m.AvailableBytes == nil {
		return 0, false
	}
	capacity := *m.AvailableBytes + *m.WorkingSetBytes
	inactive := *m.UsageBytes - min(*m.UsageBytes, *m.WorkingSetBytes)
	obs := bytesObservation(*m.AvailableBytes, capacity)
	var highest int64 = -1
	for _, t := range ts {
		if t.Signal != sig {
			continue
		}
		if v := t.Value.Of(obs.Capacity); v.Value() > highest {
			highest = v.Value()
		}
	}
	if highest < 0 || uint64(highest) > capacity {
		return 0, false
	}
	return capacity - uint64(highest) + inactive, true
}
