// Package agent wires heartlet's components together and runs them in
// order. It holds no domain logic: every decision lives in the package that
// owns the fact.
package agent

import (
	"context"
	"crypto/tls"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/certificate"
	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/config"
	"github.com/heartlet/heartlet/internal/csi"
	"github.com/heartlet/heartlet/internal/eviction"
	"github.com/heartlet/heartlet/internal/healthz"
	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/logrotate"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/mirror"
	"github.com/heartlet/heartlet/internal/nodepage"
	"github.com/heartlet/heartlet/internal/nodestatus"
	"github.com/heartlet/heartlet/internal/pleg"
	"github.com/heartlet/heartlet/internal/pluginwatcher"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podfields"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/podsource/apiserver"
	"github.com/heartlet/heartlet/internal/podsource/file"
	podhttp "github.com/heartlet/heartlet/internal/podsource/http"
	"github.com/heartlet/heartlet/internal/podstartup"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/probe"
	"github.com/heartlet/heartlet/internal/procmem"
	"github.com/heartlet/heartlet/internal/pvc"
	"github.com/heartlet/heartlet/internal/resize"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
	"github.com/heartlet/heartlet/internal/serviceenv"
	"github.com/heartlet/heartlet/internal/status"
	"github.com/heartlet/heartlet/internal/sysctl"
	"github.com/heartlet/heartlet/internal/userns"
	"github.com/heartlet/heartlet/internal/version"
	"github.com/heartlet/heartlet/internal/volume"
)

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

