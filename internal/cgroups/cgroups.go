// Package cgroups manages the pod cgroup hierarchy on cgroup v1 and v2,
// with the cgroupfs driver:
//
//	<cgroupRoot>/kubepods                      Guaranteed pods, node allocatable
//	<cgroupRoot>/kubepods/burstable            Burstable pods
//	<cgroupRoot>/kubepods/besteffort           BestEffort pods
//	<cgroupRoot>/kubepods[/<class>]/pod<uid>   one pod, with pod-level limits
//
// or with the systemd driver, the same hierarchy as slices made through
// systemd's D-Bus API (see systemd.go):
//
//	/kubepods.slice
//	/kubepods.slice/kubepods-burstable.slice
//	/kubepods.slice/kubepods-besteffort.slice
//	/kubepods.slice/kubepods[-<class>].slice/kubepods[-<class>]-pod<uid>.slice
//
// The container runtime creates the sandbox and container cgroups below a
// pod's cgroup (the CRI cgroup_parent, see PodCgroupParent) but never
// removes the parents: heartlet creates, limits and removes the QoS and pod
// cgroups itself. On cgroup v1 a cgroup is created in every mounted
// hierarchy (so the runtime's children land below it everywhere); limits
// are written to the cpu, memory and pids controllers. cpuset cgroups get
// the parent's cpuset.cpus and cpuset.mems copied so they can hold tasks.
//
// The filesystem root is injectable, so tests run against a directory that
// mimics a v1 or v2 layout.
package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/qos"
)

// ErrBusy is returned (wrapped) by RemovePod when a pod cgroup still holds
// processes; the caller retries once the runtime has stopped them.
var ErrBusy = errors.New("cgroup still has processes")

// Names of the QoS cgroups and the pod cgroup prefix.
const (
	KubepodsName   = "kubepods"
	BurstableName  = "burstable"
	BestEffortName = "besteffort"
	PodPrefix      = "pod"
)

// DefaultRoot is where the cgroup filesystems are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// Options configure a Manager.
type Options struct {
	// Root is the cgroup filesystem mount point: the unified hierarchy on
	// cgroup v2, the directory holding one mount per controller on v1.
	// Default DefaultRoot.
	Root string
	// CgroupRoot is the cgroup (a path inside every hierarchy) under which
	// kubepods is created, the kubelet's cgroupRoot. Default "/".
	CgroupRoot string
	// Driver is the cgroup driver: DriverCgroupfs (the default) or
	// DriverSystemd, which needs systemd as init and CgroupRoot "/".
	Driver string
	// PodPidsLimit sets pids.max of every pod cgroup when positive.
	PodPidsLimit int64
	// DisableCPUQuota leaves CPU limits unenforced (cpuCFSQuota=false):
	// pod cgroups get no CFS quota.
	DisableCPUQuota bool
	// CPUPeriod is the CFS period for CPU limits (cpuCFSQuotaPeriod).
	// Default 100ms; at least 1ms and at most 1s.
	CPUPeriod time.Duration
	// NodeAllocatable, when set, limits the kubepods cgroup: cpu as
	// cpu.shares, memory, and ResourcePIDs as pids.max (see
	// PlanNodeAllocatable).
	NodeAllocatable v1.ResourceList
	// ReservedCgroups are existing cgroups EnsureQOS limits to their
	// reservation (enforceNodeAllocatable's reserved entries).
	ReservedCgroups []ReservedCgroup
}

// CheckDriver reports whether heartlet implements the cgroup driver ("" is
// cgroupfs): configuration validation and New share this rule. The error
// says what to use instead.
func CheckDriver(driver string) error {
	switch driver {
	case "", DriverCgroupfs, DriverSystemd:
		return nil
	default:
		return errors.New("unknown cgroup driver; use cgroupfs or systemd")
	}
}

// Manager creates, limits, lists and removes the QoS and pod cgroups. It is
// safe for concurrent use.
type Manager struct {
	root       string
	cgroupRoot string
	// systemd is set with the systemd driver: cgroups are slices made
	// through it.
	systemd   *systemdDriver
	v2        bool
	pidsLimit int64
	noQuota   bool
	period    uint64 // microseconds
	allocRes  v1.ResourceList
	reserved  []ReservedCgroup

	mu sync.Mutex // serializes writes of the QoS cgroups' limits
	// burstable holds the cpu requests (millicpus) of the burstable pods
	// that have a pod cgroup, burstableSum their sum; guarded by mu.
	burstable    map[types.UID]int64
	burstableSum int64
	// ensured is, per pod, the cgroup path and limits EnsurePod last
	// wrote, forgotten when anything else writes that pod's cgroup or
	// removes it; guarded by mu.
	ensured map[types.UID]ensuredPod

	// removed holds the pods whose cgroups RemovePod removed; the next
	// RemovePod of such a pod (its clean-up after its release) has nothing
	// to look for and forgets it. A cgroup of the pod made again after the
	// removal (by a sandbox the runtime created late) is found by the
	// sweep of pods with resources, whose RemovePod searches again.
	// Guarded by mu.
	removed map[types.UID]struct{}

	// hier is the v1 hierarchies once listed (see hierarchies), and
	// cpusetHier the one of them with the cpuset controller ("" without
	// one); guarded by hierMu.
	hierMu     sync.Mutex
	hier       []string
	cpusetHier string
	// allocErr is the last failure to limit kubepods, nil once limited;
	// guarded by mu.
	allocErr error
}

