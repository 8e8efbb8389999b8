package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/heartlet/heartlet/internal/qos"
)

// ResourcePIDs is the reservable process count (systemReserved/kubeReserved
// "pid"), upstream's internal resource: not part of the Node's capacity,
// only of the limits of the top-level cgroups.
const ResourcePIDs v1.ResourceName = "pid"

// The enforceNodeAllocatable entries.
const (
	EnforcePods                     = "pods"
	EnforceSystemReserved           = "system-reserved"
	EnforceSystemReservedCompressed = "system-reserved-compressible"
	EnforceKubeReserved             = "kube-reserved"
	EnforceKubeReservedCompressed   = "kube-reserved-compressible"
	EnforceNone                     = "none"
)

// NodeAllocatableConfig is what enforceNodeAllocatable acts on.
type NodeAllocatableConfig struct {
	// Enforce is enforceNodeAllocatable: EnforcePods and the
	// reserved-cgroup entries; empty or EnforceNone enforces nothing.
	Enforce []string
	// Capacity is the machine's capacity (cpu, memory, huge pages) with
	// the system-wide task limit as ResourcePIDs when known.
	Capacity v1.ResourceList
	// SystemReserved and KubeReserved are systemReserved and kubeReserved.
	SystemReserved, KubeReserved v1.ResourceList
	// SystemReservedCgroup and KubeReservedCgroup are the absolute cgroup
	// paths the reservations are enforced on.
	SystemReservedCgroup, KubeReservedCgroup string
}

// ReservedCgroup is an existing cgroup outside kubepods whose limits are
// the reservation for the daemons it holds.
type ReservedCgroup struct {
	// Name is the enforceNodeAllocatable entry, for messages.
	Name string
	// Path is the absolute cgroup path (in every hierarchy on v1).
	Path string
	// Limits are cpu (as cpu.shares), memory and ResourcePIDs.
	Limits v1.ResourceList
	// CompressibleOnly limits cpu only (the "-compressible" entries).
	CompressibleOnly bool
}

// PlanNodeAllocatable returns the limits of the kubepods cgroup and the
// reserved cgroups to limit, as upstream enforces node allocatable:
// kubepods gets the capacity minus systemReserved and kubeReserved (never
// negative; memory also less the huge pages, which it does not count, and
// huge pages limited to theirs) when "pods" is enforced and the whole
// capacity otherwise
// (without a cpu weight a top-level cgroup would starve its pods). The
// hard eviction thresholds are not taken off: heartlet evicts before the
// kernel's limit is reached. Each reserved entry limits its cgroup to its
// reservation.
func PlanNodeAllocatable(c NodeAllocatableConfig) (kubepods v1.ResourceList, reserved []ReservedCgroup) {
	kubepods = c.Capacity.DeepCopy()
	if slices.Contains(c.Enforce, EnforcePods) {
		kubepods = qos.SubtractReserved(c.Capacity, c.SystemReserved, c.KubeReserved)
		// Huge pages are reserved memory the memory limit does not count.
		if mem, ok := kubepods[v1.ResourceMemory]; ok {
			for name, q := range kubepods {
				if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
					mem.Sub(q)
				}
			}
			if mem.Sign() < 0 {
				mem.Set(0)
			}
			kubepods[v1.ResourceMemory] = mem
		}
	}
	for _, e := range c.Enforce {
		switch e {
		case EnforceSystemReserved, EnforceSystemReservedCompressed:
			reserved = append(reserved, ReservedCgroup{Name: e, Path: c.SystemReservedCgroup,
				Limits: c.SystemReserved.DeepCopy(), CompressibleOnly: e == EnforceSystemReservedCompressed})
		case EnforceKubeReserved, EnforceKubeReservedCompressed:
			reserved = append(reserved, ReservedCgroup{Name: e, Path: c.KubeReservedCgroup,
				Limits: c.KubeReserved.DeepCopy(), CompressibleOnly: e == EnforceKubeReservedCompressed})
		}
	}
	return kubepods, reserved
}

// topLevelResources turns the limits of a top-level cgroup (kubepods or a
// reserved one) into cgroup values: cpu as cpu.shares, memory, and
// ResourcePIDs as pids.max (without a pids controller, no task limit).
// Absent resources are left as they are.
func (m *Manager) topLevelResources(l v1.ResourceList, compressibleOnly bool) Resources {
	var r Resources
	if q, ok := l[v1.ResourceCPU]; ok {
		r.CPUShares = ptr(qos.MilliCPUToShares(q.MilliValue()))
	}
	if compressibleOnly {
		return r
	}
	// Zero is no value (as for runc), never "limit to nothing".
	if q, ok := l[v1.ResourceMemory]; ok && q.Value() > 0 {
		r.Memory = ptr(q.Value())
	}
	if q, ok := l[ResourcePIDs]; ok && q.Value() > 0 && m.hasController("pids") {
		r.PidsMax = ptr(q.Value())
	}
	return r
}

// Files holding the system-wide task limits.
const (
	pidMaxFile     = "/proc/sys/kernel/pid_max"
	threadsMaxFile = "/proc/sys/kernel/threads-max"
)

// MaxTasks is the system-wide task limit, the smaller of kernel.pid_max and
// kernel.threads-max: the ResourcePIDs capacity, as upstream counts it.
func MaxTasks() (int64, error) {
	return maxTasks(os.ReadFile)
}

func maxTasks(readFile func(string) ([]byte, error)) (int64, error) {
	n := int64(-1)
	for _, f := range []string{pidMaxFile, threadsMaxFile} {
		b, err := readFile(f)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", f, err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", f, err)
		}
		if n < 0 || v < n {
			n = v
		}
	}
	return n, nil
}

// TaskCapacity returns capacity with the system-wide task limit added as
// ResourcePIDs.
func TaskCapacity(capacity v1.ResourceList, tasks int64) v1.ResourceList {
	out := capacity.DeepCopy()
	if out == nil {
		out = v1.ResourceList{}
	}
	out[ResourcePIDs] = *resource.NewQuantity(tasks, resource.DecimalSI)
	return out
}

// enforceReserved writes the limits of a reserved cgroup, which must exist
// in every hierarchy the limits are written to, as upstream refuses to
// create it.
func (m *Manager) enforceReserved(rc ReservedCgroup) error {
	if rc.Path == "" || !path.IsAbs(rc.Path) {
		return fmt.Errorf("%s cgroup %q: must be an absolute cgroup path", rc.Name, rc.Path)
	}
	r := m.topLevelResources(rc.Limits, rc.CompressibleOnly)
	rel := filepath.FromSlash(strings.TrimPrefix(path.Clean(rc.Path), "/"))
	var dirs []string
	if m.v2 {
		dirs = append(dirs, filepath.Join(m.root, rel))
	} else {
		for _, c := range []string{"cpu", "memory", "pids"} {
			if c == "pids" && r.PidsMax == nil {
				continue
			}
			dirs = append(dirs, filepath.Join(m.root, c, rel))
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s cgroup %q does not exist (%s missing); create it before starting heartlet", rc.Name, rc.Path, d)
		} else if err != nil {
			return fmt.Errorf("%s cgroup %q: %w", rc.Name, rc.Path, err)
		}
	}
	if err := m.apply(rc.Path, r); err != nil {
		return fmt.Errorf("%s cgroup %q: %w", rc.Name, rc.Path, err)
	}
	return nil
}