// Run builds every component, passes the checks that can fail at start,
// then runs the components until ctx is done or one fails:
//
//  1. build: check the host (the manifest directory exists, swap is off
//     unless failSwapOn is false), prepare the root directory, connect to
//     the API server and the container runtime, and construct and connect
//     every component; nothing runs yet;
//  2. preflight: take the ports (each must be free), then create the QoS
//     cgroups and set heartlet's own OOM score adjustment;
//  3. run: start every component and wait.
//
// Nothing that starts or stops a pod happens before every check has passed.
func (a *Agent) Run(ctx context.Context) error {
	c, err := a.build(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.preflight(ctx); err != nil {
		return err
	}
	return c.run(ctx)
}

// components are the built parts of one agent, connected and not yet
// running. Fields that are nil are not used in this mode (standalone or
// cluster) or configuration.
type components struct {
	cfg      *kubeletv1beta1.KubeletConfiguration
	nodeName string

	servers    []*server.Server
	runAPIAuth func(context.Context)
	cgroups    *cgroups.Manager
	userns     *userns.Manager
	logCheck   *healthz.Log
	pleg       *pleg.PLEG
	workers    *podworker.Workers
	probes     *probe.Manager
	volumes    *volume.Manager
	// watchGetter serves ConfigMaps and Secrets with the Watch change
	// detection strategy; nil otherwise.
	watchGetter *volume.WatchingGetter
	resources   *podresources.Set
	rotation    *logrotate.Manager
	memory      *procmem.Releaser
	headroom    *procmem.Headroom
	desired     *podconfig.Config
	fileSource  *file.Source
	urlSource   *podhttp.Source
	apiPods     *apiserver.Source
	node        *nodestatus.Manager
	statusSync  *status.Syncer
	dispatcher  *podlifecycle.Dispatcher
	housekeep   *podlifecycle.Housekeeper
	eviction    *eviction.Manager
	gc          *garbageCollectors

	// Shared between the build steps.
	statuses    *status.Manager
	startup     *podstartup.Tracker
	journal     *journal.Journal
	nodePage    *nodepage.Page
	syncLoop    *healthz.SyncLoop
	recorder    kubeclient.EventRecorder // nil in standalone mode
	events      *nodepage.EventLog       // what recorder recorded; nil in standalone mode
	allocatable func() v1.ResourceList
	summary     eviction.SummaryProvider // the stats provider
	syncer      *podsync.Syncer
	sources     []string
	mirrors     *mirrorPods
	features    podfields.Features
	serviceEnv  *serviceenv.Env                                      // nil in standalone mode
	servingCert func(*tls.ClientHelloInfo) (*tls.Certificate, error) // nil: newKubeletAPI loads or makes it
	certFailure <-chan error                                         // the client certificate's rotation gave up; nil without rotation
	resizer     *resize.Manager
	allocations *resize.Store

	// pluginWatcher registers CSI drivers; csiVolumes publishes CSI
	// volumes (see csi.go).
	pluginWatcher *pluginwatcher.Watcher
	csiVolumes    *csi.Publisher
	claimVolumes  *pvc.Plugin // local PVs' stats
	// closers run when Run returns, last first.
	closers []func()
}

// close releases what build started (the event recorder, the delivery of
// the desired pod set).
func (c *components) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// checkHost checks what must hold before heartlet touches the node: the
// static pod directory and swap.
func (a *Agent) checkHost() error {
	cfg := a.opts.Config
	if p := cfg.StaticPodPath; p != "" {
		if fi, err := os.Stat(p); err != nil {
			return fmt.Errorf("static pod path (staticPodPath / --pod-manifest-path) %s: %w", p, err)
		} else if !fi.IsDir() && !fi.Mode().IsRegular() {
			return fmt.Errorf("static pod path (staticPodPath / --pod-manifest-path) %s: neither a directory nor a regular file", p)
		}
	}
	failSwapOn := cfg.FailSwapOn == nil || *cfg.FailSwapOn
	return cgroups.CheckSwap(failSwapOn, func() ([]byte, error) { return os.ReadFile(cgroups.SwapsPath) })
}

// connection is what the agent is connected to.
type connection struct {
	kube     *kubeclient.Client // nil in standalone mode
	rt       *runtime.Runtime
	runtime  *runtimeapi.VersionResponse
	hostname string
	nodeIPs  []string
	// clientCert is the rotating client certificate (rotateCertificates).
	clientCert *certificate.Rotating
}

// connect connects to the API server (with a kubeconfig) and to the
// container runtime, and finds the node's IPs.
func (a *Agent) connect(ctx context.Context) (*connection, error) {
	cfg := a.opts.Config
	logger := klog.FromContext(ctx)
	conn := &connection{}
	if a.opts.Kubeconfig != "" {
		clientCert, err := a.clientCertificate(ctx)
		if err != nil {
			return nil, err
		}
		conn.clientCert = clientCert
		cl, err := kubeclient.Load(ctx, kubeclient.Options{
			Kubeconfig:        a.opts.Kubeconfig,
			QPS:               float32(derefInt32(cfg.KubeAPIQPS)),
			Burst:             int(cfg.KubeAPIBurst),
			EventQPS:          derefInt32(cfg.EventRecordQPS),
			EventBurst:        cfg.EventBurst,
			UserAgent:         version.UserAgent(),
			ContentType:       cfg.ContentType,
			ClientCertificate: currentCertificate(conn.clientCert),
		})
		if err != nil {
			return nil, err
		}
		logger.Info("Connected to API server", "server", cl.Server, "identity", cl.Identity, "serverVersion", cl.ServerVersion)
		conn.kube = cl
	}

	timeout := cfg.RuntimeRequestTimeout.Duration
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	rt, err := runtime.New(ctx, cfg.ContainerRuntimeEndpoint, timeout, runtime.WithImageEndpoint(cfg.ImageServiceEndpoint))
	if err != nil {
		return nil, err
	}
	ver, err := rt.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("container runtime %s: %w", cfg.ContainerRuntimeEndpoint, err)
	}
	logger.Info("Connected to container runtime", "endpoint", cfg.ContainerRuntimeEndpoint,
		"runtime", ver.RuntimeName, "version", ver.RuntimeVersion, "criVersion", ver.RuntimeApiVersion)
	conn.rt, conn.runtime = rt, ver

	conn.hostname, _ = os.Hostname()
	conn.nodeIPs, err = nodestatus.NodeIPs(a.opts.NodeName, conn.hostname, a.opts.NodeIPs)
	if err != nil {
		return nil, fmt.Errorf("node IP (--node-ip): %w", err)
	}
	return conn, nil
}

