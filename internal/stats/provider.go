// Package stats collects the resource usage of the node, its pods and
// their containers on demand, as the kubelet's summary API reports it
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1): CPU and memory from the
// cgroups (the runtime's container stats where a cgroup cannot be read),
// network from /proc/net/dev of the host and of each pod's sandbox,
// filesystems with statfs, the runtime's image filesystem and writable
// layers through CRI, and log, volume and ephemeral-storage usage by
// walking the directories.
//
// Collections are cached briefly (CacheTTL) and directory walks longer
// (DiskTTL); CPU rates (usageNanoCores) are the change of the cumulative
// usage since the previous collection. The same collection also feeds the
// Prometheus endpoints /metrics/resource and /metrics/cadvisor.
package stats

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/volume"
)

// Defaults of Options.
const (
	DefaultCacheTTL = time.Second
	DefaultDiskTTL  = 10 * time.Second
	DefaultCgroupFS = "/sys/fs/cgroup"
	DefaultProcFS   = "/proc"
	// defaultInterface is the interface whose counters are a network's
	// top-level figures, as the kubelet's summary reports eth0.
	defaultInterface = "eth0"
	// userHZ is the unit of the CPU times of /proc/stat.
	userHZ = 100
	// rateKeep is how long the CPU sample of a pod or container no longer
	// seen is kept.
	rateKeep = 5 * time.Minute
)

// Runtime is the part of the container runtime the stats read.
type Runtime interface {
	ListPods(ctx context.Context) ([]*runtime.PodStatus, error)
	ListContainerStats(ctx context.Context) ([]runtime.ContainerStats, error)
	ImageFsInfo(ctx context.Context) ([]runtime.FsUsage, error)
	SandboxPid(ctx context.Context, id string) (int, error)
	ListImages(ctx context.Context) ([]*runtimeapi.Image, error)
}

// Options configure a Provider.
type Options struct {
	// NodeName is the summary's node name.
	NodeName string
	Runtime  Runtime
	// RootDir is the kubelet root dir: the node filesystem, and the pods'
	// volumes below <RootDir>/pods/<uid>/volumes.
	RootDir string
	// PodLogsDir holds the containers' logs,
	// <PodLogsDir>/<namespace>_<name>_<uid>/<container>/.
	PodLogsDir string
	// CgroupRoot is the kubelet's cgroupRoot, the parent of kubepods.
	// Default "/".
	CgroupRoot string
	// CgroupDriver names the pod cgroups: cgroupfs (the default) or
	// systemd (kubepods.slice and its slices).
	CgroupDriver string
	// CgroupFS and ProcFS are where the cgroup and proc filesystems are
	// mounted; defaults DefaultCgroupFS and DefaultProcFS.
	CgroupFS string
	ProcFS   string
	// Clock stamps the collections; default the real clock.
	Clock clock.PassiveClock
	// CacheTTL is how long a collection is reused, DiskTTL how long a
	// directory's usage is; defaults DefaultCacheTTL and DefaultDiskTTL.
	CacheTTL time.Duration
	DiskTTL  time.Duration
	// Volumes reports the stats of the pod volumes the provider does not
	// measure itself (those measured by their CSI drivers); nil: none.
	Volumes VolumeStatser
}

// VolumeStatser gives the stats of a pod's volumes measured elsewhere.
//
// Contract: PodVolumeStats returns, without blocking on a driver or the
// disk, the last stats known for the pod's volumes, each named by the
// pod's volume name and carrying its claim for volumes from claims; none
// of them is one the provider measures below the pod's volume directories.
type VolumeStatser interface {
	PodVolumeStats(uid types.UID) []statsapi.VolumeStats
}

// VolumeStatsFunc is a function that is a VolumeStatser.
type VolumeStatsFunc func(uid types.UID) []statsapi.VolumeStats

// PodVolumeStats implements VolumeStatser.
func (f VolumeStatsFunc) PodVolumeStats(uid types.UID) []statsapi.VolumeStats { return f(uid) }