// New validates the options and detects the cgroup version: v2 when Root
// is a cgroup2 filesystem (or, for test layouts, holds cgroup.controllers),
// v1 otherwise. With the systemd driver systemd must run as init. It
// creates nothing.
func New(opts Options) (*Manager, error) {
	m, err := newUnchecked(opts)
	if err != nil {
		return nil, err
	}
	if m.systemd != nil {
		if err := m.systemd.check(); err != nil {
			return nil, fmt.Errorf("cgroup driver %q: %w", opts.Driver, err)
		}
	}
	return m, nil
}

// newUnchecked is New without the check that systemd runs.
func newUnchecked(opts Options) (*Manager, error) {
	if opts.Root == "" {
		opts.Root = DefaultRoot
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/"
	}
	if !path.IsAbs(opts.CgroupRoot) {
		return nil, fmt.Errorf("cgroup root %q: must be an absolute path", opts.CgroupRoot)
	}
	if err := CheckDriver(opts.Driver); err != nil {
		return nil, fmt.Errorf("cgroup driver %q: %w", opts.Driver, err)
	}
	var sd *systemdDriver
	if opts.Driver == DriverSystemd {
		if err := CheckSystemdRoot(opts.CgroupRoot); err != nil {
			return nil, err
		}
		sd = &systemdDriver{}
	}
	if opts.CPUPeriod == 0 {
		opts.CPUPeriod = qos.DefaultCPUPeriod * time.Microsecond
	}
	if opts.CPUPeriod < time.Millisecond || opts.CPUPeriod > time.Second {
		return nil, fmt.Errorf("cpu cfs quota period %s: must be between 1ms and 1s", opts.CPUPeriod)
	}
	v2, err := isUnified(opts.Root)
	if err != nil {
		return nil, err
	}
	return &Manager{
		root:       opts.Root,
		cgroupRoot: path.Clean(opts.CgroupRoot),
		systemd:    sd,
		v2:         v2,
		pidsLimit:  opts.PodPidsLimit,
		noQuota:    opts.DisableCPUQuota,
		period:     uint64(opts.CPUPeriod / time.Microsecond),
		allocRes:   opts.NodeAllocatable,
		reserved:   opts.ReservedCgroups,
		burstable:  map[types.UID]int64{},
		ensured:    map[types.UID]ensuredPod{},
		removed:    map[types.UID]struct{}{},
	}, nil
}

// isUnified reports whether root is a cgroup v2 (unified) hierarchy.
func isUnified(root string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return false, fmt.Errorf("cgroup filesystem %s: %w", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return true, nil
	}
	// A directory that mimics the unified layout (tests).
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return true, nil
	}
	return false, nil
}

// Version returns the cgroup version in use, 1 or 2.
func (m *Manager) Version() int {
	if m.v2 {
		return 2
	}
	return 1
}

// Driver returns the cgroup driver in use.
func (m *Manager) Driver() string {
	if m.systemd != nil {
		return DriverSystemd
	}
	return DriverCgroupfs
}

// qosName returns the name components of a QoS class's cgroup, below the
// cgroup root.
func qosName(class v1.PodQOSClass) []string {
	switch class {
	case v1.PodQOSBurstable:
		return []string{KubepodsName, BurstableName}
	case v1.PodQOSBestEffort:
		return []string{KubepodsName, BestEffortName}
	default:
		return []string{KubepodsName}
	}
}

// pathOf returns the cgroup path (inside every hierarchy) of the cgroup
// named by parts below the cgroup root, as the driver lays it out.
func (m *Manager) pathOf(parts []string) string {
	if m.systemd != nil {
		return systemdPath(parts)
	}
	return path.Join(m.cgroupRoot, cgroupfsPath(parts))
}

// qosPath returns the cgroup path of a QoS class.
func (m *Manager) qosPath(class v1.PodQOSClass) string {
	return m.pathOf(qosName(class))
}

