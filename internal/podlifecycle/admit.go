package podlifecycle

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/sysctl"
)

// AdmitAttrs is what an admission predicate decides on.
type AdmitAttrs struct {
	// Pod is the new pod.
	Pod *v1.Pod
	// Node is the Node object; nil when not known (standalone mode, or
	// before the first read).
	Node *v1.Node
	// Allocatable is the node's allocatable resources; empty when unknown.
	Allocatable v1.ResourceList
	// Active are the desired pods that hold node resources: admitted and
	// not yet terminated, Pod itself left out.
	Active []*v1.Pod
}

// Predicate is one admission check. It must be a pure function of its
// attributes (and of what it was built with) and safe for concurrent use.
type Predicate func(AdmitAttrs) admission.Result

// SysctlPredicate admits a pod whose sysctls the node's allowlist allows
// (nil allows every sysctl).
func SysctlPredicate(allow *sysctl.Allowlist) Predicate {
	return func(a AdmitAttrs) admission.Result { return admission.Sysctls(a.Pod, allow) }
}

// NodePredicate is the kubelet's predicate admission (operating system,
// pod count and resources, node affinity and name, host ports, NoExecute
// taints) with the node's pod capacity maxPods.
func NodePredicate(maxPods int) Predicate {
	return func(a AdmitAttrs) admission.Result {
		return admission.Admit(a.Pod, a.Node, a.Allocatable, a.Active, maxPods)
	}
}

// Warning is something about an admitted pod its owner should know: a
// Warning event on the pod.
type Warning struct {
	Reason  string
	Message string
}

// Warner lists the warnings about a pod that is admitted. It must be a
// pure function of its attributes (and of what it was built with) and
// safe for concurrent use.
type Warner func(AdmitAttrs) []Warning

// AdmitterOptions are what an Admitter reads and reports to.
type AdmitterOptions struct {
	// Predicates are checked in order; the first that refuses decides.
	// Upstream's order puts the sysctl check before the node predicates.
	Predicates []Predicate
	// Warners are asked, in order, about a pod the predicates admit.
	Warners  []Warner
	Desired  Desired
	Workers  Workers
	Statuses Statuses
	// Recorder may be nil.
	Recorder Recorder
	// Journal records admissions and rejections; nil records none.
	Journal Journal
	// Node and Allocatable may be nil (standalone mode).
	Node        func() *v1.Node
	Allocatable func() v1.ResourceList
	// Allocated returns a pod at the resources allocated to it (in-place
	// resize), the pod itself when none are recorded; it must not block.
	// Admission counts every pod, the new one too (admitted before a
	// restart of heartlet), at its allocation, as upstream: a pending
	// resize holds nothing until it is accepted. Nil counts specs.
	Allocated func(*v1.Pod) *v1.Pod
}

// Admitter decides whether a new pod may run on this node. A rejected pod
// is reported Failed with the predicate's reason and message, with a
// Warning event, and is never started. It remembers the rejected pods, so
// that they do not count as active for the pods admitted after them, until
// Forget.
type Admitter struct {
	opts AdmitterOptions

	mu       sync.Mutex
	rejected map[types.UID]bool
}

// NewAdmitter returns an Admitter; it has no side effects.
func NewAdmitter(opts AdmitterOptions) *Admitter {
	return &Admitter{opts: opts, rejected: map[types.UID]bool{}}
}

// Admit reports whether pod may start; a rejection is recorded in the
// pod's status and as an event.
func (a *Admitter) Admit(ctx context.Context, pod *v1.Pod) bool {
	attrs := AdmitAttrs{Pod: a.allocated(pod), Active: a.allocatedAll(a.Active(pod.UID))}
	if a.opts.Node != nil {
		attrs.Node = a.opts.Node()
	}
	if a.opts.Allocatable != nil {
		attrs.Allocatable = a.opts.Allocatable()
	}
	res := admission.Result{Admit: true}
	for _, p := range a.opts.Predicates {
		if res = p(attrs); !res.Admit {
			break
		}
	}
	if res.Admit {
		a.note(pod, journal.Entry{Kind: journal.KindAdmission, Message: "admitted"})
		a.warn(ctx, attrs)
		return true
	}
	a.note(pod, journal.Entry{Kind: journal.KindAdmission, Reason: res.Reason, Message: "rejected: " + res.Message})
	klog.FromContext(ctx).Info("Pod rejected by admission", "pod", klog.KObj(pod), "podUID", pod.UID, "reason", res.Reason, "message", res.Message)
	a.mu.Lock()
	a.rejected[pod.UID] = true
	a.mu.Unlock()
	st := *pod.Status.DeepCopy()
	st.Phase = v1.PodFailed
	st.Reason = res.Reason
	st.Message = res.Message
	a.opts.Statuses.SetPodStatus(pod, st)
	if a.opts.Recorder != nil {
		a.opts.Recorder.Eventf(pod, v1.EventTypeWarning, res.Reason, "%s", res.Message)
	}
	return false
}

// warn records the warnings about an admitted pod as events (and logs).
func (a *Admitter) warn(ctx context.Context, attrs AdmitAttrs) {
	for _, w := range a.opts.Warners {
		for _, ws := range w(attrs) {
			klog.FromContext(ctx).Info("Pod admitted with a warning", "pod", klog.KObj(attrs.Pod), "podUID", attrs.Pod.UID, "reason", ws.Reason, "message", ws.Message)
			a.note(attrs.Pod, journal.Entry{Kind: journal.KindAdmission, Reason: ws.Reason, Message: "warning: " + ws.Message})
			if a.opts.Recorder != nil {
				a.opts.Recorder.Eventf(attrs.Pod, v1.EventTypeWarning, ws.Reason, "%s", ws.Message)
			}
		}
	}
}

// allocated is pod at its allocation.
func (a *Admitter) allocated(pod *v1.Pod) *v1.Pod {
	if a.opts.Allocated == nil {
		return pod
	}
	return a.opts.Allocated(pod)
}

// allocatedAll is pods at their allocations.
func (a *Admitter) allocatedAll(pods []*v1.Pod) []*v1.Pod {
	if a.opts.Allocated == nil {
		return pods
	}
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = a.opts.Allocated(p)
	}
	return out
}

// note records e in the pod's journal, when there is one.
func (a *Admitter) note(pod *v1.Pod, e journal.Entry) {
	if a.opts.Journal != nil {
		a.opts.Journal.Record(pod.UID, e)
	}
}

// Active lists the desired pods that hold node resources: not rejected,
// known to the workers and not yet terminated, other than uid itself
// (empty: every one). The pods are Desired's: the caller must not modify
// them.
func (a *Admitter) Active(uid types.UID) []*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*v1.Pod
	for _, p := range a.opts.Desired.Pods() {
		if p.UID == uid || a.rejected[p.UID] {
			continue
		}
		st, known := a.opts.Workers.State(p.UID)
		if !known || st == podworker.StateTerminated {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Rejected tells whether the pod was rejected (and not forgotten since).
func (a *Admitter) Rejected(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rejected[uid]
}

// Forget drops what is remembered about a pod that is gone.
func (a *Admitter) Forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.rejected, uid)
}
