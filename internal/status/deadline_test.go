package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/runtime"
)

func withDeadline(secs int64) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(secs) }
}

func TestActiveDeadline(t *testing.T) {
	start := metav1.NewTime(t0)
	tests := []struct {
		name         string
		pod          *v1.Pod
		start        *metav1.Time
		now          time.Time
		wantExceeded bool
		wantLeft     time.Duration
	}{
		{name: "no deadline", pod: testPod(), start: &start, now: t0.Add(time.Hour)},
		{name: "no start time", pod: testPod(withDeadline(5)), now: t0.Add(time.Hour)},
		{name: "zero start time", pod: testPod(withDeadline(5)), start: &metav1.Time{}, now: t0.Add(time.Hour)},
		{name: "before", pod: testPod(withDeadline(5)), start: &start, now: t0.Add(2 * time.Second), wantLeft: 3 * time.Second},
		{name: "just before", pod: testPod(withDeadline(5)), start: &start, now: t0.Add(5*time.Second - time.Nanosecond), wantLeft: time.Nanosecond},
		{name: "at", pod: testPod(withDeadline(5)), start: &start, now: t0.Add(5 * time.Second), wantExceeded: true},
		{name: "after", pod: testPod(withDeadline(5)), start: &start, now: t0.Add(time.Minute), wantExceeded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exceeded, left := ActiveDeadline(tt.pod, tt.start, tt.now)
			if exceeded != tt.wantExceeded || left != tt.wantLeft {
				t.Errorf("ActiveDeadline() = %v, %v; want %v, %v", exceeded, left, tt.wantExceeded, tt.wantLeft)
			}
		})
	}
}

// Compute reports a pod past its deadline as Failed with upstream's reason
// and message, from the start time it keeps.
func TestComputeActiveDeadline(t *testing.T) {
	rs := rstatus([]*runtime.SandboxStatus{sandbox("10.88.0.4")}, running("app", "c1", 0))
	startedAt := metav1.NewTime(t0)
	tests := []struct {
		name        string
		mods        []func(*v1.Pod)
		old         *v1.PodStatus
		now         time.Time
		terminating bool
		wantPhase   v1.PodPhase
		wantReason  string
	}{
		{name: "within the deadline", mods: []func(*v1.Pod){withDeadline(60)}, old: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &startedAt}, now: t0.Add(59 * time.Second), wantPhase: v1.PodRunning},
		{name: "past the deadline", mods: []func(*v1.Pod){withDeadline(60)}, old: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &startedAt}, now: t0.Add(60 * time.Second), wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "past the deadline while terminating", mods: []func(*v1.Pod){withDeadline(60)}, old: &v1.PodStatus{Phase: v1.PodFailed, Reason: ReasonDeadlineExceeded, Message: MessageDeadlineExceeded, StartTime: &startedAt}, now: t0.Add(time.Hour), terminating: true, wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "static pod past the deadline", mods: []func(*v1.Pod){withDeadline(60), static}, old: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &startedAt}, now: t0.Add(time.Hour), wantPhase: v1.PodFailed, wantReason: ReasonDeadlineExceeded},
		{name: "first status starts the clock", mods: []func(*v1.Pod){withDeadline(1)}, now: t0.Add(time.Hour), wantPhase: v1.PodRunning},
		{name: "finished before the deadline", mods: []func(*v1.Pod){withDeadline(60)}, old: &v1.PodStatus{Phase: v1.PodSucceeded, StartTime: &startedAt}, now: t0.Add(time.Hour), wantPhase: v1.PodSucceeded},
		{name: "no deadline", old: &v1.PodStatus{Phase: v1.PodRunning, StartTime: &startedAt}, now: t0.Add(1000 * time.Hour), wantPhase: v1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(tt.mods...)
			s := Compute(pod, rs, Inputs{Now: tt.now, Old: tt.old, Terminating: tt.terminating})
			if s.Phase != tt.wantPhase || s.Reason != tt.wantReason {
				t.Errorf("phase/reason = %s/%q, want %s/%q", s.Phase, s.Reason, tt.wantPhase, tt.wantReason)
			}
			if tt.wantReason == ReasonDeadlineExceeded && s.Message != MessageDeadlineExceeded {
				t.Errorf("message = %q, want %q", s.Message, MessageDeadlineExceeded)
			}
			if s.Phase == v1.PodFailed {
				wantCond(t, s, v1.PodReady, v1.ConditionFalse, "PodFailed")
			}
		})
	}
}
