package runtime

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/heartlet/heartlet/internal/errdefs"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// ListPods returns every pod the runtime has objects for, cheaply: one
// ListPodSandbox and one ListContainers, grouped by the pod UID label.
// Sandboxes and containers without that label are ignored. States, IDs,
// names, creation times and the annotation-derived fields are filled; IPs,
// exit codes and other status-only fields are not. Pods are ordered by UID,
// their sandboxes and containers newest first.
func (r *Runtime) ListPods(ctx context.Context) ([]*PodStatus, error) {
	mark := r.idx.begin()
	sandboxes, err := r.listSandboxes(ctx, nil)
	if err != nil {
		return nil, err
	}
	containers, err := r.listContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	r.idx.replace(mark, sandboxes, containers)
	logger := klog.FromContext(ctx)
	pods := map[types.UID]*PodStatus{}
	get := func(labels map[string]string) *PodStatus {
		uid := types.UID(labels[LabelPodUID])
		p := pods[uid]
		if p == nil {
			p = &PodStatus{UID: uid}
			pods[uid] = p
		}
		if p.Name == "" {
			p.Name, p.Namespace = labels[LabelPodName], labels[LabelPodNamespace]
		}
		return p
	}
	for _, s := range sandboxes {
		if s.GetLabels()[LabelPodUID] == "" {
			continue
		}
		p := get(s.GetLabels())
		p.Sandboxes = append(p.Sandboxes, &SandboxStatus{
			ID:          s.GetId(),
			State:       sandboxState(s.GetState()),
			CreatedAt:   fromNanos(s.GetCreatedAt()),
			Attempt:     s.GetMetadata().GetAttempt(),
			Labels:      s.GetLabels(),
			Annotations: s.GetAnnotations(),
		})
	}
	for _, c := range containers {
		if c.GetLabels()[LabelPodUID] == "" {
			continue
		}
		p := get(c.GetLabels())
		cs := &ContainerStatus{
			ID:          c.GetId(),
			Name:        containerName(c.GetLabels(), c.GetMetadata()),
			SandboxID:   c.GetPodSandboxId(),
			State:       containerState(c.GetState()),
			CreatedAt:   fromNanos(c.GetCreatedAt()),
			Image:       c.GetImage().GetImage(),
			ImageRef:    c.GetImageRef(),
			Attempt:     c.GetMetadata().GetAttempt(),
			Labels:      c.GetLabels(),
			Annotations: c.GetAnnotations(),
		}
		applyAnnotations(logger, cs)
		p.Containers = append(p.Containers, cs)
	}
	out := make([]*PodStatus, 0, len(pods))
	for _, p := range pods {
		sortNewestFirst(p)
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// GetPodStatus returns the full runtime status of one pod: every sandbox
// with its IPs and every container with exit code, reason and timestamps,
// newest first. Objects that vanish between the list and the status calls
// are skipped. When the runtime has nothing for uid the result is an empty
// PodStatus with UID set.
func (r *Runtime) GetPodStatus(ctx context.Context, uid types.UID) (*PodStatus, error) {
	sandboxes, containers, err := r.podObjects(ctx, uid)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	p := &PodStatus{UID: uid}
	setName := func(labels map[string]string) {
		if p.Name == "" {
			p.Name, p.Namespace = labels[LabelPodName], labels[LabelPodNamespace]
		}
	}
	for _, ref := range sandboxes {
		st := ref.cached
		if st == nil {
			st, err = r.sandboxStatus(ctx, ref.id)
			if errors.Is(err, errdefs.ErrNotFound) {
				r.idx.remove(ref.id)
				continue
			}
			if err != nil {
				return nil, err
			}
			r.idx.keepSandboxStatus(ref, st)
		}
		setName(st.GetLabels())
		p.Sandboxes = append(p.Sandboxes, decodeSandboxStatus(st))
	}
	for _, ref := range containers {
		c := ref.listed
		st := ref.cached
		if st == nil {
			st, err = r.containerStatus(ctx, c.GetId())
			if errors.Is(err, errdefs.ErrNotFound) {
				r.idx.remove(c.GetId())
				continue
			}
			if err != nil {
				return nil, err
			}
			r.idx.keepContainerStatus(ref, st)
		}
		cs := decodeContainerStatus(st, c)
		applyAnnotations(logger, cs)
		setName(cs.Labels)
		p.Containers = append(p.Containers, cs)
	}
	sortNewestFirst(p)
	return p, nil
}

// podObjects returns a pod's sandboxes and its containers as known: from
// the index when a full list has primed it (with the statuses to reuse),
// else from a ListPodSandbox and a ListContainers filtered by the pod's UID
// label.
func (r *Runtime) podObjects(ctx context.Context, uid types.UID) ([]sandboxRef, []containerRef, error) {
	if sandboxes, containers, ok := r.idx.lookup(uid); ok {
		return sandboxes, containers, nil
	}
	selector := map[string]string{LabelPodUID: string(uid)}
	sandboxes, err := r.listSandboxes(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: selector})
	if err != nil {
		return nil, nil, err
	}
	containers, err := r.listContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: selector})
	if err != nil {
		return nil, nil, err
	}
	sbs := make([]sandboxRef, 0, len(sandboxes))
	for _, s := range sandboxes {
		sbs = append(sbs, sandboxRef{id: s.GetId()})
	}
	cs := make([]containerRef, 0, len(containers))
	for _, c := range containers {
		cs = append(cs, containerRef{listed: c})
	}
	return sbs, cs, nil
}