// qosPaths are the cgroups a pod cgroup may live under.
func (m *Manager) qosPaths() []string {
	return []string{
		m.qosPath(v1.PodQOSGuaranteed),
		m.qosPath(v1.PodQOSBurstable),
		m.qosPath(v1.PodQOSBestEffort),
	}
}

// podPath returns the cgroup path of the pod with this UID under a QoS
// class.
func (m *Manager) podPath(class v1.PodQOSClass, uid types.UID) string {
	return m.pathOf(append(qosName(class), PodPrefix+string(uid)))
}

// PodCgroupPath returns the path of the pod's cgroup inside every
// hierarchy (/kubepods/burstable/pod<uid>, or with the systemd driver
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice),
// for readers of its files.
func (m *Manager) PodCgroupPath(pod *v1.Pod) string {
	return m.podPath(qos.Class(pod), pod.UID)
}

// PodCgroupParent returns the CRI cgroup_parent of the pod's sandbox, as
// upstream: with the cgroupfs driver the pod's cgroup path,
// <cgroupRoot>/kubepods/pod<uid> for Guaranteed pods,
// <cgroupRoot>/kubepods/burstable/pod<uid> and
// <cgroupRoot>/kubepods/besteffort/pod<uid> for the others; with the
// systemd driver the pod's slice name, such as
// kubepods-burstable-pod<uid>.slice, which the runtime expands.
func (m *Manager) PodCgroupParent(pod *v1.Pod) string {
	p := m.PodCgroupPath(pod)
	if m.systemd != nil {
		return path.Base(p)
	}
	return p
}

// validUID rejects UIDs that cannot name a single cgroup directory.
func validUID(uid types.UID) error {
	s := string(uid)
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
		return fmt.Errorf("pod uid %q: not usable in a cgroup name", s)
	}
	return nil
}

// uidFromDirName returns the pod UID named by a pod cgroup directory, and
// false for any other name.
func (m *Manager) uidFromDirName(name string) (types.UID, bool) {
	uid, ok := strings.CutPrefix(name, PodPrefix)
	if m.systemd != nil {
		uid, ok = systemdPodUID(name)
	}
	if !ok || validUID(types.UID(uid)) != nil {
		return "", false
	}
	return types.UID(uid), true
}

