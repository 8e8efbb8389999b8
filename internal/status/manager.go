package status

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podspec"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// maxTerminationMessageBytes bounds the termination messages of one pod,
// shared evenly between its containers.
const maxTerminationMessageBytes = 12 * 1024

// Manager is the in-memory authority on every pod's reported status. It is
// safe for concurrent use. Each pod's status carries a version that grows
// on every real change, so a syncer can tell what it has already sent.
type Manager struct {
	clk clock.PassiveClock

	mu      sync.RWMutex
	pods    map[types.UID]*entry
	version uint64 // last version handed out, across all pods
	subs    map[chan struct{}]struct{}
}

// entry is one pod's stored status.
type entry struct {
	pod     *v1.Pod
	status  v1.PodStatus
	version uint64
	// unwritten is when the oldest change not yet written to the API was
	// made, lastChange when the newest was; see markWritten.
	unwritten, lastChange time.Time
}

// NewManager returns an empty manager that stamps times with clk.
func NewManager(clk clock.PassiveClock) *Manager {
	return &Manager{
		clk:  clk,
		pods: map[types.UID]*entry{},
		subs: map[chan struct{}]struct{}{},
	}
}

// SetPodStatus records st as pod's status. It stores copies and:
//   - refuses to leave a terminal phase (Succeeded or Failed): the phase,
//     reason and message stay;
//   - drops an update that moves a container out of a terminated state its
//     restart policy does not allow it to leave;
//   - keeps the start time, and keeps a condition's transition time while
//     its status is unchanged (setting missing times to now);
//   - truncates times to seconds, as the API stores them, and bounds the
//     termination messages;
//   - bumps the pod's version and notifies subscribers only when something
//     other than condition probe times changed.
//
// The pod object itself is always refreshed for Pods.
func (m *Manager) SetPodStatus(pod *v1.Pod, st v1.PodStatus) {
	now := metav1.NewTime(m.clk.Now())
	status := *st.DeepCopy()
	logger := klog.Background().WithValues("pod", klog.KObj(pod), "podUID", pod.UID)

	m.mu.Lock()
	defer m.mu.Unlock()

	e, cached := m.pods[pod.UID]
	old := &pod.Status
	if cached {
		old = &e.status
	}
	if err := checkContainerTransitions(old, &status, &pod.Spec); err != nil {
		logger.Error(err, "Status update on pod aborted")
		if cached {
			e.pod = pod.DeepCopy()
		}
		return
	}
	if podspec.IsTerminalPhase(old.Phase) && status.Phase != old.Phase {
		logger.V(2).Info("Refusing to move pod out of a terminal phase", "phase", old.Phase, "newPhase", status.Phase)
		status.Phase, status.Reason, status.Message = old.Phase, old.Reason, old.Message
	}
	for i := range status.Conditions {
		cond := &status.Conditions[i]
		if oc := findCondition(old.Conditions, cond.Type); oc != nil && oc.Status == cond.Status && !oc.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = oc.LastTransitionTime
		} else if cond.LastTransitionTime.IsZero() {
			cond.LastTransitionTime = now
		}
	}
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t := *old.StartTime
		status.StartTime = &t
	case status.StartTime == nil || status.StartTime.IsZero():
		status.StartTime = &now
	}
	normalize(&status)

	if cached && equalIgnoringProbeTimes(&e.status, &status) {
		e.pod = pod.DeepCopy()
		return
	}
	m.version++
	unwritten := now.Time
	if cached && !e.unwritten.IsZero() {
		unwritten = e.unwritten
	}
	m.pods[pod.UID] = &entry{pod: pod.DeepCopy(), status: status, version: m.version, unwritten: unwritten, lastChange: now.Time}
	logger.V(4).Info("Pod status updated", "phase", status.Phase, "version", m.version)
	m.notifyLocked()
}

// GetPodStatus returns a copy of the pod's status.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	st, _, ok := m.GetVersionedPodStatus(uid)
	return st, ok
}

// GetVersionedPodStatus returns a copy of the pod's status and its
// version. Versions only grow, across all pods, including after a pod is
// removed and added again.
func (m *Manager) GetVersionedPodStatus(uid types.UID) (v1.PodStatus, uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, 0, false
	}
	return *e.status.DeepCopy(), e.version, true
}

// markWritten records that the pod's status as of version reached the API
// and returns when the oldest change it carried was made; zero when no
// change was waiting. Changes newer than version count from the newest
// of them.
func (m *Manager) markWritten(uid types.UID, version uint64) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return time.Time{}
	}
	since := e.unwritten
	e.unwritten = time.Time{}
	if version < e.version {
		e.unwritten = e.lastChange
	}
	return since
}

// RemovePod forgets the pod. Removing an unknown pod does nothing.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[uid]; !ok {
		return
	}
	delete(m.pods, uid)
	m.notifyLocked()
}

// Pods returns deep copies of every known pod with its status set, sorted
// by namespace, name and UID.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.RLock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, e := range m.pods {
		p := e.pod.DeepCopy()
		p.Status = *e.status.DeepCopy()
		out = append(out, p)
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b *v1.Pod) int {
		return comparePods(a.Namespace, a.Name, a.UID, b.Namespace, b.Name, b.UID)
	})
	return out
}

// UIDs returns the UID of every known pod, in no particular order: what
// Pods gives without copying any pod or status.
func (m *Manager) UIDs() []types.UID {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]types.UID, 0, len(m.pods))
	for uid := range m.pods {
		out = append(out, uid)
	}
	return out
}

