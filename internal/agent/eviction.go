package agent

import (
	"context"
	"fmt"
	"path"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/eviction"
	"github.com/heartlet/heartlet/internal/podlifecycle"
	"github.com/heartlet/heartlet/internal/podworker"
)

// memcgRoot is the root of the cgroup v1 memory hierarchy, where
// kernelMemcgNotification arms its threshold.
const memcgRoot = "/sys/fs/cgroup/memory"

// newEviction builds the eviction manager from the eviction thresholds.
// It reads the desired pods, the workers and the event recorder through
// c when it runs, so it is built before them (the Node's manager reports
// its pressure conditions).
func (a *Agent) newEviction(ctx context.Context, c *components) (*eviction.Manager, error) {
	cfg := a.opts.Config
	ts, err := eviction.ParseThresholds(eviction.Config{
		Hard:            cfg.EvictionHard,
		Soft:            cfg.EvictionSoft,
		SoftGracePeriod: cfg.EvictionSoftGracePeriod,
		MinimumReclaim:  cfg.EvictionMinimumReclaim,
		EnforcePods:     cgroupsPerQOS(cfg) && slices.Contains(cfg.EnforceNodeAllocatable, cgroups.EnforcePods),
	})
	if err != nil {
		return nil, fmt.Errorf("eviction: %w", err)
	}
	deps := evictionDeps{c}
	var notifier eviction.MemoryNotifier
	if cfg.KernelMemcgNotification {
		n, err := eviction.NewMemcgNotifier(memcgRoot)
		if err != nil {
			klog.FromContext(ctx).Info("Warning: kernelMemcgNotification is on but unavailable; memory is read every 10 s", "err", err)
		} else {
			notifier = n
		}
	}
	allocNotifier := kubepodsNotifier(ctx, cfg, notifier != nil)
	return eviction.New(eviction.Options{
		LocalStorageCapacityIsolation: localStorageCapacityIsolation(cfg),
		Reclaimable:                   reclaimableReader(ctx, c, a.opts.EvictionMemorySignal),
		MemoryNotifier:                notifier,
		AllocatableNotifier:           allocNotifier,
		Thresholds:                    ts,
		TransitionPeriod:              cfg.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriod:             cfg.EvictionMaxPodGracePeriod,
		Summary:                       c.summary,
		Pods:                          deps,
		Workers:                       deps,
		Statuses:                      c.statuses,
		Reclaimer:                     c.gc,
		Recorder:                      deps,
		// As upstream, the node's events name its UID as its name.
		Node:  &v1.ObjectReference{Kind: "Node", Name: a.opts.NodeName, UID: types.UID(a.opts.NodeName)},
		Clock: a.clock,
	}), nil
}

// evictionPredicate refuses new pods under pressure (the eviction
// manager's admission, checked first as upstream orders it).
func evictionPredicate(m *eviction.Manager) podlifecycle.Predicate {
	return func(a podlifecycle.AdmitAttrs) admission.Result { return m.Admit(a.Pod) }
}

// evictionDeps give the eviction manager the parts of c built after it.
type evictionDeps struct{ c *components }

func (d evictionDeps) Pods() []*v1.Pod { return d.c.desired.Pods() }

func (d evictionDeps) State(uid types.UID) (podworker.State, bool) { return d.c.workers.State(uid) }

func (d evictionDeps) Cleaned(uid types.UID) bool { return d.c.workers.Cleaned(uid) }

func (d evictionDeps) Update(u podworker.Update) { d.c.workers.Update(u) }

func (d evictionDeps) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	if d.c.recorder != nil {
		d.c.recorder.Eventf(obj, eventtype, reason, format, args...)
	}
}

// localStorageCapacityIsolation is localStorageCapacityIsolation, true
// when unset.
func localStorageCapacityIsolation(cfg *kubeletv1beta1.KubeletConfiguration) bool {
	return cfg.LocalStorageCapacityIsolation == nil || *cfg.LocalStorageCapacityIsolation
}

// kubepodsNotifier is the memory cgroup notification on the kubepods
// cgroup for allocatableMemory.available, when the root's works and there
// are QoS cgroups; nil otherwise.
func kubepodsNotifier(ctx context.Context, cfg *kubeletv1beta1.KubeletConfiguration, rootWorks bool) eviction.MemoryNotifier {
	if !rootWorks || !cgroupsPerQOS(cfg) {
		return nil
	}
	root := cfg.CgroupRoot
	if root == "" {
		root = "/"
	}
	n, err := eviction.NewMemcgNotifierBelow(memcgRoot, path.Join(root, cgroups.KubepodsName))
	if err != nil {
		klog.FromContext(ctx).Info("Warning: no memory cgroup notification on the pods' cgroup", "err", err)
		return nil
	}
	return n
}