// Provider collects stats. It is safe for concurrent use.
type Provider struct {
	opts    Options
	clock   clock.PassiveClock
	cgroups *cgroupReader // nil when no cgroup filesystem is readable
	proc    procFS
	du      *duCache

	mu    sync.Mutex // serializes collections; guards the fields below
	cache map[bool]*snapshot
	rates map[string]cpuSample
	pids  map[string]int // sandbox pid by sandbox ID
}

// cpuSample is the last cumulative CPU reading of a node, pod or container
// and the rate derived from the one before.
type cpuSample struct {
	nanos uint64
	at    time.Time
	rate  *uint64
}

// snapshot is one collection: the summary and what the cAdvisor metrics
// need beyond it, index for index.
type snapshot struct {
	at      time.Time
	summary *statsapi.Summary
	pods    []podMeta
	node    nodeMeta
}

type podMeta struct {
	cgroup     string       // "" when the pod has none
	cg         *cgroupStats // nil without a cgroup
	sandboxID  string
	containers []containerMeta
	// ifaces are the counters of the pod's interfaces (full collections).
	ifaces []ifaceStats
}

type containerMeta struct {
	id, image, cgroup string
	cg                *cgroupStats // nil when read from the runtime
	// fsDevice is the filesystem of the writable layer.
	fsDevice string
}

type nodeMeta struct {
	cg     *cgroupStats
	ifaces []ifaceStats
	// rootDevice is the mountpoint the node filesystem is reported for.
	rootDevice string
}

// New returns a Provider. The cgroup filesystem is optional: without it
// CPU and memory come from the runtime.
func New(opts Options) *Provider {
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/"
	}
	if opts.CgroupFS == "" {
		opts.CgroupFS = DefaultCgroupFS
	}
	if opts.ProcFS == "" {
		opts.ProcFS = DefaultProcFS
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.DiskTTL <= 0 {
		opts.DiskTTL = DefaultDiskTTL
	}
	p := &Provider{
		opts:  opts,
		clock: opts.Clock,
		proc:  procFS{root: opts.ProcFS},
		du:    newDUCache(opts.Clock, opts.DiskTTL),
		cache: map[bool]*snapshot{},
		rates: map[string]cpuSample{},
		pids:  map[string]int{},
	}
	if r, err := newCgroupReader(opts.CgroupFS); err == nil {
		p.cgroups = r
	} else {
		klog.Background().Info("Warning: no cgroup statistics; CPU and memory come from the runtime only", "err", err)
	}
	return p
}

// Summary returns the node's summary: with onlyCPUAndMemory, just the CPU
// and memory of the node, its pods and their containers. The result is
// shared with other callers until the next collection: do not modify it.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	s, err := p.collect(ctx, !onlyCPUAndMemory)
	if err != nil {
		return nil, err
	}
	return s.summary, nil
}

