package agent

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/admission"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsync"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/status"
	"github.com/heartlet/heartlet/internal/sysctl"
)

// admitter decides whether a new pod may run on this node. A rejected pod
// is reported Failed with the admission reason and never started.
type admitter struct {
	statuses    *status.Manager
	workers     *podworker.Workers
	desired     *podconfig.Config
	recorder    podsync.Recorder
	maxPods     int
	node        func() *v1.Node
	allocatable func() v1.ResourceList
	// sysctls is the node's sysctl allowlist; nil admits every sysctl.
	sysctls *sysctl.Allowlist

	mu       sync.Mutex
	rejected map[types.UID]bool
}

// admit reports whether pod may start; a rejection is recorded in the
// pod's status and as an event.
func (a *admitter) admit(ctx context.Context, pod *v1.Pod) bool {
	var node *v1.Node
	var alloc v1.ResourceList
	if a.node != nil {
		node = a.node()
	}
	if a.allocatable != nil {
		alloc = a.allocatable()
	}
	// Sysctls are checked before the predicates, as upstream orders its
	// admit handlers.
	res := admission.Sysctls(pod, a.sysctls)
	if res.Admit {
		res = admission.Admit(pod, node, alloc, a.active(pod.UID), a.maxPods)
	}
	if res.Admit {
		return true
	}
	klog.FromContext(ctx).Info("Pod rejected by admission", "pod", klog.KObj(pod), "podUID", pod.UID, "reason", res.Reason, "message", res.Message)
	a.mu.Lock()
	if a.rejected == nil {
		a.rejected = map[types.UID]bool{}
	}
	a.rejected[pod.UID] = true
	a.mu.Unlock()
	st := *pod.Status.DeepCopy()
	st.Phase = v1.PodFailed
	st.Reason = res.Reason
	st.Message = res.Message
	a.statuses.SetPodStatus(pod, st)
	if a.recorder != nil {
		a.recorder.Eventf(pod, v1.EventTypeWarning, res.Reason, "%s", res.Message)
	}
	return false
}

// active lists the desired pods that hold node resources: admitted and
// not yet terminated, other than uid itself.
func (a *admitter) active(uid types.UID) []*v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*v1.Pod
	for _, p := range a.desired.Pods() {
		if p.UID == uid || a.rejected[p.UID] {
			continue
		}
		st, known := a.workers.State(p.UID)
		if !known || st == podworker.StateTerminated {
			continue
		}
		out = append(out, p)
	}
	return out
}

// forget drops what is remembered about a pod that is gone.
func (a *admitter) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.rejected, uid)
}
