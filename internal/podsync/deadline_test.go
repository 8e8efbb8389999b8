package podsync

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/status"
)

func deadlinePod(secs int64) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, nil, "app")
	p.Spec.Containers[0].Image = "busybox:1.35"
	p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	p.Spec.ActiveDeadlineSeconds = ptr.To(secs)
	return p
}

// A running pod asks to be woken at its deadline, and once past it the
// sync reports it Failed/DeadlineExceeded and terminal, with the clock
// alone moving.
func TestSyncPodActiveDeadline(t *testing.T) {
	h := newHarness(t)
	pod := deadlinePod(5)

	res := h.sync(pod)
	h.running("app")
	if res.Terminal {
		t.Fatal("first sync reported the pod terminal")
	}
	if res.RequeueAfter != 5*time.Second {
		t.Errorf("RequeueAfter = %v, want the 5s left until the deadline", res.RequeueAfter)
	}

	h.clock.Step(3 * time.Second)
	if res := h.sync(pod); res.Terminal || res.RequeueAfter != 2*time.Second {
		t.Errorf("sync 3s in = %+v, want not terminal, RequeueAfter 2s", res)
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodRunning {
		t.Errorf("phase before the deadline = %s, want Running", st.Phase)
	}

	h.clock.Step(2 * time.Second)
	res = h.sync(pod)
	if !res.Terminal {
		t.Fatalf("sync at the deadline = %+v, want terminal", res)
	}
	st, _ = h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != status.ReasonDeadlineExceeded || st.Message != status.MessageDeadlineExceeded {
		t.Errorf("status = %s/%q/%q, want Failed/%s/%q", st.Phase, st.Reason, st.Message, status.ReasonDeadlineExceeded, status.MessageDeadlineExceeded)
	}
	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 1); err != nil {
		t.Fatalf("SyncTerminatingPod: %v", err)
	}
	st, _ = h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != status.ReasonDeadlineExceeded {
		t.Errorf("status after stopping = %s/%q, want Failed/%s", st.Phase, st.Reason, status.ReasonDeadlineExceeded)
	}
}

// Lowering the deadline of a running pod takes effect at its next sync.
func TestSyncPodActiveDeadlineLowered(t *testing.T) {
	h := newHarness(t)
	pod := deadlinePod(600)
	if res := h.sync(pod); res.RequeueAfter != 600*time.Second {
		t.Errorf("RequeueAfter = %v, want 600s", res.RequeueAfter)
	}
	h.running("app")
	h.clock.Step(10 * time.Second)
	if res := h.sync(pod); res.Terminal {
		t.Fatal("pod terminal 10s into a 600s deadline")
	}
	lowered := pod.DeepCopy()
	lowered.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
	if res := h.sync(lowered); !res.Terminal {
		t.Fatalf("sync with the deadline lowered below the time active = %+v, want terminal", res)
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != status.ReasonDeadlineExceeded {
		t.Errorf("status = %s/%q, want Failed/%s", st.Phase, st.Reason, status.ReasonDeadlineExceeded)
	}
}