// SummaryOf is Summary(ctx, false) with the stats of only the pods that
// pick returns true for (none when pick is nil): the node's figures and a
// few pods' cost a fraction of every pod's on a node with many. It is
// collected afresh, neither taken from nor kept in the cache.
func (p *Provider) SummaryOf(ctx context.Context, pick func(types.UID) bool) (*statsapi.Summary, error) {
	if pick == nil {
		pick = func(types.UID) bool { return false }
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, err := p.collectLocked(ctx, p.clock.Now(), true, pick)
	if err != nil {
		return nil, err
	}
	return s.summary, nil
}

// collect returns a collection no older than CacheTTL.
func (p *Provider) collect(ctx context.Context, full bool) (*snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if s := p.cache[full]; s != nil && now.Sub(s.at) < p.opts.CacheTTL && !now.Before(s.at) {
		return s, nil
	}
	s, err := p.collectLocked(ctx, now, full, nil)
	if err != nil {
		return nil, err
	}
	p.cache[full] = s
	if full {
		p.du.sweep()
	}
	for k, r := range p.rates {
		if now.Sub(r.at) > rateKeep {
			delete(p.rates, k)
		}
	}
	return s, nil
}

// collectLocked collects the node's stats and those of its pods that run,
// or of those that pick (when not nil) returns true for.
func (p *Provider) collectLocked(ctx context.Context, now time.Time, full bool, pick func(types.UID) bool) (*snapshot, error) {
	logger := klog.FromContext(ctx)
	pods, err := p.opts.Runtime.ListPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	ready := func(rp *runtime.PodStatus) bool {
		return len(rp.Sandboxes) > 0 && rp.Sandboxes[0].State == runtime.SandboxReady
	}
	picked := func(rp *runtime.PodStatus) bool { return ready(rp) && (pick == nil || pick(rp.UID)) }
	anyPod := slices.ContainsFunc(pods, picked)
	criStats := map[string]runtime.ContainerStats{}
	if anyPod { // no pod's stats to read: no container's either
		if list, err := p.opts.Runtime.ListContainerStats(ctx); err != nil {
			logger.V(2).Info("Container stats from the runtime unavailable", "err", err)
		} else {
			for _, cs := range list {
				criStats[cs.ID] = cs
			}
		}
	}
	var imageFs *runtime.FsUsage
	var imageFsInfo *fsInfo
	var images map[string]string
	if full {
		if anyPod {
			images = p.imageNames(ctx)
		}
		if list, err := p.opts.Runtime.ImageFsInfo(ctx); err != nil {
			logger.V(2).Info("Image filesystem info unavailable", "err", err)
		} else if len(list) > 0 {
			imageFs = &list[0]
			if imageFs.Mountpoint != "" {
				if fi, err := statFS(imageFs.Mountpoint); err == nil {
					imageFsInfo = &fi
				}
			}
		}
	}

	s := &snapshot{at: now, summary: &statsapi.Summary{Pods: []statsapi.PodStats{}}}
	s.summary.Node = p.nodeStats(ctx, now, full, &s.node)
	if full {
		s.summary.Node.Runtime = runtimeStats(imageFs, imageFsInfo, now)
	}

	seenSandboxes := map[string]bool{}
	for _, rp := range pods {
		if !ready(rp) {
			continue
		}
		sb := rp.Sandboxes[0]
		seenSandboxes[sb.ID] = true
		if !picked(rp) {
			continue
		}
		ps, meta := p.podStats(ctx, now, full, rp, criStats, imageFs, imageFsInfo)
		for i := range meta.containers {
			meta.containers[i].image = imageName(meta.containers[i].image, images)
		}
		s.summary.Pods = append(s.summary.Pods, ps)
		s.pods = append(s.pods, meta)
	}
	for id := range p.pids {
		if !seenSandboxes[id] {
			delete(p.pids, id)
		}
	}
	return s, nil
}

// nodeStats are the node's figures: the root cgroup (or /proc) for CPU
// and memory, the kubepods cgroup as the "pods" system container, and in
// full collections the host's network, the root dir's filesystem and the
// process limits.
func (p *Provider) nodeStats(ctx context.Context, now time.Time, full bool, meta *nodeMeta) statsapi.NodeStats {
	logger := klog.FromContext(ctx)
	ns := statsapi.NodeStats{NodeName: p.opts.NodeName}
	var procCPU uint64
	if b, err := p.proc.read("stat"); err == nil {
		boot, cpu, err := parseStat(b, userHZ)
		if err == nil {
			ns.StartTime = metav1.NewTime(boot)
			procCPU = cpu
		}
	}
	var mi *meminfo
	if b, err := p.proc.read("meminfo"); err == nil {
		if m, err := parseMeminfo(b); err == nil {
			mi = &m
		} else {
			logger.V(2).Info("Cannot parse meminfo", "err", err)
		}
	}

	var cg cgroupStats
	if p.cgroups != nil {
		var err error
		if cg, err = p.cgroups.read("/"); err != nil {
			logger.V(2).Info("Root cgroup unreadable", "err", err)
		}
	}
	if !cg.hasCPU && procCPU > 0 {
		cg.cpuNanos, cg.hasCPU = procCPU, true
	}
	if !cg.hasMemory && mi != nil {
		// The unified hierarchy has no memory figures at its root.
		cg.usage = sub(mi.total, mi.free)
		cg.workingSet = sub(cg.usage, mi.inactiveFile)
		cg.hasMemory = true
	}
	if mi != nil && cg.hasMemory {
		cg.limit = mi.total
	}
	meta.cg = &cg
	ns.CPU = p.cpuStats("node", now, cg)
	ns.Memory = memoryStats(now, cg)

	kubepods := cgroups.KubepodsPath(p.opts.CgroupDriver, p.opts.CgroupRoot)
	if p.cgroups != nil && p.cgroups.exists(kubepods) {
		if kp, err := p.cgroups.read(kubepods); err == nil {
			ns.SystemContainers = append(ns.SystemContainers, statsapi.ContainerStats{
				Name:      statsapi.SystemContainerPods,
				StartTime: ns.StartTime,
				CPU:       p.cpuStats("pods", now, kp),
				Memory:    memoryStats(now, kp),
			})
		}
	}
	if !full {
		return ns
	}

	if b, err := p.proc.read("net", "dev"); err == nil {
		if ifaces, err := parseNetDev(b); err == nil {
			meta.ifaces = ifaces
			route, _ := p.proc.read("net", "route")
			ns.Network = networkStats(now, ifaces, defaultRouteIface(route))
		} else {
			logger.V(2).Info("Cannot parse the host's network counters", "err", err)
		}
	}
	if p.opts.RootDir != "" {
		if fi, err := statFS(p.opts.RootDir); err == nil {
			ns.Fs = fsStats(now, fi, &fi.used, inodesUsed(fi))
			meta.rootDevice = p.opts.RootDir
		} else {
			logger.V(2).Info("Root dir filesystem unreadable", "err", err)
		}
	}
	rl := &statsapi.RlimitStats{Time: metav1.NewTime(now)}
	if max, err := p.proc.pidMax(); err == nil {
		rl.MaxPID = &max
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		n := int64(si.Procs)
		rl.NumOfRunningProcesses = &n
	}
	ns.Rlimit = rl
	return ns
}

// podStats are one pod's figures and the metadata of its containers.
func (p *Provider) podStats(ctx context.Context, now time.Time, full bool, rp *runtime.PodStatus,
	criStats map[string]runtime.ContainerStats, imageFs *runtime.FsUsage, imageFsInfo *fsInfo) (statsapi.PodStats, podMeta) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
	sb := rp.Sandboxes[0]
	ps := statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: rp.Name, Namespace: rp.Namespace, UID: string(rp.UID)},
		StartTime:  metav1.NewTime(sb.CreatedAt),
		Containers: []statsapi.ContainerStats{},
	}
	meta := podMeta{sandboxID: sb.ID, cgroup: p.podCgroup(string(rp.UID))}
	logDir := filepath.Join(p.opts.PodLogsDir, fmt.Sprintf("%s_%s_%s", rp.Namespace, rp.Name, rp.UID))

	var ephemeral uint64
	var ephemeralInodes uint64
	var sumCPU, sumMem cgroupStats
	sumCPU.hasCPU, sumMem.hasMemory = true, true
	seen := map[string]bool{}
	for _, c := range rp.Containers { // newest first
		if c.State != runtime.ContainerRunning || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		cs := statsapi.ContainerStats{Name: c.Name, StartTime: metav1.NewTime(c.CreatedAt)}
		cm := containerMeta{id: c.ID, image: c.Image}
		var usage cgroupStats
		if meta.cgroup != "" {
			if cg := p.containerCgroup(meta.cgroup, c.ID); cg != "" {
				if u, err := p.cgroups.read(cg); err == nil {
					usage, cm.cgroup, cm.cg = u, cg, &u
				} else {
					logger.V(4).Info("Container cgroup unreadable", "container", c.Name, "err", err)
				}
			}
		}
		cri, hasCRI := criStats[c.ID]
		at := now
		if cm.cg == nil && hasCRI {
			if cri.CPUUsageNanos != nil {
				usage.cpuNanos, usage.hasCPU = *cri.CPUUsageNanos, true
			}
			if cri.MemoryWorkingSet != nil {
				usage.workingSet, usage.hasMemory = *cri.MemoryWorkingSet, true
			}
			if !cri.Timestamp.IsZero() {
				at = cri.Timestamp
			}
		}
		cs.CPU = p.cpuStats("container:"+c.ID, at, usage)
		cs.Memory = memoryStats(at, usage)
		if cm.cg == nil && cs.Memory != nil {
			// The runtime reports the working set only.
			cs.Memory.UsageBytes, cs.Memory.RSSBytes, cs.Memory.PageFaults, cs.Memory.MajorPageFaults = nil, nil, nil, nil
		}
		sumCPU.cpuNanos += usage.cpuNanos
		sumCPU.hasCPU = sumCPU.hasCPU && usage.hasCPU
		sumMem.workingSet += usage.workingSet
		sumMem.usage += usage.usage
		sumMem.rss += usage.rss
		sumMem.hasMemory = sumMem.hasMemory && usage.hasMemory

		if full {
			if hasCRI && cri.WritableLayer != nil {
				cs.Rootfs = layerStats(cri.WritableLayer, imageFsInfo, now)
				if cri.WritableLayer.UsedBytes != nil {
					ephemeral += *cri.WritableLayer.UsedBytes
				}
				if cri.WritableLayer.InodesUsed != nil {
					ephemeralInodes += *cri.WritableLayer.InodesUsed
				}
				cm.fsDevice = cri.WritableLayer.Mountpoint
				if cm.fsDevice == "" && imageFs != nil {
					cm.fsDevice = imageFs.Mountpoint
				}
			}
			if p.opts.PodLogsDir != "" {
				dir := filepath.Join(logDir, c.Name)
				if u, at, err := p.du.get(dir); err == nil {
					if fi, err := statFS(p.opts.PodLogsDir); err == nil {
						cs.Logs = fsStats(at, fi, &u.bytes, &u.inodes)
					}
					ephemeral += u.bytes
					ephemeralInodes += u.inodes
				} else {
					logger.V(4).Info("Container log usage unreadable", "container", c.Name, "err", err)
				}
			}
		}
		ps.Containers = append(ps.Containers, cs)
		meta.containers = append(meta.containers, cm)
	}

	var pod cgroupStats
	if meta.cgroup != "" {
		if u, err := p.cgroups.read(meta.cgroup); err == nil {
			pod, meta.cg = u, &u
		} else {
			logger.V(4).Info("Pod cgroup unreadable", "err", err)
			meta.cgroup = ""
		}
	}
	if meta.cgroup == "" && len(ps.Containers) > 0 {
		pod.cpuNanos, pod.hasCPU = sumCPU.cpuNanos, sumCPU.hasCPU
		pod.workingSet, pod.usage, pod.rss, pod.hasMemory = sumMem.workingSet, sumMem.usage, sumMem.rss, sumMem.hasMemory
	}
	ps.CPU = p.cpuStats("pod:"+string(rp.UID), now, pod)
	ps.Memory = memoryStats(now, pod)

	if !full {
		return ps, meta
	}
	if ifaces, ok := p.podNetwork(ctx, sb.ID); ok {
		meta.ifaces = ifaces
		ps.Network = networkStats(now, ifaces, "")
	}
	vols, volBytes, volInodes := p.volumeStats(ctx, rp)
	ps.VolumeStats = vols
	ephemeral += volBytes
	ephemeralInodes += volInodes
	if p.opts.RootDir != "" {
		if fi, err := statFS(p.opts.RootDir); err == nil {
			ps.EphemeralStorage = fsStats(now, fi, &ephemeral, &ephemeralInodes)
		}
	}
	return ps, meta
}

