// Package agent wires heartlet's components together and runs them in
// order. It holds no domain logic: every decision lives in the package that
// owns the fact.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/healthz"
	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/mirror"
	"github.com/heartlet/heartlet/internal/nodestatus"
	"github.com/heartlet/heartlet/internal/pleg"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsource/apiserver"
	"github.com/heartlet/heartlet/internal/podsource/file"
	"github.com/heartlet/heartlet/internal/podstartup"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/probe"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
	"github.com/heartlet/heartlet/internal/status"
	"github.com/heartlet/heartlet/internal/sysctl"
	"github.com/heartlet/heartlet/internal/version"
	"github.com/heartlet/heartlet/internal/volume"
)

// housekeepingPeriod is how often pods the sources no longer want are
// looked for in the runtime, as upstream's housekeeping.
const housekeepingPeriod = 2 * time.Second

// mirrorWait bounds, from the start, how long a static pod's probes wait
// for the API's pods to be listed, to find the mirror pod whose status an
// adopted container's readiness starts from.
const mirrorWait = 5 * time.Second

// ownOOMScoreAdjPath is where heartlet sets its own OOM score adjustment.
const ownOOMScoreAdjPath = "/proc/self/oom_score_adj"

// Agent is one node agent.
type Agent struct {
	opts  *config.Options
	clock clock.WithTicker
}

// New checks what can be checked without side effects.
func New(opts *config.Options) (*Agent, error) {
	if opts == nil || opts.Config == nil {
		return nil, errors.New("agent: no configuration")
	}
	return &Agent{opts: opts, clock: clock.RealClock{}}, nil
}