// EnsureQOS creates kubepods and its burstable and besteffort children in
// every hierarchy and sets their cpu weights: besteffort gets the minimum,
// burstable the sum of the cpu requests of the burstable pods with a pod
// cgroup (the minimum before any). kubepods is limited to NodeAllocatable
// when set; when that fails (memory in use above the new limit, as after
// lowering it) the error is logged and every later EnsurePod tries again,
// as upstream retries until evictions have made room. The reserved cgroups
// are then limited; one that does not exist is an error. Memory of the QoS
// classes stays unlimited. Idempotent.
func (m *Manager) EnsureQOS(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.checkControllers(); err != nil {
		return err
	}
	kubepods := m.qosPath(v1.PodQOSGuaranteed)
	if err := m.ensure(ctx, kubepods); err != nil {
		return err
	}
	bestEffort := m.qosPath(v1.PodQOSBestEffort)
	if err := m.ensure(ctx, bestEffort); err != nil {
		return err
	}
	if err := m.apply(bestEffort, Resources{CPUShares: ptr(uint64(qos.MinShares))}); err != nil {
		return err
	}
	if err := m.ensure(ctx, m.qosPath(v1.PodQOSBurstable)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writeBurstable(); err != nil {
		return err
	}
	m.allocErr = errors.New("not limited yet")
	m.limitKubepods(ctx)
	for _, rc := range m.reserved {
		if err := m.enforceReserved(rc); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Enforced node allocatable on reserved cgroup", "enforcement", rc.Name, "path", rc.Path, "limits", rc.Limits)
	}
	klog.FromContext(ctx).V(2).Info("Ensured QoS cgroups", "path", kubepods, "cgroupVersion", m.Version())
	return nil
}

// limitKubepods writes the kubepods limits unless already done. Callers
// hold mu.
func (m *Manager) limitKubepods(ctx context.Context) {
	if m.allocErr == nil {
		return
	}
	if len(m.allocRes) == 0 {
		m.allocErr = nil
		return
	}
	logger := klog.FromContext(ctx)
	kubepods := m.qosPath(v1.PodQOSGuaranteed)
	err := m.apply(kubepods, m.topLevelResources(m.allocRes, false))
	if err == nil {
		err = m.limitKubepodsHugePages(ctx, kubepods)
	}
	if err != nil {
		if m.allocErr.Error() != err.Error() {
			logger.Error(err, "Failed to limit the pods' cgroup to node allocatable; will retry", "path", kubepods)
		}
		m.allocErr = err
		return
	}
	m.allocErr = nil
	logger.Info("Limited the pods' cgroup to node allocatable", "path", kubepods, "limits", m.allocRes)
}

// UpdateQOS sets the burstable cgroup's cpu weight from the cpu requests of
// the burstable pods among pods, replacing what EnsurePod and RemovePod
// recorded. EnsureQOS must have created the QoS cgroups.
func (m *Manager) UpdateQOS(ctx context.Context, pods []*v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.burstable, m.burstableSum = map[types.UID]int64{}, 0
	for _, p := range pods {
		if milli, ok := burstableCPU(p); ok {
			m.burstableSum += milli - m.burstable[p.UID]
			m.burstable[p.UID] = milli
		}
	}
	if err := m.writeBurstable(); err != nil {
		return err
	}
	klog.FromContext(ctx).V(5).Info("Updated QoS cgroups", "pods", len(pods))
	return nil
}

// burstableCPU returns the pod's cpu request in millicpus when it is a
// Burstable pod.
func burstableCPU(pod *v1.Pod) (int64, bool) {
	if qos.Class(pod) != v1.PodQOSBurstable {
		return 0, false
	}
	reqs, _ := qos.PodRequestsAndLimits(pod)
	q := reqs[v1.ResourceCPU]
	return q.MilliValue(), true
}

// trackBurstable records (add) or forgets (!add) the pod among the
// burstable pods and rewrites the burstable weight when the sum changed.
// Callers hold mu.
func (m *Manager) trackBurstable(pod *v1.Pod, uid types.UID, add bool) error {
	before := m.burstableSum
	m.burstableSum -= m.burstable[uid]
	delete(m.burstable, uid)
	if add {
		if milli, ok := burstableCPU(pod); ok {
			m.burstable[uid] = milli
			m.burstableSum += milli
		}
	}
	if m.burstableSum == before {
		return nil
	}
	return m.writeBurstable()
}

// burstableMilli is the sum of the recorded burstable cpu requests.
// Callers hold mu.
func (m *Manager) burstableMilli() int64 { return m.burstableSum }

// writeBurstable writes the burstable cpu weight for the recorded pods.
// Callers hold mu.
func (m *Manager) writeBurstable() error {
	shares := qos.MilliCPUToShares(m.burstableMilli())
	return m.apply(m.qosPath(v1.PodQOSBurstable), Resources{CPUShares: &shares})
}

// EnsurePod creates the pod's cgroup (and any missing parent) in every
// hierarchy and writes its pod-level limits (see PodResources). Calling it
// again re-applies the limits.
func (m *Manager) EnsurePod(ctx context.Context, pod *v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validUID(pod.UID); err != nil {
		return err
	}
	p := m.PodCgroupPath(pod)
	res := m.PodResources(pod)
	m.mu.Lock()
	last, ok := m.ensured[pod.UID]
	// Ensured again, it is no longer removed: its cgroups are searched
	// for at its next removal, even if this call fails half-way.
	delete(m.removed, pod.UID)
	m.mu.Unlock()
	// A pod synced again with the limits already written: only check the
	// cgroup is still there, as upstream's pod cgroup manager does.
	if ok && last.path == p && last.res.equal(res) && m.systemd == nil && m.exists(p) {
		m.mu.Lock()
		m.limitKubepods(ctx)
		err := m.trackBurstable(pod, pod.UID, true)
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("update burstable cgroup: %w", err)
		}
		return nil
	}
	if err := m.ensure(ctx, p); err != nil {
		return err
	}
	// The burstable class grows before anything of the pod runs in it, as
	// upstream updates the QoS cgroups before it creates a pod's.
	m.mu.Lock()
	delete(m.ensured, pod.UID)
	m.limitKubepods(ctx)
	err := m.trackBurstable(pod, pod.UID, true)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("update burstable cgroup: %w", err)
	}
	if err := m.apply(p, res); err != nil {
		return err
	}
	m.mu.Lock()
	m.ensured[pod.UID] = ensuredPod{path: p, res: res}
	m.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Ensured pod cgroup", "pod", klog.KObj(pod), "podUID", pod.UID, "path", p)
	return nil
}

// ensuredPod is what EnsurePod last wrote for a pod.
type ensuredPod struct {
	path string
	res  Resources
}

