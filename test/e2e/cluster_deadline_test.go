//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A pod active longer than spec.activeDeadlineSeconds is stopped and ends
// Failed with reason DeadlineExceeded, as upstream; so does a running pod
// whose deadline is lowered with kubectl patch.
func TestClusterActiveDeadline(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	wantDeadlineExceeded := func(t *testing.T, name string) {
		t.Helper()
		p := waitAPIPod(t, h, name, time.Minute, "to fail with DeadlineExceeded", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed
		})
		if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("status reason/message = %q/%q, want DeadlineExceeded and upstream's message", p.Status.Reason, p.Status.Message)
		}
		if p.Status.StartTime == nil || time.Since(p.Status.StartTime.Time) < 5*time.Second {
			t.Errorf("pod failed less than 5s after its start time %v", p.Status.StartTime)
		}
		// Nothing of it runs any more.
		c := newCRI(t)
		waitFor(t, time.Minute, "the pod's containers to stop", func() (bool, string) {
			for _, ctr := range c.podContainers(t, string(p.UID), "") {
				if ctr.State.String() == "CONTAINER_RUNNING" {
					return false, "container " + ctr.Id + " still running"
				}
			}
			return true, ""
		})
		if evs, err := podEvents(name, "DeadlineExceeded"); err != nil || len(evs) == 0 {
			t.Errorf("no DeadlineExceeded event for pod %s (err %v)", name, err)
		}
	}

	t.Run("deadline", func(t *testing.T) {
		createPod(t, apiPod("api-deadline", func(p *v1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
		}))
		wantDeadlineExceeded(t, "api-deadline")
	})
	t.Run("lowered", func(t *testing.T) {
		createPod(t, apiPod("api-deadline-lowered", func(p *v1.Pod) {
			p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
		}))
		waitAPIPodRunning(t, h, "api-deadline-lowered")
		mustKubectl(t, "patch", "pod", "-n", "default", "api-deadline-lowered", "--type=merge",
			"-p", `{"spec":{"activeDeadlineSeconds":5}}`)
		wantDeadlineExceeded(t, "api-deadline-lowered")
	})
}
