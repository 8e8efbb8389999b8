// Package podsync makes the container runtime run what a pod spec asks
// for. It implements podworker.Syncer: one call brings one pod one step
// closer to its spec (sandbox, init containers in order, app containers,
// restarts with crash-loop backoff) and reports the pod's status.
package podsync

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/containergc"
	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/status"
)

// Crash-loop backoff bounds, as upstream: 10 s doubling to
// 5 min, forgotten after twice the maximum of good running.
const (
	initialBackoff = 10 * time.Second
	maxBackoff     = 300 * time.Second
)

// Runtime is what the syncer needs of the container runtime.
type Runtime interface {
	GetPodStatus(ctx context.Context, uid types.UID) (*runtime.PodStatus, error)
	SandboxIPs(ctx context.Context, id string) ([]string, error)
	RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
	PullImage(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sb *runtimeapi.PodSandboxConfig) (string, error)
	ImageRef(ctx context.Context, image string) (string, error)
	ImageSize(ctx context.Context, image string) (uint64, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (runtime.ExecResult, error)
}

// Cgroups names pod-level cgroups. Nil disables them (cgroupsPerQOS off).
// Creating and removing them is a resource handler's (see Resources).
type Cgroups interface {
	PodCgroupParent(pod *v1.Pod) string
}

// Resources are a pod's resources on the node outside the runtime
// (podresources.Set): the one path by which they are set up and removed.
//
// Contract: Prepare is idempotent and runs before anything of the pod is
// created in the runtime; its error stops the sync (a
// *podresources.HandlerError names the handler). Reconstruct adopts, for a
// pod found running after a restart, what exists without creating or
// removing anything. Release gives back what a terminated pod no longer
// needs; Cleanup removes everything once the pod is removed. Release and
// Cleanup are idempotent, safe without Prepare, and go on after an error.
type Resources interface {
	Prepare(ctx context.Context, pod *v1.Pod) error
	Reconstruct(ctx context.Context, pod *v1.Pod) error
	Release(ctx context.Context, pod *v1.Pod) error
	Cleanup(ctx context.Context, uid types.UID) error
}

// VolumeMounts tells the runtime what to mount of a pod's prepared volumes
// into one container, and which raw block volumes (volumeDevices) to give
// it as devices (volume.Manager).
type VolumeMounts interface {
	MountsWithEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, env map[string]string) ([]*runtimeapi.Mount, error)
	Devices(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error)
}

// EnvValues resolves the ConfigMap and Secret values a container's
// environment references (volume.Manager). A missing optional object or
// key is found=false (Value) or empty data, not an error.
type EnvValues interface {
	ConfigMapValue(ctx context.Context, namespace, name, key string, optional bool) (value string, found bool, err error)
	SecretValue(ctx context.Context, namespace, name, key string, optional bool) (value string, found bool, err error)
	ConfigMapData(ctx context.Context, namespace, name string, optional bool) (map[string]string, error)
	SecretData(ctx context.Context, namespace, name string, optional bool) (map[string]string, error)
}