// build checks the host, prepares the root directory, connects, and
// constructs and connects every component. Only the event recorder and the
// desired set's delivery start here; close stops them.
func (a *Agent) build(ctx context.Context) (_ *components, err error) {
	cfg := a.opts.Config
	if err := a.checkHost(); err != nil {
		return nil, err
	}
	// As upstream's data directories: 0750, also when they exist wider.
	if err := volume.MakeDataDirs(a.opts.RootDir); err != nil {
		return nil, fmt.Errorf("root directory (--root-dir): %w", err)
	}
	conn, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}

	c := &components{
		cfg:      cfg,
		nodeName: a.opts.NodeName,
		statuses: status.NewManager(a.clock),
		startup:  podstartup.New(a.clock),
		journal:  journal.New(journal.DefaultSize, a.clock),
		pleg:     pleg.New(conn.rt, a.opts.PLEGRelistPeriod, a.clock, pleg.WithEvents(conn.rt)),
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if conn.kube != nil {
		c.events = nodepage.NewEventLog(nodepage.DefaultEventLogSize, a.clock)
	}
	metrics.SetNodeName(a.opts.NodeName)
	if err := a.buildCertificates(ctx, c, conn); err != nil {
		return nil, err
	}
	if err := a.buildServers(c, conn); err != nil {
		return nil, err
	}
	c.gc = a.newGarbageCollectors(c, conn.rt)
	if c.eviction, err = a.newEviction(ctx, c); err != nil {
		return nil, err
	}
	warnCgroupV1(ctx, cfg)
	if cfg.CgroupsPerQOS == nil || *cfg.CgroupsPerQOS {
		if c.cgroups, err = newCgroups(ctx, cfg, conn.rt); err != nil {
			return nil, fmt.Errorf("cgroups: %w", err)
		}
	}
	if c.userns, err = newUserNamespaces(ctx, conn.rt, a.opts.RootDir, cfg); err != nil {
		return nil, err
	}
	a.buildSources(ctx, c, conn)
	if err := a.buildResize(c, conn); err != nil {
		return nil, err
	}
	a.buildWorkers(ctx, c, conn)
	c.features = runtimeFeatures(ctx, conn.rt)
	if err := a.buildLifecycle(c); err != nil {
		return nil, err
	}
	return c, nil
}

// buildServers builds the healthz, read-only and kubelet API servers; the
// kubelet API's self-signed certificate is written here when it has none.
func (a *Agent) buildServers(c *components, conn *connection) error {
	cfg, rt, statuses := a.opts.Config, conn.rt, c.statuses
	if debugOptions(cfg).ContentionProfiling() {
		goruntime.SetBlockProfileRate(1)
	}
	c.logCheck = healthz.NewLog(a.clock)
	c.syncLoop = healthz.NewSyncLoop(a.clock, cfg.SyncFrequency.Duration)
	checks := []server.HealthCheck{
		{Name: "ping", Check: func() error { return nil }},
		{Name: "log", Check: c.logCheck.Check},
		{Name: "syncloop", Check: c.syncLoop.Check},
		{Name: "pleg", Check: c.pleg.Healthy},
		{Name: "runtime", Check: c.pleg.RuntimeHealthy},
	}
	statsHandlers, summary := newStats(a.opts, rt, a.clock, c.claimVolumeStats)
	c.nodePage = a.newNodePage(c, summary)
	c.summary = summary
	if cfg.HealthzPort != nil && *cfg.HealthzPort > 0 {
		addr := net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(int(*cfg.HealthzPort)))
		c.servers = append(c.servers, server.NewHealthz(addr, checks...))
	}
	probeMetrics := promhttp.HandlerFor(metrics.ProbesRegistry, promhttp.HandlerOpts{})
	if cfg.ReadOnlyPort > 0 {
		addr := net.JoinHostPort(cfg.Address, strconv.Itoa(int(cfg.ReadOnlyPort)))
		mh := promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})
		ro := server.NewReadOnly(addr, statuses.Pods, mh, checks...)
		ro.Handle("GET /metrics/probes", probeMetrics)
		ro.InstallStats(statsHandlers)
		ro.Handle(server.JournalPath, server.JournalHandler(journalLookup(c.journal, c.desiredPods, statuses.Pods)))
		for pattern, h := range c.nodePage.Handlers() {
			ro.Handle(pattern, h)
		}
		c.servers = append(c.servers, ro)
	}
	apiDeps := kubeletAPIDeps{opts: a.opts, rt: rt, streams: rt, pods: statuses.Pods, checks: checks, hostname: conn.hostname, nodeIPs: conn.nodeIPs,
		metrics: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), probes: probeMetrics, stats: statsHandlers,
		journal: journalLookup(c.journal, c.desiredPods, statuses.Pods), extra: c.nodePage.Handlers(), servingCert: c.servingCert}
	if conn.kube != nil {
		apiDeps.kube = conn.kube.Kube
	}
	// enableServer: false leaves out the authenticated HTTPS server only;
	// the read-only and healthz ports are configured on their own.
	c.runAPIAuth = func(context.Context) {}
	if cfg.EnableServer == nil || *cfg.EnableServer {
		api, apiAuth, err := newKubeletAPI(apiDeps)
		if err != nil {
			return err
		}
		c.servers = append(c.servers, api)
		c.runAPIAuth = apiAuth.Run
	}
	return nil
}