// imageNames maps the runtime's image IDs to their first tag, or digest.
func (p *Provider) imageNames(ctx context.Context) map[string]string {
	list, err := p.opts.Runtime.ListImages(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Images unavailable", "err", err)
		return nil
	}
	names := map[string]string{}
	for _, im := range list {
		switch {
		case len(im.GetRepoTags()) > 0:
			names[im.GetId()] = im.GetRepoTags()[0]
		case len(im.GetRepoDigests()) > 0:
			names[im.GetId()] = im.GetRepoDigests()[0]
		}
	}
	return names
}

// imageName is the name cAdvisor labels a container with: the image
// reference, where the runtime lists containers by image ID (containerd
// does) the image's tag.
func imageName(image string, names map[string]string) string {
	if n, ok := names[image]; ok {
		return n
	}
	return image
}

// containerCgroup returns the cgroup of a container below its pod's, or
// "": named by its ID with the cgroupfs driver; with the systemd driver
// the runtime's scope, containerd's cri-containerd-<id>.scope or CRI-O's
// crio-<id>.scope.
func (p *Provider) containerCgroup(podCgroup, id string) string {
	names := []string{id}
	if p.opts.CgroupDriver == cgroups.DriverSystemd {
		names = []string{"cri-containerd-" + id + ".scope", "crio-" + id + ".scope"}
	}
	for _, n := range names {
		if cg := path.Join(podCgroup, n); p.cgroups.exists(cg) {
			return cg
		}
	}
	return ""
}

