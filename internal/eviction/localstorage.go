package eviction

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The kubelet_evictions labels of upstream's local storage evictions
// (localStorageCapacityIsolation); they are not thresholds and cannot be
// configured.
const (
	// SignalEmptyDirFsLimit: an emptyDir volume uses more than its
	// sizeLimit.
	SignalEmptyDirFsLimit Signal = "emptydirfs.limit"
	// SignalEphemeralPodFsLimit: a pod uses more local ephemeral storage
	// than the sum of its containers' limits.
	SignalEphemeralPodFsLimit Signal = "ephemeralpodfs.limit"
	// SignalEphemeralContainerFsLimit: a container uses more local
	// ephemeral storage than its limit.
	SignalEphemeralContainerFsLimit Signal = "ephemeralcontainerfs.limit"
)

// Upstream's messages of the local storage evictions.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// Violation is a pod to evict for its local storage use: the label its
// eviction is counted under and the evicted pod's message.
type Violation struct {
	Pod     *v1.Pod
	Signal  Signal
	Message string
}

// LocalStorageViolations are the pods exceeding a local storage limit, in
// the order of pods, at most one violation each, checked as upstream
// checks them:
//   - an emptyDir volume using more than its positive sizeLimit (a
//     memory-backed one cannot: its tmpfs has that size);
//   - the pod's local ephemeral storage (writable layers, logs, volumes
//     on disk) above the sum of its containers' ephemeral-storage limits,
//     when any container has one;
//   - a container's logs, and its writable layer unless the images live
//     on a filesystem of their own (dedicatedImageFs), above its
//     ephemeral-storage limit.
//
// Pods without stats are skipped; critical pods are the caller's to skip.
func LocalStorageViolations(pods []*v1.Pod, stats PodStats, dedicatedImageFs bool) []Violation {
	var out []Violation
	for _, pod := range pods {
		s, ok := stats[pod.UID]
		if !ok {
			continue
		}
		if v, ok := emptyDirViolation(pod, s); ok {
			out = append(out, v)
		} else if v, ok := podLimitViolation(pod, s); ok {
			out = append(out, v)
		} else if v, ok := containerLimitViolation(pod, s, dedicatedImageFs); ok {
			out = append(out, v)
		}
	}
	return out
}

// HasLocalStorageLimit tells whether LocalStorageViolations can find the
// pod over a limit: it has an emptyDir with a size limit, or an
// ephemeral-storage limit of its own or of one of its containers.
func HasLocalStorageLimit(pod *v1.Pod) bool {
	for _, vol := range pod.Spec.Volumes {
		if ed := vol.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	if r := pod.Spec.Resources; r != nil {
		if _, ok := r.Limits[v1.ResourceEphemeralStorage]; ok {
			return true
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	return false
}

func emptyDirViolation(pod *v1.Pod, s statsapi.PodStats) (Violation, bool) {
	used := map[string]uint64{}
	for _, vs := range s.VolumeStats {
		if vs.UsedBytes != nil {
			used[vs.Name] = *vs.UsedBytes
		}
	}
	for _, vol := range pod.Spec.Volumes {
		ed := vol.EmptyDir
		if ed == nil || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		u, ok := used[vol.Name]
		if !ok {
			continue
		}
		if resource.NewQuantity(int64(u), resource.BinarySI).Cmp(*ed.SizeLimit) > 0 {
			return Violation{Pod: pod, Signal: SignalEmptyDirFsLimit, Message: fmt.Sprintf(emptyDirMessageFmt, vol.Name, ed.SizeLimit.String())}, true
		}
	}
	return Violation{}, false
}

func podLimitViolation(pod *v1.Pod, s statsapi.PodStats) (Violation, bool) {
	limit, ok := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	if !ok {
		return Violation{}, false
	}
	var used uint64
	if e := s.EphemeralStorage; e != nil && e.UsedBytes != nil {
		used = *e.UsedBytes
	}
	if resource.NewQuantity(int64(used), resource.BinarySI).Cmp(limit) > 0 {
		return Violation{Pod: pod, Signal: SignalEphemeralPodFsLimit, Message: fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String())}, true
	}
	return Violation{}, false
}

func containerLimitViolation(pod *v1.Pod, s statsapi.PodStats, dedicatedImageFs bool) (Violation, bool) {
	limits := map[string]resource.Quantity{}
	for _, c := range pod.Spec.Containers {
		if l, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && l.Value() != 0 {
			limits[c.Name] = l
		}
	}
	for _, cs := range s.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		used := fsUsed(cs.Logs)
		if !dedicatedImageFs {
			used += fsUsed(cs.Rootfs)
		}
		if resource.NewQuantity(int64(used), resource.BinarySI).Cmp(limit) > 0 {
			return Violation{Pod: pod, Signal: SignalEphemeralContainerFsLimit, Message: fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, limit.String())}, true
		}
	}
	return Violation{}, false
}

func fsUsed(fs *statsapi.FsStats) uint64 {
	if fs == nil || fs.UsedBytes == nil {
		return 0
	}
	return *fs.UsedBytes
}

// DedicatedImageFs tells whether a summary's image filesystem is another
// filesystem than the node's (the root directory's): their capacities in
// bytes or inodes differ. Without both readings it is false, so that the
// writable layers count toward the containers' limits.
func DedicatedImageFs(s *statsapi.Summary) bool {
	if s == nil || s.Node.Fs == nil || s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil {
		return false
	}
	n, i := s.Node.Fs, s.Node.Runtime.ImageFs
	if n.CapacityBytes == nil || i.CapacityBytes == nil {
		return false
	}
	if *n.CapacityBytes != *i.CapacityBytes {
		return true
	}
	return n.Inodes != nil && i.Inodes != nil && *n.Inodes != *i.Inodes
}

// evictLocalStorage evicts every running pod, critical ones aside, that
// exceeds a local storage limit, within hardGracePeriod and without the
// DisruptionTarget condition, as upstream; it reports whether it evicted
// any. The first one evicted is waited for before the next pass acts.
func (m *Manager) evictLocalStorage(ctx context.Context, summary *statsapi.Summary, now time.Time) bool {
	var pods []*v1.Pod
	for _, p := range m.candidates() {
		if !IsCritical(p) {
			pods = append(pods, p)
		}
	}
	vs := LocalStorageViolations(pods, PodStatsOf(summary), DedicatedImageFs(summary))
	for _, v := range vs {
		g := hardGracePeriod
		m.evictPod(ctx, v.Pod, v.Signal, v.Message, &g, false, now)
	}
	if len(vs) == 0 {
		return false
	}
	m.victim = vs[0].Pod.UID
	return true
}