// buildSources builds the desired pod set and its sources, and in cluster
// mode the event recorder (started here) and the Node's manager.
func (a *Agent) buildSources(ctx context.Context, c *components, conn *connection) {
	cfg, cl := a.opts.Config, conn.kube
	desiredCtx, stopDesired := context.WithCancel(ctx)
	c.closers = append(c.closers, stopDesired)
	c.desired = podconfig.New(desiredCtx)
	if p := cfg.StaticPodPath; p != "" {
		c.sources = append(c.sources, file.SourceName)
		c.fileSource = file.New(p, a.opts.NodeName, cfg.FileCheckFrequency.Duration, func(pods []*v1.Pod) {
			c.desired.Set(file.SourceName, pods)
		})
	}
	a.buildURLSource(c)
	if cl != nil {
		c.sources = append(c.sources, apiserver.SourceName)
		c.apiPods = apiserver.New(cl.Kube, a.opts.NodeName, apiSink{c.desired})
		er, stopRecs := kubeclient.NewEventRecorder(ctx, cl.Events, a.opts.NodeName, c.events.Record)
		c.closers = append(c.closers, stopRecs)
		c.recorder = er
		nodeOpts := a.nodeOptions(cl, conn.nodeIPs, er)
		nodeOpts.Pressure = c.eviction
		nodeOpts.WaitBack = cl.Reach.Waiter()
		nodeOpts.VolumesInUse = c.volumesInUse
		c.node = nodestatus.New(cl.Kube, a.clock, nodeOpts, conn.rt, c.pleg.Healthy)
		c.allocatable = c.node.Allocatable
	}
}

// buildWorkers builds the pod workers and what they drive: volumes,
// probes, log rotation, the pod syncer; in cluster mode the status writer
// and the mirror pods.
func (a *Agent) buildWorkers(ctx context.Context, c *components, conn *connection) {
	cfg, rt, cl := a.opts.Config, conn.rt, conn.kube
	var (
		rec    podsync.Recorder
		getter volume.Getter
	)
	if cl != nil {
		rec = c.recorder
		getter = c.objectGetter(cl, a.clock)
	}
	c.volumes = volume.New(volume.Options{
		RootDir:     a.opts.RootDir,
		Getter:      getter,
		Clock:       a.clock,
		NodeName:    a.opts.NodeName,
		NodeIPs:     conn.nodeIPs,
		Allocatable: c.allocatable,
		Plugins:     a.buildVolumePlugins(c, cl, getter),
	})
	c.resources = newPodResources(c.cgroups, c.volumes, c.userns, cfg.PodLogsDir, a.opts.RootDir, c.allocations)
	startedAt := a.clock.Now()
	c.probes = probe.NewManager(probe.Options{Exec: rt, Status: c.statuses, Recorder: probeRecorder(rec), Clock: a.clock, Journal: c.journal,
		PreviousStatus: func(pod *v1.Pod) (*v1.PodStatus, bool) {
			// A static pod's status in the API is its mirror pod's.
			if c.apiPods == nil || !podconfig.IsStatic(pod) {
				return nil, false
			}
			// Static pods are read before the API's pods are listed; give
			// the list until mirrorWait after start, so an adopted static
			// pod finds its mirror. API pods cannot be dispatched before
			// that list anyway.
			waitCtx, cancel := context.WithTimeout(ctx, startedAt.Add(mirrorWait).Sub(a.clock.Now()))
			_ = wait.PollUntilContextCancel(waitCtx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
				return c.apiPods.HasSynced(), nil
			})
			cancel()
			mp, ok := mirror.MirrorFor(pod, c.apiPods.MirrorPods())
			if !ok {
				return nil, false
			}
			return &mp.Status, true
		},
	})
	c.rotation = newLogRotation(cfg, rt, a.clock)
	c.memory = procmem.NewReleaser(procmem.Options{
		Clock:   a.clock,
		Started: func() bool { return c.desired.SeenAllSources(c.sources...) },
	})
	c.headroom = procmem.NewHeadroom(procmem.HeadroomOptions{Clock: a.clock})
	c.syncer = podsync.New(podsync.Options{
		NodeIPs:       conn.nodeIPs,
		PodLogsDir:    cfg.PodLogsDir,
		ClusterDNS:    cfg.ClusterDNS,
		ClusterDomain: cfg.ClusterDomain,
		ResolvConf:    derefString(cfg.ResolverConfig),
		RuntimeName:   conn.runtime.RuntimeName,
		MachineMemory: machineMemory(),
		Allocatable:   c.allocatable,
		Clock:         a.clock,
		Resources:     c.resources,
		Mounts:        c.volumes,
		Env:           c.volumes,
		Recorder:      rec,
		Journal:       c.journal,

		DisableCPUQuota:           !cpuCFSQuota(cfg),
		CPUPeriod:                 cpuCFSQuotaPeriod(cfg),
		MaxContainerRestartPeriod: maxRestartPeriod(cfg),
		// The kubelet's seccomp profile root: <root-dir>/seccomp.
		SeccompProfileRoot: filepath.Join(a.opts.RootDir, "seccomp"),
		SeccompDefault:     cfg.SeccompDefault != nil && *cfg.SeccompDefault,
		RootDir:            a.opts.RootDir,
		Probes:             c.probes,
		Started:            c.rotation,
		Images:             newImageManager(a.opts, rt, getter, rec, c.startup, c.journal, c.gc.images, a.clock),
		CheckDisk:          diskCheck(syscall.Statfs, diskDir{a.opts.RootDir, "root-dir"}, diskDir{cfg.PodLogsDir, "podLogsDir"}),
		ServiceEnv:         buildServiceEnv(c, cl),
		RuntimeClasses:     runtimeClasses(cl),
		UserNamespaces:     c.userns,
		Resizer:            podsyncResizer(c.resizer),
	}, rt, podsyncCgroups(c.cgroups), c.startup.Sink(c.statuses))
	c.workers = podworker.New(c.syncer, a.clock, cfg.SyncFrequency.Duration)

	if cl != nil {
		c.mirrors = &mirrorPods{mirrors: mirror.New(cl.Kube, a.opts.NodeName, c.node.Node), desired: c.desired, api: c.apiPods}
		c.statusSync = status.NewSyncer(cl.Kube, c.statuses, a.clock, status.SyncerOptions{
			Journal: c.journal,
			CanDelete: func(uid types.UID) bool {
				st, ok := c.workers.State(uid)
				return !ok || st == podworker.StateTerminated
			},
			MirrorPod: func(static *v1.Pod) (*v1.Pod, bool) {
				return mirror.MirrorFor(static, c.apiPods.MirrorPods())
			},
			GetPod: c.apiPods.SharedPod,
		})
		// Another writer's change to a pod status (the node lifecycle
		// controller's "not ready" after an outage) is undone at once.
		c.apiPods.OnUpdate(c.statusSync.Recheck)
		// After an outage the node's pods are listed again as soon as any
		// client reaches the API server, not after the informer's backoff.
		c.apiPods.RetryWhenBack(cl.Reach.Waiter())
	}
}