// comparePods orders pods by namespace, name and UID.
func comparePods(aNamespace, aName string, aUID types.UID, bNamespace, bName string, bUID types.UID) int {
	return cmp.Or(cmp.Compare(aNamespace, bNamespace), cmp.Compare(aName, bName), cmp.Compare(aUID, bUID))
}

// podRef is what a syncer round reads of every pod to decide whether it
// has work for it, without copying the pod or its status.
type podRef struct {
	uid             types.UID
	namespace, name string
	version         uint64
	// deleting: the pod as last set carries a deletion timestamp.
	deleting bool
	// static: a static pod, whose status goes to a mirror pod that may
	// have been replaced.
	static bool
}

// refs returns a podRef of every known pod, sorted by namespace, name and
// UID.
func (m *Manager) refs() []podRef {
	m.mu.RLock()
	out := make([]podRef, 0, len(m.pods))
	for uid, e := range m.pods {
		out = append(out, podRef{uid: uid, namespace: e.pod.Namespace, name: e.pod.Name, version: e.version,
			deleting: e.pod.DeletionTimestamp != nil, static: podconfig.IsStatic(e.pod)})
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b podRef) int {
		return comparePods(a.namespace, a.name, a.uid, b.namespace, b.name, b.uid)
	})
	return out
}

// podWithStatus returns a deep copy of the pod with its status set, the
// status again on its own, and the status's version.
func (m *Manager) podWithStatus(uid types.UID) (*v1.Pod, v1.PodStatus, uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.pods[uid]
	if !ok {
		return nil, v1.PodStatus{}, 0, false
	}
	// The pod's own status is replaced: not copied.
	shell := *e.pod
	shell.Status = v1.PodStatus{}
	p := shell.DeepCopy()
	p.Status = *e.status.DeepCopy()
	return p, *e.status.DeepCopy(), e.version, true
}

// Subscribe returns a channel that receives a value after any pod's status
// changes or a pod is removed. Signals coalesce: one pending value stands
// for any number of changes. cancel stops the signals; the channel is not
// closed.
func (m *Manager) Subscribe() (changed <-chan struct{}, cancel func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subs[ch] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs, ch)
			m.mu.Unlock()
		})
	}
}

// notifyLocked signals every subscriber without blocking. m.mu is held.
func (m *Manager) notifyLocked() {
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// equalIgnoringProbeTimes compares two statuses, ignoring the conditions'
// probe times.
func equalIgnoringProbeTimes(a, b *v1.PodStatus) bool {
	strip := func(s *v1.PodStatus) *v1.PodStatus {
		c := s.DeepCopy()
		for i := range c.Conditions {
			c.Conditions[i].LastProbeTime = metav1.Time{}
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// checkContainerTransitions rejects a status in which a container leaves a
// terminated state that its restart rules make final, as upstream's status
// manager: a container that exited and neither the pod's OnFailure policy
// (after a failure) nor the container's own rules, policy or the pod's
// policy restarts. Sidecars and pods with policy Always may restart.
func checkContainerTransitions(old, cur *v1.PodStatus, spec *v1.PodSpec) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways {
		return nil
	}
	final := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		if t == nil || (t.ExitCode != 0 && spec.RestartPolicy == v1.RestartPolicyOnFailure) {
			return false
		}
		return c == nil || !podspec.RestartsOnExit(c, spec, t.ExitCode)
	}
	for _, o := range old.ContainerStatuses {
		if !final(specContainer(spec.Containers, o.Name), o.State.Terminated) {
			continue
		}
		if n := findStatus(cur.ContainerStatuses, o.Name); n != nil && n.State.Terminated == nil {
			return fmt.Errorf("terminated container %q attempted illegal transition to non-terminated state", o.Name)
		}
	}
	for _, o := range old.InitContainerStatuses {
		c := specContainer(spec.InitContainers, o.Name)
		if (c != nil && podspec.IsSidecar(c)) || !final(c, o.State.Terminated) {
			continue
		}
		if n := findStatus(cur.InitContainerStatuses, o.Name); n != nil && n.State.Terminated == nil {
			return fmt.Errorf("terminated init container %q attempted illegal transition to non-terminated state", o.Name)
		}
	}
	return nil
}

// specContainer is the named container of list, or nil.
func specContainer(list []v1.Container, name string) *v1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// normalize truncates every time to whole seconds, as the API serializes
// them, and bounds termination messages, so that a status read back from
// the API compares equal to the stored one.
func normalize(s *v1.PodStatus) {
	if s.StartTime != nil {
		t := s.StartTime.Rfc3339Copy()
		s.StartTime = &t
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.LastProbeTime = c.LastProbeTime.Rfc3339Copy()
		c.LastTransitionTime = c.LastTransitionTime.Rfc3339Copy()
	}
	n := len(s.ContainerStatuses) + len(s.InitContainerStatuses) + len(s.EphemeralContainerStatuses)
	if n == 0 {
		return
	}
	budget := maxTerminationMessageBytes / n
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			normalizeState(&list[i].State, budget)
			normalizeState(&list[i].LastTerminationState, budget)
		}
	}
}

// normalizeState truncates a container state's times to seconds and its
// termination message to budget bytes.
func normalizeState(st *v1.ContainerState, budget int) {
	if r := st.Running; r != nil {
		r.StartedAt = r.StartedAt.Rfc3339Copy()
	}
	if t := st.Terminated; t != nil {
		t.StartedAt = t.StartedAt.Rfc3339Copy()
		t.FinishedAt = t.FinishedAt.Rfc3339Copy()
		if len(t.Message) > budget {
			t.Message = t.Message[:budget]
		}
	}
}