// Run starts every component and blocks until ctx is done or one fails.
// Nothing that changes the node happens before every check that can fail
// at start has passed: the manifest directory exists, swap is off (unless
// failSwapOn is false), the runtime answers CRI, and the ports are free.
func (a *Agent) Run(ctx context.Context) error {
	cfg := a.opts.Config
	logger := klog.FromContext(ctx)

	if p := cfg.StaticPodPath; p != "" {
		if fi, err := os.Stat(p); err != nil {
			return fmt.Errorf("static pod path (staticPodPath / --pod-manifest-path) %s: %w", p, err)
		} else if !fi.IsDir() {
			return fmt.Errorf("static pod path (staticPodPath / --pod-manifest-path) %s: not a directory", p)
		}
	}
	failSwapOn := cfg.FailSwapOn == nil || *cfg.FailSwapOn
	if err := cgroups.CheckSwap(failSwapOn, func() ([]byte, error) { return os.ReadFile(cgroups.SwapsPath) }); err != nil {
		return err
	}

	// As upstream's data directories: 0750, also when they exist wider.
	if err := volume.MakeDataDirs(a.opts.RootDir); err != nil {
		return fmt.Errorf("root directory (--root-dir): %w", err)
	}

	var cl *kubeclient.Client
	if a.opts.Kubeconfig != "" {
		var err error
		cl, err = kubeclient.Load(ctx, kubeclient.Options{
			Kubeconfig:  a.opts.Kubeconfig,
			QPS:         float32(derefInt32(cfg.KubeAPIQPS)),
			Burst:       int(cfg.KubeAPIBurst),
			EventQPS:    derefInt32(cfg.EventRecordQPS),
			EventBurst:  cfg.EventBurst,
			UserAgent:   version.UserAgent(),
			ContentType: cfg.ContentType,
		})
		if err != nil {
			return err
		}
		logger.Info("Connected to API server", "server", cl.Server, "identity", cl.Identity, "serverVersion", cl.ServerVersion)
	}

	timeout := cfg.RuntimeRequestTimeout.Duration
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	rt, err := runtime.New(ctx, cfg.ContainerRuntimeEndpoint, timeout, runtime.WithImageEndpoint(cfg.ImageServiceEndpoint))
	if err != nil {
		return err
	}
	ver, err := rt.Version(ctx)
	if err != nil {
		return fmt.Errorf("container runtime %s: %w", cfg.ContainerRuntimeEndpoint, err)
	}
	logger.Info("Connected to container runtime", "endpoint", cfg.ContainerRuntimeEndpoint,
		"runtime", ver.RuntimeName, "version", ver.RuntimeVersion, "criVersion", ver.RuntimeApiVersion)

	hostname, _ := os.Hostname()
	nodeIPs, err := nodestatus.NodeIPs(a.opts.NodeName, hostname, a.opts.NodeIPs)
	if err != nil {
		return fmt.Errorf("node IP (--node-ip): %w", err)
	}

	statuses := status.NewManager(a.clock)
	pl := pleg.New(rt, time.Second, a.clock)
	metrics.SetNodeName(a.opts.NodeName)
	startup := podstartup.New(a.clock)

	if debugOptions(cfg).ContentionProfiling() {
		goruntime.SetBlockProfileRate(1)
	}
	logCheck := healthz.NewLog(a.clock)
	syncLoop := healthz.NewSyncLoop(a.clock, cfg.SyncFrequency.Duration)
	checks := []server.HealthCheck{
		{Name: "ping", Check: func() error { return nil }},
		{Name: "log", Check: logCheck.Check},
		{Name: "syncloop", Check: syncLoop.Check},
		{Name: "pleg", Check: pl.Healthy},
		{Name: "runtime", Check: pl.RuntimeHealthy},
	}
	statsHandlers := newStats(a.opts, rt, a.clock)
	var servers []*server.Server
	if cfg.HealthzPort != nil && *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		servers = append(servers, server.NewHealthz(addr, checks...))
	}
	probeMetrics := promhttp.HandlerFor(metrics.ProbesRegistry, promhttp.HandlerOpts{})
	if cfg.ReadOnlyPort > 0 {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
		mh := promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})
		ro := server.NewReadOnly(addr, statuses.Pods, mh, checks...)
		ro.Handle("GET /metrics/probes", probeMetrics)
		ro.InstallStats(statsHandlers)
		servers = append(servers, ro)
	}
	apiDeps := kubeletAPIDeps{opts: a.opts, rt: rt, streams: rt, pods: statuses.Pods, checks: checks, hostname: hostname, nodeIPs: nodeIPs,
		metrics: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), probes: probeMetrics, stats: statsHandlers}
	if cl != nil {
		apiDeps.kube = cl.Kube
	}
	// enableServer: false leaves out the authenticated HTTPS server only;
	// the read-only and healthz ports are configured on their own.
	runAPIAuth := func(context.Context) {}
	if cfg.EnableServer == nil || *cfg.EnableServer {
		api, apiAuth, err := newKubeletAPI(apiDeps)
		if err != nil {
			return err
		}
		servers = append(servers, api)
		runAPIAuth = apiAuth.Run
	}
	for _, s := range servers {
		if err := s.Listen(); err != nil {
			return err
		}
	}

	var cg *cgroups.Manager
	if cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS {
		cg, err = newCgroups(cfg)
		if err != nil {
			return fmt.Errorf("cgroups: %w", err)
		}
		if err := cg.EnsureQOS(ctx); err != nil {
			return fmt.Errorf("create QoS cgroups: %w", err)
		}
	}
	setOwnOOMScoreAdj(logger, ownOOMScoreAdjPath, oomScoreAdj(cfg))

	var (
		rec      podsync.Recorder
		getter   volume.Getter
		node     *nodestatus.Manager
		alloc    func() v1.ResourceList
		apiPods  *apiserver.Source
		stopRecs = func() {}
	)
	if cl != nil {
		er, stop := kubeclient.NewEventRecorder(ctx, cl.Events, a.opts.NodeName)
		rec, stopRecs = er, stop
		getter = volume.NewClientGetter(cl.Kube)
		node = nodestatus.New(cl.Kube, a.clock, nodestatus.Options{
			NodeName:          a.opts.NodeName,
			NodeIPs:           nodeIPs,
			Hostname:          a.opts.NodeName,
			RegisterNode:      cfg.RegisterNode == nil || *cfg.RegisterNode,
			Labels:            a.opts.NodeLabels,
			Taints:            cfg.RegisterWithTaints,
			ProviderID:        cfg.ProviderID,
			MaxPods:           maxPods(cfg),
			MaxImages:         cfg.NodeStatusMaxImages,
			Reserved:          reserved(cfg.KubeReserved, cfg.SystemReserved),
			EvictionHard:      cfg.EvictionHard,
			UpdateFrequency:   cfg.NodeStatusUpdateFrequency.Duration,
			ReportFrequency:   cfg.NodeStatusReportFrequency.Duration,
			LeaseDuration:     cfg.NodeLeaseDurationSeconds,
			Version:           version.Version,
			Port:              cfg.Port,
			RootDir:           a.opts.RootDir,
			Heartbeat:         cl.Heartbeat,
			Recorder:          er,
			OnRepeatedFailure: cl.CloseAllConns,
		}, rt, pl.Healthy)
		alloc = node.Allocatable
	}
	defer stopRecs()
	vols := volume.New(volume.Options{
		RootDir:     a.opts.RootDir,
		Getter:      getter,
		Clock:       a.clock,
		NodeName:    a.opts.NodeName,
		NodeIPs:     nodeIPs,
		Allocatable: alloc,
	})

	startedAt := a.clock.Now()
	probes := probe.NewManager(probe.Options{Exec: rt, Status: statuses, Recorder: probeRecorder(rec), Clock: a.clock,
		PreviousStatus: func(pod *v1.Pod) (*v1.PodStatus, bool) {
			// A static pod's status in the API is its mirror pod's.
			if apiPods == nil || !podconfig.IsStatic(pod) {
				return nil, false
			}
			// Static pods are read before the API's pods are listed; give
			// the list until mirrorWait after start, so an adopted static
			// pod finds its mirror. API pods cannot be dispatched before
			// that list anyway.
			waitCtx, cancel := context.WithTimeout(ctx, startedAt.Add(mirrorWait).Sub(a.clock.Now()))
			_ = wait.PollUntilContextCancel(waitCtx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
				return apiPods.HasSynced(), nil
			})
			cancel()
			mp, ok := mirror.MirrorFor(pod, apiPods.MirrorPods())
			if !ok {
				return nil, false
			}
			return &mp.Status, true
		},
	})
	rotation := newLogRotation(cfg, rt, a.clock)
	syncer := podsync.New(podsync.Options{
		NodeIPs:       nodeIPs,
		PodLogsDir:    cfg.PodLogsDir,
		ClusterDNS:    cfg.ClusterDNS,
		ClusterDomain: cfg.ClusterDomain,
		ResolvConf:    derefString(cfg.ResolverConfig),
		RuntimeName:   ver.RuntimeName,
		MachineMemory: machineMemory(),
		Allocatable:   alloc,
		Clock:         a.clock,
		Volumes:       vols,
		Recorder:      rec,

		DisableCPUQuota:           !cpuCFSQuota(cfg),
		CPUPeriod:                 cpuCFSQuotaPeriod(cfg),
		MaxContainerRestartPeriod: maxRestartPeriod(cfg),
		// The kubelet's seccomp profile root: <root-dir>/seccomp.
		SeccompProfileRoot: filepath.Join(a.opts.RootDir, "seccomp"),
		SeccompDefault:     cfg.SeccompDefault != nil && *cfg.SeccompDefault,
		RootDir:            a.opts.RootDir,
		Probes:             probes,
		Pulls:              startup,
		Started:            rotation,
		Puller: images.NewPuller(rt, images.Options{
			Serialize:   cfg.SerializeImagePulls == nil || *cfg.SerializeImagePulls,
			MaxParallel: int(derefInt32(cfg.MaxParallelImagePulls)),
			QPS:         float32(derefInt32(cfg.RegistryPullQPS)),
			Burst:       int(cfg.RegistryBurst),
			Clock:       a.clock,
		}),
		CheckDisk: diskCheck(syscall.Statfs, diskDir{a.opts.RootDir, "root-dir"}, diskDir{cfg.PodLogsDir, "podLogsDir"}),
	}, rt, podsyncCgroups(cg), startup.Sink(statuses))
	workers := podworker.New(syncer, a.clock, cfg.SyncFrequency.Duration)

	g, ctx := errgroup.WithContext(ctx)
	desired := podconfig.New(ctx)
	for _, s := range servers {
		g.Go(func() error { return s.Run(ctx) })
	}
	g.Go(func() error { runAPIAuth(ctx); return nil })
	g.Go(func() error { return logCheck.Run(ctx) })
	g.Go(func() error { return pl.Run(ctx) })
	g.Go(func() error { return workers.Run(ctx) })
	g.Go(func() error { return probes.Run(ctx) })
	g.Go(func() error { return relayProbes(ctx, probes, workers) })
	var sources []string
	if p := cfg.StaticPodPath; p != "" {
		sources = append(sources, file.SourceName)
		src := file.New(p, a.opts.NodeName, cfg.FileCheckFrequency.Duration, func(pods []*v1.Pod) {
			desired.Set(file.SourceName, pods)
		})
		g.Go(func() error { return src.Run(ctx) })
	}
	g.Go(func() error { return vols.Run(ctx) })
	g.Go(func() error { return rotation.Run(ctx) })
	var mirrors *mirror.Manager
	if cl != nil {
		sources = append(sources, apiserver.SourceName)
		apiPods = apiserver.New(cl.Kube, a.opts.NodeName, func(pods []*v1.Pod) {
			desired.Set(apiserver.SourceName, pods)
		})
		mirrors = mirror.New(cl.Kube, a.opts.NodeName, node.Node)
		statusSync := status.NewSyncer(cl.Kube, statuses, a.clock, status.SyncerOptions{
			CanDelete: func(uid types.UID) bool {
				st, ok := workers.State(uid)
				return !ok || st == podworker.StateTerminated
			},
			MirrorPod: func(static *v1.Pod) (*v1.Pod, bool) {
				return mirror.MirrorFor(static, apiPods.MirrorPods())
			},
			GetPod: func(namespace, name string) (*v1.Pod, bool) {
				return findAPIPod(namespace, name, desired.Pods(), apiPods.MirrorPods())
			},
		})
		g.Go(func() error { return node.Run(ctx) })
		g.Go(func() error { return apiPods.Run(ctx) })
		g.Go(func() error { return statusSync.Run(ctx) })
	}
	allowSysctls, err := sysctl.NewAllowlist(cfg.AllowedUnsafeSysctls)
	if err != nil {
		return fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	adm := &admitter{statuses: statuses, workers: workers, desired: desired, recorder: rec, maxPods: maxPods(cfg), sysctls: allowSysctls}
	if node != nil {
		adm.node = node.Node
		adm.allocatable = node.Allocatable
	}
	g.Go(func() error { return dispatch(ctx, desired, workers, adm, probes, startup) })
	g.Go(func() error { return relay(ctx, pl, workers) })
	g.Go(func() error {
		hk := &housekeeper{
			desired: desired, sources: sources, workers: workers, pleg: pl,
			syncer: syncer, cgroups: cg, statuses: statuses, admitted: adm,
			podDirs: vols, loop: syncLoop,
		}
		if mirrors != nil {
			hk.mirrors = func(ctx context.Context) error {
				var static []*v1.Pod
				for _, p := range desired.Pods() {
					if podconfig.IsStatic(p) {
						static = append(static, p)
					}
				}
				return mirrors.Sync(ctx, static, apiPods.MirrorPods())
			}
			hk.mirrorCount = func() int { return len(apiPods.MirrorPods()) }
		}
		return hk.run(ctx, a.clock)
	})
	logger.Info("Started heartlet", "node", a.opts.NodeName, "staticPodPath", cfg.StaticPodPath)
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// dispatch turns changes of the desired pod set into pod worker updates:
// new pods pass admission first, pods being deleted in the API are killed
// with their deletion grace period.
func dispatch(ctx context.Context, desired *podconfig.Config, workers *podworker.Workers, adm *admitter, probes *probe.Manager, startup *podstartup.Tracker) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-desired.Updates():
			pod := u.Pod
			switch {
			case u.Op == podconfig.OpRemove:
				adm.forget(pod.UID)
				startup.Forget(pod.UID)
				probes.RemovePod(pod.UID)
				workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: pod})
			case pod.DeletionTimestamp != nil:
				if workers.Known(pod.UID) {
					// Readiness goes on while it terminates; liveness and
					// startup stop, as upstream.
					probes.AddPod(pod)
				}
				workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: pod, GracePeriod: pod.DeletionGracePeriodSeconds})
			case isTerminalPhase(pod.Status.Phase) && !workers.Known(pod.UID):
				// Finished in the API (for example before a restart of
				// heartlet): never run again.
			case u.Op == podconfig.OpAdd:
				startup.Seen(pod)
				if adm.admit(ctx, pod) {
					probes.AddPod(pod)
					workers.Update(podworker.Update{Type: podworker.UpdateCreate, Pod: pod})
				}
			default:
				if workers.Known(pod.UID) {
					probes.AddPod(pod)
					workers.Update(podworker.Update{Type: podworker.UpdateUpdate, Pod: pod})
				}
			}
		}
	}
}

func isTerminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}

// relay turns runtime changes seen by the PLEG into syncs of known pods.
func relay(ctx context.Context, pl *pleg.PLEG, workers *podworker.Workers) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-pl.Events():
			workers.Sync(e.UID)
		}
	}
}

// relayProbes wakes the worker of a pod whose probe result changed, so
// it restarts a container that failed or reports new readiness.
func relayProbes(ctx context.Context, probes *probe.Manager, workers *podworker.Workers) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-probes.Updates():
			workers.Sync(u.PodUID)
		}
	}
}

// probeRecorder keeps a nil recorder a nil interface.
func probeRecorder(rec podsync.Recorder) probe.Recorder {
	if rec == nil {
		return nil
	}
	return rec
}

// housekeeper removes what no source wants any more: it asks the pod
// workers to stop running pods they do not know (orphans, e.g. left from
// before a restart), then deletes stopped containers, sandboxes, logs and
// cgroups of pods that are gone.
type housekeeper struct {
	desired  *podconfig.Config
	sources  []string
	workers  *podworker.Workers
	pleg     relister
	syncer   podRemover
	cgroups  *cgroups.Manager
	statuses *status.Manager
	admitted *admitter
	// mirrors makes the API's mirror pods match the static pods; nil in
	// standalone mode.
	mirrors func(ctx context.Context) error
	// podDirs are the pods' directories (volumes) under the root dir.
	podDirs podDirs
	// loop is told when each pass starts (the syncloop health check).
	loop *healthz.SyncLoop
	// mirrorCount is the number of mirror pods in the API; nil in
	// standalone mode.
	mirrorCount func() int
	// kinds remembers pod kinds for the pod count metrics.
	kinds podKinds
}