// Recorder records Kubernetes events about pods.
type Recorder interface {
	Eventf(object k8sruntime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Journal records decisions about pods (journal.Journal).
//
// Contract: safe for concurrent use and never blocks.
type Journal interface {
	Record(uid types.UID, e journal.Entry)
}

// StatusSink receives the status computed after every sync.
type StatusSink interface {
	SetPodStatus(pod *v1.Pod, st v1.PodStatus)
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Options are the node facts the syncer needs.
type Options struct {
	NodeIPs        []string
	PodLogsDir     string
	ClusterDNS     []string
	ClusterDomain  string
	ResolvConf     string
	RuntimeHandler string
	// RuntimeName prefixes container IDs in the status ("containerd://").
	RuntimeName string
	// MachineMemory in bytes scales Burstable OOM score adjustments.
	MachineMemory int64
	// Allocatable is the node's allocatable resources, for
	// resourceFieldRef values of containers without a limit. May be nil.
	Allocatable func() v1.ResourceList
	Clock       clock.Clock
	// Resources prepares and removes the pod's resources on the node (pod
	// cgroup, log directory, volumes, container files); nil manages none.
	Resources Resources
	// Mounts gives the volume mounts of containers; nil means pods may
	// have no volumes.
	Mounts VolumeMounts
	// Env resolves ConfigMap and Secret references of env and envFrom;
	// nil (standalone mode) refuses them.
	Env EnvValues
	// Recorder records events; nil records none.
	Recorder Recorder
	// Journal records the pod's volumes, image pulls, containers and
	// backoffs; nil records none.
	Journal Journal
	// DisableCPUQuota leaves container cpu limits without a CFS quota
	// (cpuCFSQuota: false); CPUPeriod is the CFS period of the quota
	// (cpuCFSQuotaPeriod), 100ms when 0.
	DisableCPUQuota bool
	CPUPeriod       time.Duration
	// MaxContainerRestartPeriod caps the crash-loop backoff
	// (crashLoopBackOff.maxContainerRestartPeriod); 0 means 300 s.
	MaxContainerRestartPeriod time.Duration
	// SeccompProfileRoot holds Localhost seccomp profiles
	// (<root-dir>/seccomp); SeccompDefault makes RuntimeDefault the
	// profile of containers that name none.
	SeccompProfileRoot string
	SeccompDefault     bool
	// RootDir holds per-pod files (<RootDir>/pods/<uid>), here the
	// termination message files and the pod's hosts file; empty disables
	// them.
	RootDir string
	// NodeHostsFile is the node's hosts file, which host-network pods
	// see with their host aliases; empty means /etc/hosts.
	NodeHostsFile string
	// Probes gives liveness, readiness and startup results; nil means
	// every container is live, ready and started once running.
	Probes Probes
	// Started is told of every container started, with its log file
	// (log rotation watches it from then on); nil tells no one.
	Started StartRecorder
	// Images makes container images present; nil means every image is
	// taken as present under its own name.
	Images ImageManager
	// CheckDisk reports, as an error naming the problem, that the
	// filesystems of RootDir or PodLogsDir have no space left: no new
	// sandbox is created until it passes, so a pod waits with an event
	// instead of running without logs or files. Running pods are left
	// alone. nil checks nothing.
	CheckDisk func() error
	// ServiceEnv gives the Service environment variables of a pod's
	// containers; nil gives none (standalone mode).
	ServiceEnv ServiceEnv
	// RuntimeClasses resolves spec.runtimeClassName to the CRI runtime
	// handler of the pod's sandbox (RuntimeHandler for pods that name
	// none); nil (standalone) refuses pods that name a RuntimeClass.
	RuntimeClasses RuntimeClassGetter
	// UserNamespaces gives pods with hostUsers: false their user
	// namespace; nil leaves such pods waiting with an error, never in
	// the node's user namespace.
	UserNamespaces UserNamespaces
	// Resizer is in-place pod resize; nil runs every pod at its spec's
	// resources and resizes nothing.
	Resizer Resizer
}

// Resizer is in-place pod resize (resize.Manager).
//
// Contract: Allocated returns the pod at the resources allocated to it
// (the pod itself when it asks for its allocation or has none recorded);
// it never blocks. Sync runs on each sync of a pod that is not terminal,
// once its resources are prepared and before containers start: it
// records a new pod's allocation, decides a resize its spec asks for and
// applies an accepted one to the pod cgroup and the running containers of
// rs (each with the CRI resources linux gives), and returns the
// containers to restart for the resize; an error leaves the resize for the
// next sync. Status is the resize part of the pod's status (nil for
// none). Forget drops what is kept in memory for a pod that will never
// run again. Calls for one pod are never concurrent.
type Resizer interface {
	Allocated(pod *v1.Pod) *v1.Pod
	Sync(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, linux func(*v1.Pod, *v1.Container) *runtimeapi.LinuxContainerResources) ([]string, error)
	Status(pod *v1.Pod) *status.Resize
	Forget(uid types.UID)
}

// ServiceEnv gives the Service environment variables of a pod's
// containers (serviceenv.Env): those of the Services of its namespace
// unless enableServiceLinks is false, and of the master Service.
//
// Contract: safe for concurrent use; it never blocks on the API. An error
// means the Services are not known yet: the container is not created and
// the pod's next sync tries again.
type ServiceEnv interface {
	ServiceEnv(pod *v1.Pod) ([]v1.EnvVar, error)
}

// ImageManager makes the image of a container present before it is
// created.
//
// Contract: EnsureImage applies the container's imagePullPolicy, pulling
// with the pod's credentials under the node's pull limits and its own pull
// backoff, and returns the image reference to create the container with.
// It may block while a pull waits or runs and returns when ctx is done. A
// failure's text is the message of the container's waiting state, and it
// wraps one of images.ErrImagePull, ErrImagePullBackOff, ErrImageNeverPull
// or ErrInvalidImageName, whose text is the waiting reason. Forget drops
// what is kept for a pod (backoffs, errors) once it will never start a
// container again; it is idempotent. Both are safe for concurrent use.
type ImageManager interface {
	EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sb *runtimeapi.PodSandboxConfig) (string, error)
	Forget(uid types.UID)
}

// StartRecorder is told of each container started and its log file.
type StartRecorder interface {
	ContainerStarted(pod *v1.Pod, container, id, logPath string)
}

// Syncer implements podworker.Syncer against a CRI runtime.
type Syncer struct {
	opts    Options
	rt      Runtime
	cgroups Cgroups
	status  StatusSink
	clock   clock.Clock

	// starts admits new pods' starts a few at a time.
	starts *startGate
	// crash holds its entries per pod; forgetPod drops them.
	crash *podBackoff
	lc    *lifecycleState
}

var _ podworker.Syncer = (*Syncer)(nil)

// New returns a Syncer. cg may be nil.
func New(opts Options, rt Runtime, cg Cgroups, st StatusSink) *Syncer {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Syncer{
		opts:    opts,
		rt:      rt,
		cgroups: cg,
		status:  st,
		clock:   clk,
		starts:  newStartGate(defaultStartSlots(), startSlotHold, clk),
		crash:   newPodBackoff(crashLoopBackoff(opts.MaxContainerRestartPeriod, clk)),
		lc:      newLifecycleState(),
	}
}

// crashLoopBackoff is the restart backoff: 10 s doubling up to max (300 s
// when 0); a max below 10 s is also the first delay, as upstream.
func crashLoopBackoff(limit time.Duration, clk clock.Clock) *flowcontrol.Backoff {
	if limit <= 0 {
		limit = maxBackoff
	}
	return flowcontrol.NewFakeBackOff(min(initialBackoff, limit), limit, clk)
}

// hold implements backoff for computeActions.
type crashBackoff struct {
	b   *flowcontrol.Backoff
	clk clock.Clock
}

func (c crashBackoff) hold(key string, finishedAt time.Time) time.Duration {
	if !c.b.IsInBackOffSince(key, finishedAt) {
		return 0
	}
	return c.b.Get(key) - c.clk.Since(finishedAt)
}

// SyncPod brings pod one step closer to its spec and reports its status.
func (s *Syncer) SyncPod(ctx context.Context, t podworker.UpdateType, pod *v1.Pod) (podworker.SyncResult, error) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	ctx = klog.NewContext(ctx, logger)
	// The pod runs at its allocation; desired may ask for a resize.
	desired := pod
	if s.opts.Resizer != nil {
		pod = s.opts.Resizer.Allocated(pod)
	}

	rs, err := s.rt.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return podworker.SyncResult{}, fmt.Errorf("get runtime status of pod %s: %w", klog.KObj(pod), err)
	}
	// unchanged is rs while this sync has changed nothing in the runtime:
	// the status it reports is then rs, not read again. Any step that may
	// change the pod in the runtime sets it to nil.
	unchanged := rs
	if exceeded, _ := s.activeDeadline(pod); exceeded {
		// As upstream: the pod failed; the worker stops it with its grace
		// period.
		logger.Info("Pod exceeded its active deadline, stopping it", "activeDeadlineSeconds", *pod.Spec.ActiveDeadlineSeconds)
		s.event(pod, v1.EventTypeNormal, status.ReasonDeadlineExceeded, "%s", status.MessageDeadlineExceeded)
		s.note(pod, journal.Entry{Kind: journal.KindStatus, Reason: status.ReasonDeadlineExceeded, Message: status.MessageDeadlineExceeded})
		s.reportStatus(ctx, pod, nil, false, unchanged)
		return podworker.SyncResult{Terminal: true}, nil
	}
	acts := computeActions(pod, rs, runtime.HashContainer, crashBackoff{s.crash.Backoff, s.clock}, s.opts.Probes)
	addProbeKills(pod, rs, &acts, s.opts.Probes)
	waitingFor := acts.waiting
	for name, w := range waitingFor {
		if w.reason == ReasonCrashLoopBackOff {
			s.containerEvent(pod, name, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", name, klog.KObj(pod))
			s.note(pod, journal.Entry{Kind: journal.KindBackoff, Container: name, Reason: w.reason, Message: "back-off restarting failed container", NextRetry: s.clock.Now().Add(w.hold)})
		}
	}

	if acts.killPod {
		// As upstream: a sandbox that is not ready (or lost its network)
		// takes the pod's containers with it. Say what the runtime
		// reported, since it decides a restart of every container.
		if len(rs.Sandboxes) > 0 {
			sb := rs.Sandboxes[0]
			logger.Info("Pod sandbox changed, killing the pod to create a new sandbox", "sandbox", sb.ID, "state", sb.State, "ips", sb.IPs, "hostNetwork", sb.HostNetwork)
		}
		unchanged = nil
		if err := s.killPod(ctx, pod, rs, gracePeriod(pod)); err != nil {
			return podworker.SyncResult{}, err
		}
	}
	if acts.terminal {
		s.reportStatus(ctx, pod, waitingFor, false, unchanged)
		return podworker.SyncResult{Terminal: true}, nil
	}

	if err := s.prepareResources(ctx, pod, waitingFor); err != nil {
		return podworker.SyncResult{}, err
	}
	if acts.createSandbox && len(pod.Spec.Volumes) > 0 {
		s.note(pod, journal.Entry{Kind: journal.KindVolume, Message: fmt.Sprintf("%d volumes ready", len(pod.Spec.Volumes))})
	}
	var errs []error
	pod, resized, err := s.resize(ctx, desired, pod, rs, &acts)
	if err != nil {
		errs = append(errs, err)
	}
	if resized {
		unchanged = nil
	}

	sbCfg, err := s.sandboxConfig(pod, acts.sandboxAttempt)
	if err != nil {
		// Such as an FQDN too long for a hostname: the pod waits, as
		// upstream, with an event.
		if acts.createSandbox {
			s.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			s.note(pod, journal.Entry{Kind: journal.KindContainer, Reason: "FailedCreatePodSandBox", Message: "pod sandbox not created: " + err.Error()})
		}
		s.reportStatus(ctx, pod, waitingFor, false, unchanged)
		return podworker.SyncResult{}, fmt.Errorf("generate sandbox config: %w", err)
	}
	sandboxID := acts.sandboxID
	podIPs := rs.IPs()
	// A new pod waits for a start slot until its first containers are
	// started.
	leaveStart := func() {}
	if acts.createSandbox {
		if leaveStart, err = s.starts.enter(ctx); err != nil {
			return podworker.SyncResult{}, fmt.Errorf("wait to start pod %s: %w", klog.KObj(pod), err)
		}
		defer leaveStart()
	}
	if acts.createSandbox && s.opts.CheckDisk != nil {
		if err := s.opts.CheckDisk(); err != nil {
			s.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			s.note(pod, journal.Entry{Kind: journal.KindContainer, Reason: "FailedCreatePodSandBox", Message: "pod sandbox not created: " + err.Error()})
			s.reportStatus(ctx, pod, waitingFor, false, unchanged)
			return podworker.SyncResult{}, fmt.Errorf("create pod sandbox: %w", err)
		}
	}
	if acts.createSandbox {
		unchanged = nil
		logger.V(2).Info("Creating pod sandbox", "attempt", acts.sandboxAttempt)
		metrics.StartedPods.Inc()
		handler, err := s.runtimeHandler(ctx, pod)
		if err == nil {
			err = s.checkUserNamespaceHandler(pod, handler)
		}
		if err == nil {
			if handler != "" {
				logger.V(2).Info("Running pod with runtime handler", "runtimeHandler", handler)
			}
			sandboxID, err = s.rt.RunPodSandbox(ctx, sbCfg, handler)
		}
		if err != nil {
			if ctx.Err() == nil {
				// Not a failure when the pod was killed meanwhile, as
				// upstream.
				metrics.StartedPodsErrors.Inc()
			}
			s.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			s.note(pod, journal.Entry{Kind: journal.KindContainer, Reason: "FailedCreatePodSandBox", Message: "pod sandbox not created: " + err.Error()})
			s.reportStatus(ctx, pod, waitingFor, false, nil)
			return podworker.SyncResult{}, fmt.Errorf("create pod sandbox: %w", err)
		}
		podIPs, err = s.rt.SandboxIPs(ctx, sandboxID)
		if err != nil {
			return podworker.SyncResult{}, fmt.Errorf("get the IPs of sandbox %s of pod %s: %w", sandboxID, klog.KObj(pod), err)
		}
		logger.Info("Started pod sandbox", "sandbox", sandboxID, "ips", podIPs)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Message: fmt.Sprintf("pod sandbox started (attempt %d, IPs %v)", acts.sandboxAttempt, podIPs)})
	}

	if len(acts.kill)+len(acts.start)+len(acts.removeContainers)+len(acts.removeSandboxes) > 0 {
		unchanged = nil
	}
	for _, k := range acts.kill {
		grace := gracePeriod(pod)
		if k.grace != nil {
			grace = *k.grace
		}
		logger.Info("Killing container", "container", k.name, "reason", k.reason, "gracePeriod", grace)
		if err := s.killContainer(ctx, pod, k.name, k.id, grace, k.message); err != nil {
			return podworker.SyncResult{}, err
		}
	}

	for _, st := range acts.start {
		typ := metrics.ContainerTypeContainer
		switch {
		case st.init:
			typ = metrics.ContainerTypeInit
		case st.ephemeral:
			typ = metrics.ContainerTypeEphemeral
		}
		metrics.StartedContainers.WithLabelValues(typ).Inc()
		if reason, msg, err := s.startContainer(ctx, pod, st, sandboxID, sbCfg, podIPs); err != nil {
			metrics.StartedContainersErrors.WithLabelValues(typ, reason).Inc()
			waitingFor[st.container.Name] = waiting{reason: reason, message: msg}
			errs = append(errs, err)
		}
	}
	leaveStart()

	for _, id := range acts.removeContainers {
		if err := s.rt.RemoveContainer(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			logger.Error(err, "Failed to remove dead container", "containerID", id)
		} else if err := containergc.RemoveLogs(s.opts.PodLogsDir, logPathOf(rs, id)); err != nil {
			logger.Error(err, "Failed to remove the log of a dead container", "containerID", id)
		}
	}
	for _, id := range acts.removeSandboxes {
		if err := s.rt.RemovePodSandbox(ctx, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			logger.Error(err, "Failed to remove dead sandbox", "sandbox", id)
		}
	}

	s.reportStatus(ctx, pod, waitingFor, false, unchanged)
	res := podworker.SyncResult{RequeueAfter: acts.requeueAfter}
	if _, left := s.activeDeadline(pod); left > 0 && (res.RequeueAfter <= 0 || left < res.RequeueAfter) {
		// Wake up when the deadline passes, with or without other events.
		res.RequeueAfter = left
	}
	if err := errors.Join(errs...); err != nil {
		// Pull backoff wakes the pod when it expires; other errors are
		// retried by the worker.
		return res, err
	}
	return res, nil
}

