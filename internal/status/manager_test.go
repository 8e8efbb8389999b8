package status

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heartlet/heartlet/internal/podspec"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestManager() (*Manager, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(t0)
	return NewManager(clk), clk
}

func namedPod(ns, name, uid string) *v1.Pod {
	p := testPod()
	p.Namespace, p.Name, p.UID = ns, name, types.UID(uid)
	return p
}

func runningStatus(startedAt time.Time) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		},
		ContainerStatuses: []v1.ContainerStatus{{
			Name:  "app",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}},
			Ready: true,
		}},
	}
}

func terminatedStatus(phase v1.PodPhase, code int32) v1.PodStatus {
	return v1.PodStatus{
		Phase: phase,
		ContainerStatuses: []v1.ContainerStatus{{
			Name:  "app",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}},
		}},
	}
}

func mustStatus(t *testing.T, m *Manager, uid types.UID) (v1.PodStatus, uint64) {
	t.Helper()
	st, v, ok := m.GetVersionedPodStatus(uid)
	if !ok {
		t.Fatalf("no status for %s", uid)
	}
	return st, v
}

func TestManagerTerminalPhaseNeverRegresses(t *testing.T) {
	tests := []struct {
		name     string
		policy   v1.RestartPolicy
		first    v1.PodStatus
		second   v1.PodStatus
		want     v1.PodPhase
		wantBump bool
	}{
		{
			name:   "Failed does not go back to Running",
			policy: v1.RestartPolicyAlways,
			first:  func() v1.PodStatus { s := terminatedStatus(v1.PodFailed, 1); s.Reason = "Evicted"; return s }(),
			second: runningStatus(t0),
			want:   v1.PodFailed,
			// The container statuses changed, so this is still an update.
			wantBump: true,
		},
		{
			name:   "Succeeded does not go back to Pending",
			policy: v1.RestartPolicyAlways,
			first:  terminatedStatus(v1.PodSucceeded, 0),
			second: func() v1.PodStatus { s := terminatedStatus(v1.PodPending, 0); return s }(),
			want:   v1.PodSucceeded,
		},
		{
			name:   "Succeeded does not become Failed",
			policy: v1.RestartPolicyAlways,
			first:  terminatedStatus(v1.PodSucceeded, 0),
			second: terminatedStatus(v1.PodFailed, 0),
			want:   v1.PodSucceeded,
		},
		{
			name:   "Never: a terminated container may not run again",
			policy: v1.RestartPolicyNever,
			first:  terminatedStatus(v1.PodRunning, 1),
			second: runningStatus(t0),
			want:   v1.PodRunning,
		},
		{
			name:     "OnFailure: a failed container may run again",
			policy:   v1.RestartPolicyOnFailure,
			first:    terminatedStatus(v1.PodRunning, 1),
			second:   runningStatus(t0),
			want:     v1.PodRunning,
			wantBump: true,
		},
		{
			name:     "Running may become Failed",
			policy:   v1.RestartPolicyAlways,
			first:    runningStatus(t0),
			second:   terminatedStatus(v1.PodFailed, 1),
			want:     v1.PodFailed,
			wantBump: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestManager()
			pod := testPod(withPolicy(tt.policy))
			m.SetPodStatus(pod, tt.first)
			st1, ver1 := mustStatus(t, m, pod.UID)
			m.SetPodStatus(pod, tt.second)
			st2, ver2 := mustStatus(t, m, pod.UID)
			if st2.Phase != tt.want {
				t.Errorf("phase = %s, want %s", st2.Phase, tt.want)
			}
			if podspec.IsTerminalPhase(st1.Phase) && st2.Reason != st1.Reason {
				t.Errorf("reason = %q, want %q kept", st2.Reason, st1.Reason)
			}
			if bumped := ver2 != ver1; bumped != tt.wantBump {
				t.Errorf("version %d -> %d, bumped = %v, want %v", ver1, ver2, bumped, tt.wantBump)
			}
		})
	}
}