// podCgroup returns the cgroup of pod uid below the QoS cgroups, or "".
func (p *Provider) podCgroup(uid string) string {
	if p.cgroups == nil {
		return ""
	}
	for _, cg := range cgroups.PodPaths(p.opts.CgroupDriver, p.opts.CgroupRoot, types.UID(uid)) {
		if p.cgroups.exists(cg) {
			return cg
		}
	}
	return ""
}

// podNetwork reads the interface counters in the network namespace of a
// pod's sandbox. Pods in the host's namespace have none of their own.
func (p *Provider) podNetwork(ctx context.Context, sandboxID string) ([]ifaceStats, bool) {
	logger := klog.FromContext(ctx)
	pid, ok := p.pids[sandboxID]
	if !ok {
		var err error
		pid, err = p.opts.Runtime.SandboxPid(ctx, sandboxID)
		if err != nil {
			logger.V(4).Info("Sandbox pid unavailable", "sandbox", sandboxID, "err", err)
			return nil, false
		}
		p.pids[sandboxID] = pid
	}
	if pid <= 0 {
		return nil, false
	}
	ns, err := p.proc.netNS(pid)
	if err != nil {
		delete(p.pids, sandboxID) // the process is gone; ask again next time
		return nil, false
	}
	if host, err := p.proc.netNS(0); err == nil && host == ns {
		return nil, false
	}
	b, err := p.proc.read(fmt.Sprint(pid), "net", "dev")
	if err != nil {
		return nil, false
	}
	ifaces, err := parseNetDev(b)
	if err != nil {
		logger.V(4).Info("Cannot parse the pod's network counters", "sandbox", sandboxID, "err", err)
		return nil, false
	}
	return ifaces, true
}