// startContainer pulls the image if the policy asks, then creates and
// starts one container. On failure it returns the waiting reason and
// message the status reports.
func (s *Syncer) startContainer(ctx context.Context, pod *v1.Pod, st startAction, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, podIPs []string) (reason, msg string, err error) {
	logger := klog.FromContext(ctx).WithValues("container", st.container.Name)
	c := st.container
	image, err := s.ensureImage(ctx, pod, c, sbCfg)
	if err != nil {
		return imageReason(err), err.Error(), err
	}
	volumeImages, err := s.ensureImageVolumes(ctx, pod, c, sbCfg)
	if err != nil {
		return imageReason(err), err.Error(), err
	}
	if st.backoffKey != "" {
		s.crash.next(pod.UID, st.backoffKey, st.finishedAt)
	}
	if st.targetErr != "" {
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, "Failed", "Error: %s", st.targetErr)
		return ReasonCreateContainerConfigError, st.targetErr, fmt.Errorf("configure container %s: %s", c.Name, st.targetErr)
	}
	cfg, err := s.containerConfig(ctx, pod, c, st.init, st.restartCount, image, podIPs)
	if err != nil {
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, "Failed", "Error: %v", err)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: c.Name, Reason: ReasonCreateContainerConfigError, Message: "container not configured: " + err.Error()})
		return ReasonCreateContainerConfigError, err.Error(), fmt.Errorf("configure container %s: %w", c.Name, err)
	}
	if err := resolveImageMounts(cfg.Mounts, volumeImages); err != nil {
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, "Failed", "Error: %v", err)
		return ReasonCreateContainerConfigError, err.Error(), fmt.Errorf("configure container %s: %w", c.Name, err)
	}
	targetPIDNamespace(cfg, st.targetID)
	id, err := s.rt.CreateContainer(ctx, sandboxID, cfg, sbCfg)
	if err != nil {
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, "Failed", "Error: %v", err)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: c.Name, Reason: ReasonCreateContainerError, Message: "container not created: " + err.Error()})
		return ReasonCreateContainerError, err.Error(), fmt.Errorf("create container %s: %w", c.Name, err)
	}
	s.containerEvent(pod, c.Name, v1.EventTypeNormal, "Created", "Container created")
	s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: c.Name, Message: fmt.Sprintf("container created (restart count %d)", st.restartCount)})
	if err := s.rt.StartContainer(ctx, id); err != nil {
		s.containerEvent(pod, c.Name, v1.EventTypeWarning, "Failed", "Error: %v", err)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: c.Name, Reason: ReasonRunContainerError, Message: "container not started: " + err.Error()})
		return ReasonRunContainerError, err.Error(), fmt.Errorf("start container %s: %w", c.Name, err)
	}
	s.containerEvent(pod, c.Name, v1.EventTypeNormal, "Started", "Container started")
	s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: c.Name, Message: "container started"})
	logger.Info("Started container", "containerID", id, "restartCount", st.restartCount)
	if s.opts.Started != nil && cfg.LogPath != "" {
		s.opts.Started.ContainerStarted(pod, c.Name, id, filepath.Join(sbCfg.GetLogDirectory(), cfg.LogPath))
	}
	if msg, err := s.runPostStart(ctx, pod, c, id); err != nil {
		return ReasonPostStartHookError, msg, err
	}
	return "", "", nil
}