// exists reports whether the cgroup cg is a directory in every hierarchy.
func (m *Manager) exists(cg string) bool {
	hs, err := m.hierarchies()
	if err != nil {
		return false
	}
	rel := filepath.FromSlash(strings.TrimPrefix(cg, "/"))
	for _, h := range hs {
		if fi, err := os.Stat(filepath.Join(h, rel)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// AdoptPod records a pod whose cgroup survived a restart of heartlet, so
// the burstable class's cpu weight counts it again. It creates no cgroup
// and writes no pod limit; a pod without a cgroup is left alone. It is
// idempotent.
func (m *Manager) AdoptPod(ctx context.Context, pod *v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validUID(pod.UID); err != nil {
		return err
	}
	hs, err := m.hierarchies()
	if err != nil {
		return err
	}
	found := false
	for _, h := range hs {
		dir := filepath.Join(h, filepath.FromSlash(m.PodCgroupPath(pod)))
		if _, err := os.Stat(dir); err == nil {
			found = true
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pod cgroup %s: %w", dir, err)
		}
	}
	if !found {
		return nil
	}
	m.mu.Lock()
	err = m.trackBurstable(pod, pod.UID, true)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("update burstable cgroup: %w", err)
	}
	klog.FromContext(ctx).V(4).Info("Adopted pod cgroup", "pod", klog.KObj(pod), "podUID", pod.UID)
	return nil
}

// RemovePod removes the pod's cgroup under whichever QoS class holds it,
// in every hierarchy, with the child cgroups the runtime left below it
// (depth first). It kills nothing: when any of those cgroups still holds a
// process it removes nothing and returns an error wrapping ErrBusy.
// Removing a pod without a cgroup succeeds, so it is safe without
// EnsurePod and idempotent.
func (m *Manager) RemovePod(ctx context.Context, uid types.UID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validUID(uid); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	// The pod no longer counts towards the burstable weight once it is
	// being removed: nothing of it runs.
	m.mu.Lock()
	last, known := m.ensured[uid]
	delete(m.ensured, uid)
	_, gone := m.removed[uid]
	delete(m.removed, uid)
	err := m.trackBurstable(nil, uid, false)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("update burstable cgroup: %w", err)
	}
	if gone {
		// Removed by the previous call, with nothing of the pod left to
		// run in it since: no hierarchy has to be searched again.
		logger.V(5).Info("Pod cgroup already removed", "podUID", uid)
		return nil
	}
	hs, err := m.hierarchies()
	if err != nil {
		return err
	}
	var trees []*cgroupTree
	var cgs []string
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		rel := m.podPath(class, uid)
		if known && rel != last.path {
			// A pod's QoS class never changes: a pod this manager
			// ensured has its cgroups under that class only.
			continue
		}
		found := false
		for _, h := range hs {
			t, err := readTree(filepath.Join(h, filepath.FromSlash(rel)))
			if err != nil {
				return fmt.Errorf("pod cgroup: %w", err)
			}
			if t != nil {
				trees = append(trees, t)
				found = true
			}
		}
		if found {
			cgs = append(cgs, rel)
		}
	}
	if len(trees) == 0 {
		logger.V(5).Info("Pod cgroup already removed", "podUID", uid)
		return nil
	}
	for _, t := range trees {
		if t.procs > 0 {
			return fmt.Errorf("pod cgroup %s holds %d processes: %w", t.dir, t.procs, ErrBusy)
		}
	}
	var errs []error
	if m.systemd != nil {
		// Stopping the slice removes its cgroups; what systemd does not
		// manage (hierarchies it does not know) goes below.
		for _, cg := range cgs {
			if err := m.systemd.remove(cg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, t := range trees {
		if err := t.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.mu.Lock()
	if _, again := m.ensured[uid]; !again {
		m.removed[uid] = struct{}{}
	}
	m.mu.Unlock()
	logger.V(2).Info("Removed pod cgroup", "podUID", uid, "hierarchies", len(trees))
	return nil
}

// ListPods returns the UIDs of the pod cgroups found under any QoS class in
// any hierarchy, sorted; with the runtime's pods it finds orphans to remove.
func (m *Manager) ListPods(ctx context.Context) ([]types.UID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hs, err := m.hierarchies()
	if err != nil {
		return nil, err
	}
	seen := map[types.UID]bool{}
	for _, h := range hs {
		for _, qp := range m.qosPaths() {
			dir := filepath.Join(h, filepath.FromSlash(qp))
			entries, err := os.ReadDir(dir)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list cgroup %s: %w", dir, err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					continue
				}
				if uid, ok := m.uidFromDirName(e.Name()); ok {
					seen[uid] = true
				}
			}
		}
	}
	out := make([]types.UID, 0, len(seen))
	for uid := range seen {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func ptr[T any](v T) *T { return &v }