// volumePlugins are the volume directories below a pod's directory that
// are measured.
var volumePlugins = []string{
	volume.PluginEmptyDir, volume.PluginConfigMap, volume.PluginSecret,
	volume.PluginProjected, volume.PluginDownwardAPI,
}

// volumeStats measures the pod's volumes below <RootDir>/pods/<uid>/volumes;
// it also returns the bytes and inodes of those on disk, which count
// toward the pod's ephemeral storage.
func (p *Provider) volumeStats(ctx context.Context, rp *runtime.PodStatus) ([]statsapi.VolumeStats, uint64, uint64) {
	if p.opts.RootDir == "" {
		return nil, 0, 0
	}
	var out []statsapi.VolumeStats
	var diskBytes, diskInodes uint64
	base := filepath.Join(p.opts.RootDir, "pods", string(rp.UID), "volumes")
	for _, plugin := range volumePlugins {
		entries, err := os.ReadDir(filepath.Join(base, plugin))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(base, plugin, e.Name())
			fi, err := statFS(dir)
			if err != nil {
				continue
			}
			u, at, err := p.du.get(dir)
			if err != nil {
				klog.FromContext(ctx).V(4).Info("Volume usage unreadable", "pod", klog.KRef(rp.Namespace, rp.Name), "volume", e.Name(), "err", err)
				continue
			}
			out = append(out, statsapi.VolumeStats{Name: e.Name(), FsStats: *fsStats(at, fi, &u.bytes, &u.inodes)})
			if !fi.tmpfs {
				diskBytes += u.bytes
				diskInodes += u.inodes
			}
		}
	}
	if p.opts.Volumes != nil {
		out = append(out, p.opts.Volumes.PodVolumeStats(rp.UID)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, diskBytes, diskInodes
}

// cpuStats converts a cumulative CPU reading and derives the rate from
// the previous reading of key.
func (p *Provider) cpuStats(key string, at time.Time, cg cgroupStats) *statsapi.CPUStats {
	if !cg.hasCPU {
		return nil
	}
	cur := cpuSample{nanos: cg.cpuNanos, at: at}
	if prev, ok := p.rates[key]; ok {
		switch {
		case at.After(prev.at) && cg.cpuNanos >= prev.nanos:
			rate := uint64(float64(cg.cpuNanos-prev.nanos) / at.Sub(prev.at).Seconds())
			cur.rate = &rate
		case at.Equal(prev.at) && cg.cpuNanos == prev.nanos:
			cur.rate = prev.rate // the same reading again
		}
	}
	p.rates[key] = cur
	usage := cg.cpuNanos
	return &statsapi.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: &usage, UsageNanoCores: cur.rate}
}