// SyncTerminatingPod stops every container of the pod with gracePeriod
// seconds to exit after SIGTERM, then its sandboxes.
func (s *Syncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, gracePeriodSeconds int64) error {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod), "podUID", pod.UID)
	ctx = klog.NewContext(ctx, logger)
	rs, err := s.rt.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return fmt.Errorf("get runtime status of pod %s: %w", klog.KObj(pod), err)
	}
	if r := s.opts.Resources; r != nil && len(rs.Containers) > 0 {
		// A pod found running after a restart of heartlet may be stopped
		// without ever being prepared by this process: adopt its
		// resources (its volumes stay refreshed during the grace period).
		// For a pod prepared here this changes nothing.
		if err := r.Reconstruct(ctx, pod); err != nil {
			logger.Error(err, "Failed to adopt the pod's resources")
		}
	}
	grace := time.Duration(gracePeriodSeconds) * time.Second
	if err := s.killPod(ctx, pod, rs, grace); err != nil {
		return err
	}
	s.reportStatus(ctx, pod, nil, true, nil)
	return nil
}

// killPod stops the pod's running containers within grace, then every
// ready sandbox. App containers (and anything not a sidecar) stop first, in
// parallel; sidecars stop after them, one at a time in reverse spec order,
// each with what is left of the grace (at least minimumGracePeriod), as upstream.
func (s *Syncer) killPod(ctx context.Context, pod *v1.Pod, rs *runtime.PodStatus, grace time.Duration) error {
	deadline := s.clock.Now().Add(grace)
	first, sidecars := stopOrder(pod, rs.Containers)
	if err := s.stopContainers(ctx, pod, first, grace); err != nil {
		return err
	}
	for _, c := range sidecars {
		left := max(deadline.Sub(s.clock.Now()), minimumGracePeriod)
		if err := s.stopContainers(ctx, pod, []*runtime.ContainerStatus{c}, left); err != nil {
			return err
		}
	}
	for _, sb := range rs.Sandboxes {
		if sb.State != runtime.SandboxReady {
			continue
		}
		if err := s.rt.StopPodSandbox(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("stop pod sandbox %s: %w", sb.ID, err)
		}
	}
	return nil
}