func TestManagerVersionBumpsOnlyOnChange(t *testing.T) {
	m, clk := newTestManager()
	pod := testPod()
	changed, cancel := m.Subscribe()
	defer cancel()

	drain := func() bool {
		select {
		case <-changed:
			return true
		default:
			return false
		}
	}

	m.SetPodStatus(pod, runningStatus(t0))
	_, ver1 := mustStatus(t, m, pod.UID)
	if ver1 == 0 || !drain() {
		t.Fatalf("first set: version %d, want > 0 and a signal", ver1)
	}

	steps := []struct {
		name   string
		mutate func(*v1.PodStatus)
		bump   bool
	}{
		{"identical", func(*v1.PodStatus) {}, false},
		{"probe time only", func(s *v1.PodStatus) { s.Conditions[0].LastProbeTime = metav1.NewTime(clk.Now()) }, false},
		{"sub-second time noise", func(s *v1.PodStatus) {
			s.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(300 * time.Millisecond))
		}, false},
		{"later transition time for an unchanged condition", func(s *v1.PodStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(time.Hour))
		}, false},
		{"readiness change", func(s *v1.PodStatus) {
			s.Conditions[0].Status = v1.ConditionFalse
			s.ContainerStatuses[0].Ready = false
		}, true},
		{"pod IP change", func(s *v1.PodStatus) { s.PodIP = "10.88.0.9" }, true},
	}
	prev := ver1
	for _, st := range steps {
		clk.Step(time.Minute)
		s := runningStatus(t0)
		st.mutate(&s)
		m.SetPodStatus(pod, s)
		_, v := mustStatus(t, m, pod.UID)
		if bumped := v != prev; bumped != st.bump {
			t.Errorf("%s: version %d -> %d, bumped = %v, want %v", st.name, prev, v, bumped, st.bump)
		}
		if signalled := drain(); signalled != st.bump {
			t.Errorf("%s: signalled = %v, want %v", st.name, signalled, st.bump)
		}
		prev = v
	}
}

func TestManagerTimes(t *testing.T) {
	m, clk := newTestManager()
	pod := testPod()
	m.SetPodStatus(pod, runningStatus(t0))
	st, _ := mustStatus(t, m, pod.UID)
	if st.StartTime == nil || !st.StartTime.Time.Equal(t0) {
		t.Fatalf("startTime = %v, want %v", st.StartTime, t0)
	}
	if ltt := cond(t, st, v1.PodReady).LastTransitionTime.Time; !ltt.Equal(t0) {
		t.Fatalf("Ready lastTransitionTime = %v, want %v", ltt, t0)
	}

	clk.Step(time.Hour)
	later := runningStatus(t0)
	later.Conditions[0].Status = v1.ConditionFalse
	t1 := metav1.NewTime(clk.Now())
	later.StartTime = &t1
	m.SetPodStatus(pod, later)
	st, _ = mustStatus(t, m, pod.UID)
	if !st.StartTime.Time.Equal(t0) {
		t.Errorf("startTime = %v, want %v kept", st.StartTime, t0)
	}
	if ltt := cond(t, st, v1.PodReady).LastTransitionTime.Time; !ltt.Equal(clk.Now()) {
		t.Errorf("Ready lastTransitionTime = %v, want %v (status changed)", ltt, clk.Now())
	}
	if ltt := cond(t, st, v1.PodScheduled).LastTransitionTime.Time; !ltt.Equal(t0) {
		t.Errorf("PodScheduled lastTransitionTime = %v, want %v (unchanged)", ltt, t0)
	}
}

func TestManagerTruncatesTerminationMessages(t *testing.T) {
	m, _ := newTestManager()
	pod := testPod()
	s := terminatedStatus(v1.PodRunning, 1)
	s.ContainerStatuses[0].State.Terminated.Message = strings.Repeat("x", 20000)
	m.SetPodStatus(pod, s)
	st, _ := mustStatus(t, m, pod.UID)
	if n := len(st.ContainerStatuses[0].State.Terminated.Message); n != maxTerminationMessageBytes {
		t.Errorf("message length = %d, want %d", n, maxTerminationMessageBytes)
	}
}

func TestManagerPodsSortedDeepCopies(t *testing.T) {
	m, _ := newTestManager()
	for _, p := range []*v1.Pod{
		namedPod("kube-system", "b", "u1"),
		namedPod("default", "z", "u2"),
		namedPod("kube-system", "a", "u3"),
		namedPod("default", "a", "u4"),
	} {
		m.SetPodStatus(p, runningStatus(t0))
	}
	pods := m.Pods()
	var got []string
	for _, p := range pods {
		got = append(got, p.Namespace+"/"+p.Name)
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("%s/%s phase = %q, want status filled", p.Namespace, p.Name, p.Status.Phase)
		}
	}
	if want := "default/a,default/z,kube-system/a,kube-system/b"; strings.Join(got, ",") != want {
		t.Errorf("order = %v, want %s", got, want)
	}

	// Mutating what Pods and GetPodStatus return must not reach the store.
	pods[0].Status.Phase = v1.PodFailed
	pods[0].Status.ContainerStatuses[0].Ready = false
	pods[0].Spec.Containers[0].Image = "changed"
	st, _ := m.GetPodStatus("u4")
	st.Conditions[0].Status = v1.ConditionUnknown
	again := m.Pods()[0]
	if again.Status.Phase != v1.PodRunning || !again.Status.ContainerStatuses[0].Ready ||
		again.Spec.Containers[0].Image != "busybox:1.36" || again.Status.Conditions[0].Status != v1.ConditionTrue {
		t.Errorf("store was modified through a returned copy: %+v", again)
	}
}