// SandboxIPs returns the IPs of one sandbox as GetPodStatus reports them
// (none for a sandbox in the node's network): one status call, where a
// pod's whole status also lists its sandboxes and containers. The status
// read is the one the pod's next GetPodStatus reports while the sandbox is
// ready.
func (r *Runtime) SandboxIPs(ctx context.Context, id string) ([]string, error) {
	st, err := r.sandboxStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	r.idx.keepSandboxStatusByID(st)
	return decodeSandboxStatus(st).IPs, nil
}

// decodeSandboxStatus converts a CRI sandbox status.
func decodeSandboxStatus(st *runtimeapi.PodSandboxStatus) *SandboxStatus {
	s := &SandboxStatus{
		ID:          st.GetId(),
		State:       sandboxState(st.GetState()),
		CreatedAt:   fromNanos(st.GetCreatedAt()),
		Attempt:     st.GetMetadata().GetAttempt(),
		HostNetwork: st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
		Labels:      st.GetLabels(),
		Annotations: st.GetAnnotations(),
	}
	if !s.HostNetwork {
		if ip := st.GetNetwork().GetIp(); ip != "" {
			s.IPs = append(s.IPs, ip)
		}
		for _, ip := range st.GetNetwork().GetAdditionalIps() {
			if ip.GetIp() != "" {
				s.IPs = append(s.IPs, ip.GetIp())
			}
		}
	}
	return s
}

// decodeContainerStatus converts a CRI container status; listed supplies
// what the status lacks (the sandbox ID) or omits.
func decodeContainerStatus(st *runtimeapi.ContainerStatus, listed *runtimeapi.Container) *ContainerStatus {
	labels, annotations := st.GetLabels(), st.GetAnnotations()
	if labels == nil {
		labels = listed.GetLabels()
	}
	if annotations == nil {
		annotations = listed.GetAnnotations()
	}
	image := st.GetImage().GetImage()
	if image == "" {
		image = listed.GetImage().GetImage()
	}
	imageRef := st.GetImageRef()
	if imageRef == "" {
		imageRef = listed.GetImageRef()
	}
	cs := &ContainerStatus{
		ID:          st.GetId(),
		Name:        containerName(labels, st.GetMetadata()),
		SandboxID:   listed.GetPodSandboxId(),
		State:       containerState(st.GetState()),
		CreatedAt:   fromNanos(st.GetCreatedAt()),
		StartedAt:   fromNanos(st.GetStartedAt()),
		FinishedAt:  fromNanos(st.GetFinishedAt()),
		ExitCode:    st.GetExitCode(),
		Reason:      st.GetReason(),
		Message:     st.GetMessage(),
		Image:       image,
		ImageRef:    imageRef,
		LogPath:     st.GetLogPath(),
		Attempt:     st.GetMetadata().GetAttempt(),
		Labels:      labels,
		Annotations: annotations,
		Resources:   st.GetResources().GetLinux(),
	}
	for _, m := range st.GetMounts() {
		cs.Mounts = append(cs.Mounts, Mount{HostPath: m.GetHostPath(), ContainerPath: m.GetContainerPath()})
	}
	return cs
}

// applyAnnotations fills the fields heartlet keeps in annotations. A
// malformed annotation is logged and leaves its field zero.
func applyAnnotations(logger klog.Logger, cs *ContainerStatus) {
	info, err := ParseContainerAnnotations(cs.Annotations)
	if err != nil {
		logger.V(2).Info("Ignoring malformed container annotations", "container", cs.Name, "containerID", cs.ID, "err", err)
	}
	cs.Hash, cs.RestartCount, cs.Init = info.Hash, info.RestartCount, info.Init
}

// containerName is the pod spec's container name: the label, else the CRI
// metadata name.
func containerName(labels map[string]string, md *runtimeapi.ContainerMetadata) string {
	if n := labels[LabelContainerName]; n != "" {
		return n
	}
	return md.GetName()
}

// sortNewestFirst orders a pod's sandboxes and containers by creation time,
// newest first; ties go to the higher attempt, then the ID.
func sortNewestFirst(p *PodStatus) {
	sort.SliceStable(p.Sandboxes, func(i, j int) bool {
		a, b := p.Sandboxes[i], p.Sandboxes[j]
		return newer(a.CreatedAt, b.CreatedAt, a.Attempt, b.Attempt, a.ID, b.ID)
	})
	sort.SliceStable(p.Containers, func(i, j int) bool {
		a, b := p.Containers[i], p.Containers[j]
		return newer(a.CreatedAt, b.CreatedAt, a.Attempt, b.Attempt, a.ID, b.ID)
	})
}

func newer(ta, tb time.Time, aa, ab uint32, ia, ib string) bool {
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	if aa != ab {
		return aa > ab
	}
	return ia > ib
}

func sandboxState(s runtimeapi.PodSandboxState) SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return SandboxReady
	}
	return SandboxNotReady
}

func containerState(s runtimeapi.ContainerState) ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerExited
	default:
		return ContainerUnknown
	}
}

// fromNanos converts a CRI timestamp (nanoseconds since the epoch; zero
// when unset) to a time.
func fromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