// recordPodCounts sets the desired, active, mirror and working pods
// gauges once every source has delivered its pods.
func (h *housekeeper) recordPodCounts() {
	if !h.desired.SeenAllSources(h.sources...) {
		return
	}
	mirrors := 0
	if h.mirrorCount != nil {
		mirrors = h.mirrorCount()
	}
	metrics.SetPodCounts(h.kinds.counts(h.desired.Pods(), h.admitted.active(""), h.workers.Pods(), mirrors))
}

// relister tells what runs (the PLEG). Relisted's bool is false before
// the first successful relist and while the latest one failed: then the
// pods are not (or no longer) known to be all that runs.
type relister interface {
	Relisted() ([]*runtime.PodStatus, bool)
}

// podRemover deletes what is left of a stopped pod in the runtime.
type podRemover interface {
	RemovePod(ctx context.Context, uid types.UID) error
}

// podDirs lists and removes the pods' directories under the root dir.
type podDirs interface {
	PodDirs() ([]types.UID, error)
	Cleanup(ctx context.Context, uid types.UID) error
}

func (h *housekeeper) run(ctx context.Context, clk clock.WithTicker) error {
	t := clk.NewTicker(housekeepingPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if h.loop != nil {
				h.loop.Enter()
			}
			h.once(ctx)
			h.recordPodCounts()
		}
	}
}