// stopOrder splits the containers that may be running into those to stop
// first and the sidecars to stop after them, last-declared first.
func stopOrder(pod *v1.Pod, cs []*runtime.ContainerStatus) (first, sidecars []*runtime.ContainerStatus) {
	rank := map[string]int{}
	for i := range pod.Spec.InitContainers {
		if podspec.IsSidecar(&pod.Spec.InitContainers[i]) {
			rank[pod.Spec.InitContainers[i].Name] = i + 1
		}
	}
	for _, c := range cs {
		if c.State != runtime.ContainerRunning && c.State != runtime.ContainerCreated && c.State != runtime.ContainerUnknown {
			continue
		}
		if rank[c.Name] > 0 {
			sidecars = append(sidecars, c)
		} else {
			first = append(first, c)
		}
	}
	sort.SliceStable(sidecars, func(i, j int) bool { return rank[sidecars[i].Name] > rank[sidecars[j].Name] })
	return first, sidecars
}

// stopContainers stops cs in parallel, each with grace to exit after
// SIGTERM, and waits for all of them.
func (s *Syncer) stopContainers(ctx context.Context, pod *v1.Pod, cs []*runtime.ContainerStatus, grace time.Duration) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(cs))
	for _, c := range cs {
		wg.Add(1)
		go func(c *runtime.ContainerStatus) {
			defer wg.Done()
			if err := s.killContainer(ctx, pod, c.Name, c.ID, grace, ""); err != nil {
				errc <- err
			}
		}(c)
	}
	wg.Wait()
	close(errc)
	var errs []error
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SyncTerminatedPod releases what the pod held on the node once nothing
// of it runs (its volumes, before the pod object may be deleted, as
// upstream, and its pod cgroup); its logs and container files stay until
// RemovePod.
func (s *Syncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod) error {
	// A terminated pod never starts a container again.
	s.forgetPod(pod.UID)
	if s.opts.Resources == nil {
		return nil
	}
	if err := s.opts.Resources.Release(ctx, pod); err != nil {
		return fmt.Errorf("release pod resources: %w", err)
	}
	return nil
}

