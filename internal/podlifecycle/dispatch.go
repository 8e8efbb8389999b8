package podlifecycle

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/podworker"
)

// Dispatcher turns changes of the desired pod set into pod worker updates.
type Dispatcher struct {
	admitter *Admitter
	workers  Workers
	probes   Probes
	startup  Startup
}

// NewDispatcher returns a Dispatcher; it has no side effects.
func NewDispatcher(admitter *Admitter, workers Workers, probes Probes, startup Startup) *Dispatcher {
	return &Dispatcher{admitter: admitter, workers: workers, probes: probes, startup: startup}
}

// Run handles every update from updates, in order, until ctx is done.
func (d *Dispatcher) Run(ctx context.Context, updates <-chan podconfig.Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-updates:
			d.Handle(ctx, u)
		}
	}
}

// Handle decides what one change of the desired set does:
//
//   - a pod removed from its source is killed with its default grace
//     period and forgotten by admission, probes and startup tracking; the
//     workers forget it once it has terminated;
//   - a pod being deleted in the API is killed with its deletion grace
//     period; one not yet terminated keeps its readiness probes while it
//     terminates (liveness and startup stop, as upstream's). Its worker
//     record is kept once it has terminated, until the source removes the
//     pod: the updates the deletion still brings (the final status, the
//     removal itself) then find it terminated, and none of them starts a
//     second termination of a pod already gone from the runtime;
//   - a pod in a terminal phase the workers do not know (it finished before
//     a restart of heartlet) is never run again;
//   - a new pod passes admission first: a rejected pod is never started;
//   - a change of a known pod updates its worker; a change of an unknown
//     one (rejected at admission) is ignored.
func (d *Dispatcher) Handle(ctx context.Context, u podconfig.Update) {
	pod := u.Pod
	if pod == nil {
		return
	}
	switch {
	case u.Op == podconfig.OpRemove:
		d.admitter.Forget(pod.UID)
		d.startup.Forget(pod.UID)
		d.probes.RemovePod(pod.UID)
		d.workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: pod})
	case pod.DeletionTimestamp != nil:
		if st, ok := d.workers.State(pod.UID); ok && st != podworker.StateTerminated {
			d.probes.AddPod(pod)
		}
		d.workers.Update(podworker.Update{Type: podworker.UpdateKill, Pod: pod, GracePeriod: pod.DeletionGracePeriodSeconds, Keep: true})
	case podspec.IsTerminalPhase(pod.Status.Phase) && !d.workers.Known(pod.UID):
		klog.FromContext(ctx).V(4).Info("Pod already finished, not started", "pod", klog.KObj(pod), "podUID", pod.UID, "phase", pod.Status.Phase)
	case u.Op == podconfig.OpAdd:
		d.startup.Seen(pod)
		if d.admitter.Admit(ctx, pod) {
			d.probes.AddPod(pod)
			d.workers.Update(podworker.Update{Type: podworker.UpdateCreate, Pod: pod})
		}
	default:
		if d.workers.Known(pod.UID) {
			d.probes.AddPod(pod)
			d.workers.Update(podworker.Update{Type: podworker.UpdateUpdate, Pod: pod})
		}
	}
}
