package podsync

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/journal"
	"github.com/heartlet/heartlet/internal/runtime"
)

// resize lets the Resizer decide and apply a resize of desired and returns
// the pod at its allocation after it, which the rest of the sync starts
// containers with. A container to restart for the resize is stopped and
// joins the containers started again at once. A resize error is returned
// for the worker to retry; the sync goes on.
func (s *Syncer) resize(ctx context.Context, desired, pod *v1.Pod, rs *runtime.PodStatus, acts *podActions) (_ *v1.Pod, changed bool, _ error) {
	if s.opts.Resizer == nil || acts.terminal {
		return pod, false, nil
	}
	// The resizer asks for a container's resources only to update them.
	linux := func(p *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
		changed = true
		return s.containerResources(p, c)
	}
	restart, err := s.opts.Resizer.Sync(ctx, desired, rs, linux)
	pod = s.opts.Resizer.Allocated(desired)
	if err != nil {
		return pod, true, fmt.Errorf("resize pod %s: %w", klog.KObj(pod), err)
	}
	for _, name := range restart {
		rec := rs.FindContainer(name)
		if rec == nil || rec.State != runtime.ContainerRunning {
			continue
		}
		msg := fmt.Sprintf("Container %s resize requires restart", name)
		s.note(pod, journal.Entry{Kind: journal.KindContainer, Container: name, Reason: "Resize", Message: "restarting the container for a resize"})
		changed = true
		if err := s.killContainer(ctx, pod, name, rec.ID, gracePeriod(pod), msg); err != nil {
			return pod, true, err
		}
		// Started again by the next sync, as any stopped container the
		// pod's restart policy restarts; wake it at once.
		if acts.requeueAfter <= 0 || acts.requeueAfter > resizeRestartRequeue {
			acts.requeueAfter = resizeRestartRequeue
		}
	}
	return pod, changed, nil
}

// resizeRestartRequeue is how soon a pod syncs again after a container
// was stopped to restart it for a resize.
const resizeRestartRequeue = 100 * time.Millisecond