func (h *housekeeper) once(ctx context.Context) {
	// Until every source has delivered its pods, any pod could still be
	// wanted: removing it would restart it needlessly.
	if !h.desired.SeenAllSources(h.sources...) {
		return
	}
	logger := klog.FromContext(ctx)
	if h.mirrors != nil {
		if err := h.mirrors(ctx); err != nil {
			logger.V(2).Info("Mirror pods not in sync yet", "err", err)
		}
	}
	want := map[types.UID]bool{}
	for _, p := range h.desired.Pods() {
		want[p.UID] = true
	}
	for _, p := range h.statuses.Pods() {
		if !want[p.UID] && !h.workers.Known(p.UID) {
			h.statuses.RemovePod(p.UID)
			h.admitted.forget(p.UID)
		}
	}
	// Until a relist succeeded, nothing is known of what runs, and while
	// the runtime fails what is known may be stale: a running pod's
	// directories, volumes and cgroups would look orphaned.
	pods, ok := h.pleg.Relisted()
	if !ok {
		logger.V(2).Info("Housekeeping waits for a successful relist of the runtime's pods")
		return
	}
	seen := map[types.UID]bool{}
	for _, rp := range pods {
		seen[rp.UID] = true
		if want[rp.UID] || h.workers.Known(rp.UID) {
			continue
		}
		if podRuns(rp) {
			logger.Info("Stopping pod that no source wants", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
			h.kinds.markRuntimeOnly(rp.UID)
			h.workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: orphanPod(rp)})
			continue
		}
		if err := h.syncer.RemovePod(ctx, rp.UID); err != nil {
			logger.Error(err, "Failed to remove pod", "pod", klog.KRef(rp.Namespace, rp.Name), "podUID", rp.UID)
		}
	}
	h.removeOrphanedPodDirs(ctx, want, seen)
	if h.cgroups == nil {
		return
	}
	uids, err := h.cgroups.ListPods(ctx)
	if err != nil {
		logger.Error(err, "Failed to list pod cgroups")
		return
	}
	for _, uid := range uids {
		if want[uid] || seen[uid] || h.workers.Known(uid) {
			continue
		}
		if err := h.cgroups.RemovePod(ctx, uid); err != nil {
			logger.V(2).Info("Pod cgroup not removed yet", "podUID", uid, "err", err)
		}
	}
}

