package podsync

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/podworker"
)

// TestSyncPodPullsThroughPuller checks that pulls go through the node's
// puller: a pull its registry rate limit refuses is ErrImagePull with
// upstream's "pull QPS exceeded", goes to the image pull backoff, and
// never reaches the runtime; once the backoff and the bucket allow, the
// pull happens.
func TestSyncPodPullsThroughPuller(t *testing.T) {
	h := newHarness(t)
	h.syncer.opts.Puller = images.NewPuller(h.rt, images.Options{Serialize: true, QPS: 1, Burst: 1, Clock: h.clock})

	first := testPod(v1.RestartPolicyAlways, nil, "c")
	first.Spec.Containers[0].Image = "one:1"
	first.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, first); err != nil {
		t.Fatalf("first pod: %v", err)
	}

	second := first.DeepCopy()
	second.Name, second.UID = "q", types.UID("uid2")
	second.Spec.Containers[0].Image = "two:1"
	h.fake.ResetCalls()
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, second); err == nil {
		t.Fatal("a pull over the registry rate limit succeeded")
	}
	if slices.Contains(h.fake.Calls(), "PullImage") {
		t.Error("a pull over the registry rate limit reached the runtime")
	}
	st, _ := h.status.GetPodStatus(second.UID)
	w := findStatus(st, "c").State.Waiting
	if w == nil || w.Reason != ReasonErrImagePull || !strings.Contains(w.Message, "pull QPS exceeded") {
		t.Fatalf("state = %+v, want ErrImagePull with \"pull QPS exceeded\"", findStatus(st, "c").State)
	}

	// The token is back after a second, but the pull backoff (10 s) holds.
	h.clock.Step(time.Second)
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, second); err == nil {
		t.Fatal("sync during the pull backoff succeeded")
	}
	st, _ = h.status.GetPodStatus(second.UID)
	if w := findStatus(st, "c").State.Waiting; w == nil || w.Reason != ReasonImagePullBackOff {
		t.Fatalf("state = %+v, want ImagePullBackOff", findStatus(st, "c").State)
	}

	h.clock.Step(10 * time.Second)
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, second); err != nil {
		t.Fatalf("sync after the backoff: %v", err)
	}
	if !slices.Contains(h.fake.Calls(), "PullImage") {
		t.Error("the image was not pulled after the backoff")
	}
}