// RemovePod deletes every container and sandbox of a pod that is no
// longer wanted and has stopped, then every resource it held on the node
// (container files, volumes, log directory, cgroup). It is idempotent.
func (s *Syncer) RemovePod(ctx context.Context, uid types.UID) error {
	s.forgetPod(uid)
	rs, err := s.rt.GetPodStatus(ctx, uid)
	if err != nil {
		return fmt.Errorf("get runtime status of pod %s: %w", uid, err)
	}
	for _, c := range rs.Containers {
		if err := s.rt.RemoveContainer(ctx, c.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("remove container %s: %w", c.Name, err)
		}
	}
	for _, sb := range rs.Sandboxes {
		if err := s.rt.StopPodSandbox(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("stop pod sandbox %s: %w", sb.ID, err)
		}
		if err := s.rt.RemovePodSandbox(ctx, sb.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			return fmt.Errorf("remove pod sandbox %s: %w", sb.ID, err)
		}
	}
	s.forgetTerminationMessages(uid)
	if s.opts.Resources == nil {
		return nil
	}
	if err := s.opts.Resources.Cleanup(ctx, uid); err != nil {
		return fmt.Errorf("clean up pod resources: %w", err)
	}
	return nil
}

// logPathOf is the log path of container id in rs, "" when unknown.
func logPathOf(rs *runtime.PodStatus, id string) string {
	for _, c := range rs.Containers {
		if c.ID == id {
			return c.LogPath
		}
	}
	return ""
}

