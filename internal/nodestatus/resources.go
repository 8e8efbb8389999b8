package nodestatus

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/qos"
)

// Eviction signals that reserve capacity when they have a hard threshold,
// and the resource each one reserves.
var evictionReserves = map[string]v1.ResourceName{
	"memory.available": v1.ResourceMemory,
	"nodefs.available": v1.ResourceEphemeralStorage,
}

// MachineCapacity measures the machine's CPUs, memory and huge pages, the
// capacity the node reports for them and the top-level cgroups are sized
// from.
func MachineCapacity() (v1.ResourceList, error) {
	return realHost().machine()
}

func (h host) machine() (v1.ResourceList, error) {
	mem, err := h.memTotal()
	if err != nil {
		return nil, err
	}
	c := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(h.cpus()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}
	for k, v := range h.hugepages() {
		c[k] = v
	}
	return c, nil
}

// capacity measures the machine: CPUs, memory, huge pages, the root
// directory's filesystem (unless NoLocalStorage), and the pod
// limit.
func (m *Manager) capacity() (v1.ResourceList, error) {
	c, err := m.host.machine()
	if err != nil {
		return nil, err
	}
	c[v1.ResourcePods] = *resource.NewQuantity(int64(m.opts.MaxPods), resource.DecimalSI)
	if m.opts.NoLocalStorage {
		return c, nil
	}
	size, err := m.host.filesystemSize(m.opts.RootDir)
	if err != nil {
		return nil, fmt.Errorf("ephemeral-storage capacity of root directory: %w", err)
	}
	c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(size), resource.BinarySI)
	return c, nil
}

// allocatable is capacity minus the reservations (kube and system
// reserved), minus the hard eviction thresholds of memory.available and
// nodefs.available, minus huge pages from memory; never negative.
func allocatable(capacity, reserved v1.ResourceList, evictionHard map[string]string) (v1.ResourceList, error) {
	evict, err := evictionReservation(evictionHard, capacity)
	if err != nil {
		return nil, err
	}
	out := qos.SubtractReserved(capacity, reserved, evict)
	if mem, ok := out[v1.ResourceMemory]; ok {
		for name, c := range capacity {
			if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				mem.Sub(c)
			}
		}
		out[v1.ResourceMemory] = mem
	}
	for name, v := range out {
		if v.Sign() < 0 {
			v.Set(0)
			out[name] = v
		}
	}
	return out, nil
}

// evictionReservation turns the hard eviction thresholds that reserve
// capacity into quantities; a percentage is of the resource's capacity.
func evictionReservation(evictionHard map[string]string, capacity v1.ResourceList) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for signal, value := range evictionHard {
		name, ok := evictionReserves[signal]
		if !ok {
			continue
		}
		q, err := thresholdQuantity(value, capacity[name])
		if err != nil {
			return nil, fmt.Errorf("evictionHard[%s]: %w", signal, err)
		}
		out[name] = q
	}
	return out, nil
}

// thresholdQuantity parses an eviction threshold: a quantity ("100Mi") or
// a percentage of capacity ("10%").
func thresholdQuantity(value string, capacity resource.Quantity) (resource.Quantity, error) {
	value = strings.TrimSpace(value)
	if pct, ok := strings.CutSuffix(value, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p < 0 || p > 100 {
			return resource.Quantity{}, fmt.Errorf("percentage %q: want a number between 0 and 100", value)
		}
		return *resource.NewQuantity(int64(float64(capacity.Value())*p/100), resource.BinarySI), nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("quantity %q: %w", value, err)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("quantity %q is negative", value)
	}
	return q, nil
}