// buildLifecycle builds what stands between the sources and the workers:
// admission, dispatch and housekeeping.
func (a *Agent) buildLifecycle(c *components) error {
	cfg := a.opts.Config
	allowSysctls, err := sysctl.NewAllowlist(cfg.AllowedUnsafeSysctls)
	if err != nil {
		return fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	fieldsPred, fieldsWarn := podFieldsAdmission(c.features)
	admOpts := podlifecycle.AdmitterOptions{
		// Sysctls are checked before the node predicates, as upstream
		// orders its admit handlers.
		Predicates: []podlifecycle.Predicate{
			evictionPredicate(c.eviction),
			podlifecycle.SysctlPredicate(allowSysctls),
			fieldsPred,
			podlifecycle.NodePredicate(maxPods(cfg)),
		},
		Warners: []podlifecycle.Warner{fieldsWarn},
		// Admission reads every active pod on each admission; the
		// predicates are pure, so they read the desired pods uncopied.
		Desired:  sharedDesired{c.desired},
		Workers:  c.workers,
		Statuses: c.statuses,
		Recorder: c.recorder,
		Journal:  c.journal,
	}
	if c.node != nil {
		admOpts.Node, admOpts.Allocatable = c.node.Node, c.node.Allocatable
	}
	admOpts.Allocated = c.resizer.Allocated
	adm := podlifecycle.NewAdmitter(admOpts)
	c.dispatcher = podlifecycle.NewDispatcher(adm, c.workers, c.probes, c.startup)
	hkOpts := podlifecycle.HousekeeperOptions{
		// Housekeeping reads only the pods' UIDs and kinds, every 2 s.
		Desired:   sharedDesired{c.desired},
		Sources:   c.sources,
		Workers:   c.workers,
		Statuses:  c.statuses,
		Admitter:  adm,
		Runtime:   c.pleg,
		Remover:   c.syncer,
		Resources: c.resources,
		Loop:      c.syncLoop,
		Clock:     a.clock,
		Journal:   c.journal,
	}
	if c.mirrors != nil {
		hkOpts.Mirrors = c.mirrors
	}
	c.housekeep = podlifecycle.NewHousekeeper(hkOpts)
	return nil
}

// nodeOptions are the Node's and the Lease's settings.
func (a *Agent) nodeOptions(cl *kubeclient.Client, nodeIPs []string, rec kubeclient.EventRecorder) nodestatus.Options {
	cfg := a.opts.Config
	return nodestatus.Options{
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
		NoLocalStorage:    !localStorageCapacityIsolation(cfg),
		Heartbeat:         cl.Heartbeat,
		Recorder:          rec,
		OnRepeatedFailure: cl.CloseAllConns,
		DeclaredFeatures:  resize.DeclaredFeatures(),
	}
}

// preflight takes every port (each must be free), then sets up the node:
// the QoS cgroups and heartlet's own OOM score adjustment.
func (c *components) preflight(ctx context.Context) error {
	for _, s := range c.servers {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	if c.cgroups != nil {
		if err := c.cgroups.EnsureQOS(ctx); err != nil {
			return fmt.Errorf("create QoS cgroups: %w", err)
		}
	}
	setOwnOOMScoreAdj(klog.FromContext(ctx), ownOOMScoreAdjPath, oomScoreAdj(c.cfg))
	return nil
}

// run starts every component and blocks until ctx is done or one fails.
func (c *components) run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, s := range c.servers {
		g.Go(func() error { return s.Run(ctx) })
	}
	g.Go(func() error { c.runAPIAuth(ctx); return nil })
	g.Go(func() error { return c.logCheck.Run(ctx) })
	g.Go(func() error { return c.nodePage.Run(ctx) })
	g.Go(func() error { return c.runNodeAllocatable(ctx) })
	g.Go(func() error { return c.pleg.Run(ctx) })
	g.Go(func() error { return c.workers.Run(ctx) })
	g.Go(func() error { return c.probes.Run(ctx) })
	g.Go(func() error { return relayProbes(ctx, c.probes, c.workers) })
	if c.fileSource != nil {
		g.Go(func() error { return c.fileSource.Run(ctx) })
	}
	if c.urlSource != nil {
		g.Go(func() error { return c.urlSource.Run(ctx) })
	}
	g.Go(func() error { return c.volumes.Run(ctx) })
	if c.watchGetter != nil {
		g.Go(func() error { return c.watchGetter.Run(ctx) })
	}
	g.Go(func() error { return c.pluginWatcher.Run(ctx) })
	g.Go(func() error { return c.csiVolumes.RunStats(ctx) })
	g.Go(func() error { return c.rotation.Run(ctx) })
	g.Go(func() error { return c.memory.Run(ctx) })
	g.Go(func() error { return c.headroom.Run(ctx) })
	if c.apiPods != nil {
		g.Go(func() error { return c.node.Run(ctx) })
		g.Go(func() error { return c.apiPods.Run(ctx) })
		g.Go(func() error { return c.statusSync.Run(ctx) })
		g.Go(func() error { return c.serviceEnv.Run(ctx) })
	}
	g.Go(func() error { return c.dispatcher.Run(ctx, c.desired.Updates()) })
	g.Go(func() error { return relay(ctx, c.pleg, c.workers) })
	g.Go(func() error { return c.housekeep.Run(ctx) })
	g.Go(func() error { return c.eviction.Run(ctx) })
	g.Go(func() error { return c.gc.Run(ctx) })
	g.Go(func() error { return c.resizer.Run(ctx) })
	g.Go(func() error { return waitCertificateFailure(ctx, c.certFailure) })
	klog.FromContext(ctx).Info("Started heartlet", "node", c.nodeName, "staticPodPath", c.cfg.StaticPodPath)
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
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

// apiSink hands the API pod source's deliveries to the desired pod set.
type apiSink struct{ desired *podconfig.Config }

func (s apiSink) Set(pods []*v1.Pod) { s.desired.Set(apiserver.SourceName, pods) }

func (s apiSink) Apply(changed []*v1.Pod, removed []types.UID) {
	s.desired.Apply(apiserver.SourceName, changed, removed)
}

// sharedDesired lists the desired pods without copying them, for readers
// that never modify a pod.
type sharedDesired struct{ *podconfig.Config }

func (d sharedDesired) Pods() []*v1.Pod { return d.SharedPods() }
