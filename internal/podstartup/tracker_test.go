package podstartup

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// histogram is the sample count and sum of a histogram.
func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

type observed struct{ start, sli, total [2]float64 }

func snapshot(t *testing.T) observed {
	var o observed
	c, s := histogram(t, metrics.PodStartDuration)
	o.start = [2]float64{float64(c), s}
	c, s = histogram(t, metrics.PodStartSLIDuration)
	o.sli = [2]float64{float64(c), s}
	c, s = histogram(t, metrics.PodStartTotalDuration)
	o.total = [2]float64{float64(c), s}
	return o
}

func (o observed) minus(p observed) observed {
	sub := func(a, b [2]float64) [2]float64 { return [2]float64{a[0] - b[0], a[1] - b[1]} }
	return observed{sub(o.start, p.start), sub(o.sli, p.sli), sub(o.total, p.total)}
}

func pod(uid string, created time.Time, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

func running(at time.Time) v1.ContainerStatus {
	return v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}
}

func waitingStatus() v1.ContainerStatus {
	return v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

type fakeSink struct{ got []v1.PodStatus }

func (f *fakeSink) SetPodStatus(_ *v1.Pod, st v1.PodStatus)     { f.got = append(f.got, st) }
func (f *fakeSink) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

func TestTracker(t *testing.T) {
	tests := []struct {
		name string
		run  func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink)
		want observed
	}{{
		name: "image pull excluded from the SLI",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("a", epoch.Add(-2*time.Second), "c1", "c2")
			tr.Seen(p)
			tr.PullStarted(p.UID)
			clk.Step(time.Second)
			tr.PullStarted(p.UID) // overlapping pull counts once
			clk.Step(2 * time.Second)
			tr.PullFinished(p.UID)
			clk.Step(time.Second)
			tr.PullFinished(p.UID)
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{waitingStatus(), waitingStatus()}})
			clk.Step(time.Second)
			// Running with one of two containers started.
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(clk.Now()), waitingStatus()}})
			clk.Step(time.Second)
			st := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(epoch.Add(5 * time.Second)), running(clk.Now())}}
			sink.SetPodStatus(p, st)
			clk.Step(time.Minute)
			sink.SetPodStatus(p, st) // observed once
		},
		// Seen at 0, Running at 5 s; created at -2 s, all started at
		// 6 s: total 8 s, of which 4 s pulling.
		want: observed{start: [2]float64{1, 5}, sli: [2]float64{1, 4}, total: [2]float64{1, 8}},
	}, {
		name: "init containers excluded from the SLI; no creation time: first seen",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("b", time.Time{}, "c")
			p.Spec.InitContainers = []v1.Container{{Name: "init"}}
			tr.Seen(p)
			clk.Step(10 * time.Second)
			sink.SetPodStatus(p, v1.PodStatus{
				Phase: v1.PodRunning,
				InitContainerStatuses: []v1.ContainerStatus{{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					StartedAt: metav1.NewTime(epoch.Add(time.Second)), FinishedAt: metav1.NewTime(epoch.Add(4 * time.Second)),
				}}}},
				ContainerStatuses: []v1.ContainerStatus{running(clk.Now())},
			})
		},
		want: observed{start: [2]float64{1, 10}, sli: [2]float64{1, 7}, total: [2]float64{1, 10}},
	}, {
		name: "stateful pod left out of the SLI",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("c", epoch, "c")
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}}}
			tr.Seen(p)
			clk.Step(3 * time.Second)
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(clk.Now())}})
		},
		want: observed{start: [2]float64{1, 3}, total: [2]float64{1, 3}},
	}, {
		name: "adopted pod whose containers started before it was seen",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("d", epoch.Add(-time.Hour), "c")
			tr.Seen(p)
			clk.Step(time.Second)
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(epoch.Add(-time.Minute))}})
		},
	}, {
		name: "pod started by an earlier kubelet",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("e", epoch.Add(-time.Hour), "c")
			p.Status.StartTime = &metav1.Time{Time: epoch.Add(-time.Hour)}
			tr.Seen(p)
			clk.Step(time.Second)
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(clk.Now())}})
		},
	}, {
		name: "finished before all containers ran; forgotten pod",
		run: func(clk *testingclock.FakeClock, tr *Tracker, sink StatusSink) {
			p := pod("f", epoch, "c")
			tr.Seen(p)
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodFailed})
			sink.SetPodStatus(p, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(clk.Now())}})
			q := pod("g", epoch, "c")
			tr.Seen(q)
			tr.Forget(q.UID)
			sink.SetPodStatus(q, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running(clk.Now())}})
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			tr := New(clk)
			next := &fakeSink{}
			before := snapshot(t)
			tt.run(clk, tr, tr.Sink(next))
			if got := snapshot(t).minus(before); got != tt.want {
				t.Errorf("observed (count, sum) start %v sli %v total %v; want start %v sli %v total %v",
					got.start, got.sli, got.total, tt.want.start, tt.want.sli, tt.want.total)
			}
			if len(next.got) == 0 {
				t.Error("the statuses did not reach the next sink")
			}
		})
	}
	if n := testutil.CollectAndCount(metrics.PodStartDuration); n != 1 {
		t.Errorf("pod_start_duration_seconds has %d series, want 1", n)
	}
}