// removeOrphanedPodDirs unmounts and removes the directories of pods that
// neither a source, the runtime nor a worker knows: left behind when a pod
// was deleted while heartlet was down, as upstream cleans orphaned pod
// directories.
func (h *housekeeper) removeOrphanedPodDirs(ctx context.Context, want, seen map[types.UID]bool) {
	if h.podDirs == nil {
		return
	}
	uids, err := h.podDirs.PodDirs()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Failed to list pod directories")
		return
	}
	for _, uid := range uids {
		if want[uid] || seen[uid] || h.workers.Known(uid) {
			continue
		}
		klog.FromContext(ctx).Info("Removing orphaned pod directory", "podUID", uid)
		if err := h.podDirs.Cleanup(ctx, uid); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to remove orphaned pod directory", "podUID", uid)
		}
	}
}

// podRuns tells whether anything of the pod still runs.
func podRuns(rp *runtime.PodStatus) bool {
	for _, s := range rp.Sandboxes {
		if s.State == runtime.SandboxReady {
			return true
		}
	}
	for _, c := range rp.Containers {
		if c.State == runtime.ContainerRunning || c.State == runtime.ContainerCreated {
			return true
		}
	}
	return false
}

// orphanPod is the minimal pod object the workers need to stop a pod known
// only from the runtime: its identity from the labels and the termination
// grace period its containers were started with.
func orphanPod(rp *runtime.PodStatus) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rp.Name, Namespace: rp.Namespace, UID: rp.UID}}
	for _, c := range rp.Containers {
		if g, err := strconv.ParseInt(c.Annotations[runtime.AnnotationGrace], 10, 64); err == nil && g >= 0 {
			pod.Spec.TerminationGracePeriodSeconds = &g
			break
		}
	}
	return pod
}