func TestManagerUIDs(t *testing.T) {
	m, _ := newTestManager()
	if got := m.UIDs(); len(got) != 0 {
		t.Fatalf("UIDs of an empty manager = %v", got)
	}
	for _, p := range []*v1.Pod{namedPod("a", "x", "u1"), namedPod("b", "y", "u2"), namedPod("a", "z", "u3")} {
		m.SetPodStatus(p, runningStatus(t0))
	}
	m.RemovePod("u2")
	got := m.UIDs()
	slices.Sort(got)
	if want := []types.UID{"u1", "u3"}; !slices.Equal(got, want) {
		t.Errorf("UIDs = %v, want %v", got, want)
	}
}

func TestManagerStoresCopies(t *testing.T) {
	m, _ := newTestManager()
	pod := testPod()
	s := runningStatus(t0)
	m.SetPodStatus(pod, s)
	s.ContainerStatuses[0].Ready = false
	pod.Labels = map[string]string{"changed": "yes"}
	got := m.Pods()[0]
	if !got.Status.ContainerStatuses[0].Ready || got.Labels["changed"] != "" {
		t.Error("manager kept references to the caller's pod or status")
	}
}

func TestManagerRefreshesPodWithoutStatusChange(t *testing.T) {
	m, _ := newTestManager()
	pod := testPod()
	m.SetPodStatus(pod, runningStatus(t0))
	_, ver1 := mustStatus(t, m, pod.UID)
	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"tier": "web"}
	m.SetPodStatus(updated, runningStatus(t0))
	_, ver2 := mustStatus(t, m, pod.UID)
	if ver1 != ver2 {
		t.Errorf("version %d -> %d for a pod-only change", ver1, ver2)
	}
	if got := m.Pods()[0].Labels["tier"]; got != "web" {
		t.Errorf("label = %q, want the refreshed pod", got)
	}
}

func TestManagerRemovePod(t *testing.T) {
	m, _ := newTestManager()
	pod := testPod()
	m.SetPodStatus(pod, runningStatus(t0))
	_, before := mustStatus(t, m, pod.UID)
	changed, cancel := m.Subscribe()
	defer cancel()

	m.RemovePod(pod.UID)
	if _, ok := m.GetPodStatus(pod.UID); ok {
		t.Fatal("status still present after RemovePod")
	}
	if len(m.Pods()) != 0 || len(m.UIDs()) != 0 {
		t.Fatal("Pods or UIDs still list the removed pod")
	}
	select {
	case <-changed:
	default:
		t.Error("no signal on removal")
	}
	m.RemovePod(pod.UID) // unknown: no-op, no signal
	select {
	case <-changed:
		t.Error("signal on removing an unknown pod")
	default:
	}

	m.SetPodStatus(pod, runningStatus(t0))
	if _, after := mustStatus(t, m, pod.UID); after <= before {
		t.Errorf("version after re-add = %d, want > %d", after, before)
	}
}

func TestManagerSubscribeCancel(t *testing.T) {
	m, _ := newTestManager()
	changed, cancel := m.Subscribe()
	cancel()
	cancel() // idempotent
	m.SetPodStatus(testPod(), runningStatus(t0))
	select {
	case <-changed:
		t.Error("signal after cancel")
	default:
	}
}

func TestManagerConcurrent(t *testing.T) {
	m, _ := newTestManager()
	changed, cancel := m.Subscribe()
	defer cancel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := namedPod("default", fmt.Sprintf("p%d", i), fmt.Sprintf("u%d", i))
			for j := range 50 {
				s := runningStatus(t0)
				s.PodIP = fmt.Sprintf("10.0.%d.%d", i, j)
				m.SetPodStatus(pod, s)
				_, _ = m.GetPodStatus(pod.UID)
				_ = m.Pods()
			}
		}()
	}
	wg.Wait()
	if n := len(m.Pods()); n != 8 {
		t.Errorf("pods = %d, want 8", n)
	}
	select {
	case <-changed:
	default:
		t.Error("no change signal")
	}
}