func memoryStats(at time.Time, cg cgroupStats) *statsapi.MemoryStats {
	if !cg.hasMemory {
		return nil
	}
	m := &statsapi.MemoryStats{
		Time:            metav1.NewTime(at),
		UsageBytes:      ptr(cg.usage),
		WorkingSetBytes: ptr(cg.workingSet),
		RSSBytes:        ptr(cg.rss),
		PageFaults:      ptr(cg.pageFaults),
		MajorPageFaults: ptr(cg.majFaults),
	}
	if cg.limit > 0 {
		m.AvailableBytes = ptr(sub(cg.limit, cg.workingSet))
	}
	return m
}

// networkStats reports ifaces with the top-level figures of eth0, else of
// the default route's interface, else of the first one.
func networkStats(at time.Time, ifaces []ifaceStats, routeIface string) *statsapi.NetworkStats {
	if len(ifaces) == 0 {
		return nil
	}
	n := &statsapi.NetworkStats{Time: metav1.NewTime(at)}
	top := -1
	for i, it := range ifaces {
		n.Interfaces = append(n.Interfaces, interfaceStats(it))
		if it.name == defaultInterface || (top < 0 && it.name == routeIface) {
			top = i
		}
	}
	if top < 0 {
		top = 0
	}
	n.InterfaceStats = n.Interfaces[top]
	return n
}

func interfaceStats(it ifaceStats) statsapi.InterfaceStats {
	return statsapi.InterfaceStats{
		Name:     it.name,
		RxBytes:  ptr(it.rxBytes),
		RxErrors: ptr(it.rxErrors),
		TxBytes:  ptr(it.txBytes),
		TxErrors: ptr(it.txErrors),
	}
}

// fsStats reports a usage on the filesystem fi.
func fsStats(at time.Time, fi fsInfo, used, inodesUsed *uint64) *statsapi.FsStats {
	return &statsapi.FsStats{
		Time:           metav1.NewTime(at),
		CapacityBytes:  ptr(fi.capacity),
		AvailableBytes: ptr(fi.available),
		UsedBytes:      copyPtr(used),
		Inodes:         ptr(fi.inodes),
		InodesFree:     ptr(fi.inodesFree),
		InodesUsed:     copyPtr(inodesUsed),
	}
}

func inodesUsed(fi fsInfo) *uint64 {
	return ptr(sub(fi.inodes, fi.inodesFree))
}

// layerStats reports a writable layer on the image filesystem.
func layerStats(u *runtime.FsUsage, fi *fsInfo, now time.Time) *statsapi.FsStats {
	at := u.Timestamp
	if at.IsZero() {
		at = now
	}
	fs := &statsapi.FsStats{Time: metav1.NewTime(at), UsedBytes: copyPtr(u.UsedBytes), InodesUsed: copyPtr(u.InodesUsed)}
	if fi != nil {
		fs.CapacityBytes, fs.AvailableBytes = ptr(fi.capacity), ptr(fi.available)
		fs.Inodes, fs.InodesFree = ptr(fi.inodes), ptr(fi.inodesFree)
	}
	return fs
}

// runtimeStats reports the image filesystem, which also holds the
// containers' writable layers.
func runtimeStats(u *runtime.FsUsage, fi *fsInfo, now time.Time) *statsapi.RuntimeStats {
	if u == nil {
		return nil
	}
	img := layerStats(u, fi, now)
	ctr := *img
	return &statsapi.RuntimeStats{ImageFs: img, ContainerFs: &ctr}
}

func ptr[T any](v T) *T { return &v }

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