// forgetPod drops the crash-loop backoffs, and what the image manager
// keeps, for pod uid.
func (s *Syncer) forgetPod(uid types.UID) {
	s.crash.forget(uid)
	if s.opts.Resizer != nil {
		s.opts.Resizer.Forget(uid)
	}
	if s.opts.Images != nil {
		s.opts.Images.Forget(uid)
	}
}

// prepareResources sets up the pod's resources on the node in order. A
// failure of its volumes is reported as a FailedMount event and leaves the
// containers waiting.
func (s *Syncer) prepareResources(ctx context.Context, pod *v1.Pod, w map[string]waiting) error {
	if len(pod.Spec.Volumes) > 0 && s.opts.Mounts == nil {
		s.reportStatus(ctx, pod, w, false, nil)
		return fmt.Errorf("pod %s has volumes but no volume manager is configured", klog.KObj(pod))
	}
	if s.opts.Resources == nil {
		return nil
	}
	err := s.opts.Resources.Prepare(ctx, pod)
	if err == nil {
		return nil
	}
	if he := (*podresources.HandlerError)(nil); errors.As(err, &he) && he.Handler == podresources.NameVolumes {
		// An error may name its own event reason (FailedAttachVolume).
		reason := "FailedMount"
		if r := (interface{ EventReason() string })(nil); errors.As(he.Err, &r) {
			reason = r.EventReason()
		}
		s.event(pod, v1.EventTypeWarning, reason, "%v", he.Err)
		s.note(pod, journal.Entry{Kind: journal.KindVolume, Reason: reason, Message: "waiting for volumes: " + he.Err.Error()})
		s.reportStatus(ctx, pod, w, false, nil)
	}
	return fmt.Errorf("prepare pod resources: %w", err)
}