// podsyncCgroups keeps a nil manager a nil interface.
func podsyncCgroups(cg *cgroups.Manager) podsync.Cgroups {
	if cg == nil {
		return nil
	}
	return cg
}

// oomScoreAdj is the OOM score adjustment heartlet asks for itself:
// oomScoreAdj, -999 (upstream's default) when unset.
func oomScoreAdj(cfg *kubeletv1beta1.KubeletConfiguration) int {
	if cfg.OOMScoreAdj == nil {
		return config.DefaultOOMScoreAdj
	}
	return int(*cfg.OOMScoreAdj)
}

// setOwnOOMScoreAdj writes value to path (heartlet's own oom_score_adj) as
// upstream does. Some machines withhold CAP_SYS_RESOURCE, needed to go
// below 0: then it warns and goes on.
func setOwnOOMScoreAdj(logger klog.Logger, path string, value int) {
	if err := os.WriteFile(path, []byte(strconv.Itoa(value)), 0o644); err != nil {
		logger.Info("Warning: could not set heartlet's own oom_score_adj; continuing", "value", value, "err", err)
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// reserved sums kubeReserved and systemReserved.
func reserved(lists ...map[string]string) v1.ResourceList {
	out := v1.ResourceList{}
	for _, l := range lists {
		for name, v := range l {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				continue // validated by config
			}
			if cur, ok := out[v1.ResourceName(name)]; ok {
				q.Add(cur)
			}
			out[v1.ResourceName(name)] = q
		}
	}
	return out
}

// findAPIPod looks a pod up by name among the API pods and the mirror pods
// the informer has seen, so the status writer needs no GET of its own.
// desired also holds static pods, which are not API objects.
func findAPIPod(namespace, name string, desired, mirrors []*v1.Pod) (*v1.Pod, bool) {
	for _, p := range desired {
		if p.Namespace == namespace && p.Name == name && !podconfig.IsStatic(p) {
			return p, true
		}
	}
	for _, p := range mirrors {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// maxPods is the node's pods capacity: maxPods, at most podsPerCore per
// CPU when podsPerCore is set.
func maxPods(cfg *kubeletv1beta1.KubeletConfiguration) int {
	return nodestatus.PodCapacity(int(cfg.MaxPods), int(cfg.PodsPerCore), goruntime.NumCPU())
}

// maxRestartPeriod is crashLoopBackOff.maxContainerRestartPeriod, 0 when
// unset (the default cap).
func maxRestartPeriod(cfg *kubeletv1beta1.KubeletConfiguration) time.Duration {
	if p := cfg.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
		return p.Duration
	}
	return 0
}