// note records e in the pod's journal when there is one.
func (s *Syncer) note(pod *v1.Pod, e journal.Entry) {
	if s.opts.Journal != nil {
		s.opts.Journal.Record(pod.UID, e)
	}
}

// event records an event about pod when a recorder is configured.
func (s *Syncer) event(pod *v1.Pod, eventtype, reason, format string, args ...any) {
	if s.opts.Recorder != nil {
		s.opts.Recorder.Eventf(pod, eventtype, reason, format, args...)
	}
}

// containerEvent records an event about one of the pod's containers, on
// the pod with the container's field path, as upstream.
func (s *Syncer) containerEvent(pod *v1.Pod, container, eventtype, reason, format string, args ...any) {
	if s.opts.Recorder != nil {
		s.opts.Recorder.Eventf(podspec.EventObject(pod, container), eventtype, reason, format, args...)
	}
}

// reportStatus computes the pod's status from a fresh runtime view and
// hands it to the status sink.
func (s *Syncer) reportStatus(ctx context.Context, pod *v1.Pod, w map[string]waiting, terminating bool, rs *runtime.PodStatus) {
	if s.status == nil {
		return
	}
	if rs == nil {
		var err error
		if rs, err = s.rt.GetPodStatus(ctx, pod.UID); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to read pod status for reporting")
			return
		}
	}
	s.fillTerminationMessages(ctx, pod, rs)
	in := status.Inputs{
		NodeIPs:     s.opts.NodeIPs,
		Now:         s.clock.Now(),
		RuntimeName: s.opts.RuntimeName,
		Terminating: terminating,
		Waiting:     map[string]status.Waiting{},
	}
	for name, wt := range w {
		in.Waiting[name] = status.Waiting{Reason: wt.reason, Message: wt.message}
	}
	in.Ready, in.Started = probeInputs(pod, rs, s.opts.Probes)
	if s.opts.Resizer != nil {
		in.Resize = s.opts.Resizer.Status(pod)
	}
	if old, ok := s.status.GetPodStatus(pod.UID); ok {
		in.Old = &old
	}
	s.status.SetPodStatus(pod, status.Compute(pod, rs, in))
}

// activeDeadline tells whether the pod is past spec.activeDeadlineSeconds,
// counted from the start time last reported (the API's before any), and
// otherwise how long it has left.
func (s *Syncer) activeDeadline(pod *v1.Pod) (bool, time.Duration) {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false, 0
	}
	start := pod.Status.StartTime
	if s.status != nil {
		if st, ok := s.status.GetPodStatus(pod.UID); ok && st.StartTime != nil {
			start = st.StartTime
		}
	}
	return status.ActiveDeadline(pod, start, s.clock.Now())
}

// gracePeriod is the pod's termination grace period.
func gracePeriod(pod *v1.Pod) time.Duration {
	secs := int64(v1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		secs = *pod.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(secs) * time.Second
}
