package pleg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
)

const waitTimeout = 10 * time.Second

// fakeLister returns the pods (or error) it was last given and reports
// every call with the clock's time on calls.
type fakeLister struct {
	clk   *testclock.FakeClock
	calls chan time.Time

	mu    sync.Mutex
	pods  []*runtime.PodStatus
	err   error
	block bool          // wait for the context to be done
	step  time.Duration // advance the clock during the call
}

func newFakeLister(clk *testclock.FakeClock) *fakeLister {
	return &fakeLister{clk: clk, calls: make(chan time.Time, 100)}
}

func (f *fakeLister) set(pods []*runtime.PodStatus, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.err = pods, err
}

func (f *fakeLister) ListPods(ctx context.Context) ([]*runtime.PodStatus, error) {
	f.calls <- f.clk.Now()
	f.mu.Lock()
	pods, err, block, step := f.pods, f.err, f.block, f.step
	f.mu.Unlock()
	if step > 0 {
		f.clk.Step(step)
	}
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return pods, err
}

func newTestPLEG(t *testing.T) (*PLEG, *fakeLister, *testclock.FakeClock) {
	t.Helper()
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	l := newFakeLister(clk)
	return New(l, time.Second, clk), l, clk
}

// drain returns every event queued on p.
func drain(p *PLEG) []Event {
	var out []Event
	for {
		select {
		case e := <-p.Events():
			out = append(out, e)
		default:
			return out
		}
	}
}

// pod builds a PodStatus; sandboxes are "id=state" with state ready or
// notready, containers "id=state" with a runtime.ContainerState.
func pod(uid string, sandboxes []string, containers ...string) *runtime.PodStatus {
	s := &runtime.PodStatus{UID: types.UID(uid), Name: "pod-" + uid, Namespace: "default"}
	for _, sb := range sandboxes {
		id, state, _ := strings.Cut(sb, "=")
		s.Sandboxes = append(s.Sandboxes, &runtime.SandboxStatus{ID: id, State: runtime.SandboxState(state)})
	}
	for _, c := range containers {
		id, state, _ := strings.Cut(c, "=")
		s.Containers = append(s.Containers, &runtime.ContainerStatus{ID: id, Name: "c-" + id, State: runtime.ContainerState(state)})
	}
	return s
}

func sb(s ...string) []string { return s }

func ev(uid string, t EventType, id string) Event {
	return Event{UID: types.UID(uid), Type: t, ContainerID: id}
}

func TestRelistEvents(t *testing.T) {
	tests := []struct {
		name string
		prev []*runtime.PodStatus // nil: this is the first relist
		next []*runtime.PodStatus
		want []Event
	}{
		{
			name: "first relist reports everything",
			next: []*runtime.PodStatus{
				pod("b", sb("s2=ready"), "c3=running"),
				pod("a", sb("s1=ready"), "c1=running", "c2=exited", "c0=created", "c4=unknown"),
			},
			want: []Event{
				ev("a", SandboxChanged, "s1"),
				ev("a", ContainerChanged, "c0"),
				ev("a", ContainerStarted, "c1"),
				ev("a", ContainerDied, "c2"),
				ev("a", ContainerChanged, "c4"),
				ev("b", SandboxChanged, "s2"),
				ev("b", ContainerStarted, "c3"),
			},
		},
		{
			name: "no change",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
		},
		{
			name: "created to running",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=created")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			want: []Event{ev("a", ContainerStarted, "c1")},
		},
		{
			name: "running to exited",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")},
			want: []Event{ev("a", ContainerDied, "c1")},
		},
		{
			name: "running to gone",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"))},
			want: []Event{ev("a", ContainerDied, "c1"), ev("a", ContainerRemoved, "c1")},
		},
		{
			name: "unknown to gone",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=unknown")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"))},
			want: []Event{ev("a", ContainerDied, "c1"), ev("a", ContainerRemoved, "c1")},
		},
		{
			name: "exited to gone",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"))},
			want: []Event{ev("a", ContainerRemoved, "c1")},
		},
		{
			name: "created to gone",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=created")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"))},
			want: []Event{ev("a", ContainerRemoved, "c1")},
		},
		{
			name: "running to unknown",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=unknown")},
			want: []Event{ev("a", ContainerChanged, "c1")},
		},
		{
			name: "new container already exited",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running", "c2=exited")},
			want: []Event{ev("a", ContainerDied, "c2")},
		},
		{
			name: "restarted container",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c2=running", "c1=exited")},
			want: []Event{ev("a", ContainerStarted, "c2")},
		},
		{
			name: "sandbox not ready",
			prev: []*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")},
			next: []*runtime.PodStatus{pod("a", sb("s1=notready"), "c1=exited")},
			want: []Event{ev("a", SandboxChanged, "s1")},
		},
		{
			name: "new sandbox",
			prev: []*runtime.PodStatus{pod("a", sb("s1=notready"))},
			next: []*runtime.PodStatus{pod("a", sb("s2=ready", "s1=notready"))},
			want: []Event{ev("a", SandboxChanged, "s2")},
		},
		{
			name: "pod gone",
			prev: []*runtime.PodStatus{
				pod("a", sb("s1=notready"), "c1=exited", "c2=running"),
				pod("b", sb("s2=ready")),
			},
			next: []*runtime.PodStatus{pod("b", sb("s2=ready"))},
			want: []Event{
				ev("a", SandboxChanged, "s1"),
				ev("a", ContainerRemoved, "c1"),
				ev("a", ContainerDied, "c2"),
				ev("a", ContainerRemoved, "c2"),
			},
		},
		{
			name: "new pod",
			prev: []*runtime.PodStatus{},
			next: []*runtime.PodStatus{pod("a", sb("s1=ready"))},
			want: []Event{ev("a", SandboxChanged, "s1")},
		},
		{
			name: "pod without UID ignored",
			next: []*runtime.PodStatus{pod("", sb("s1=ready"), "c1=running"), nil},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, l, _ := newTestPLEG(t)
			ctx := context.Background()
			if tc.prev != nil {
				l.set(tc.prev, nil)
				p.relist(ctx)
				drain(p)
			}
			l.set(tc.next, nil)
			p.relist(ctx)
			got := drain(p)
			if !slices.Equal(got, tc.want) {
				t.Errorf("events =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestFailedRelistKeepsState(t *testing.T) {
	p, l, _ := newTestPLEG(t)
	ctx := context.Background()
	l.set([]*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")}, nil)
	p.relist(ctx)
	drain(p)

	l.set(nil, errors.New("runtime unavailable"))
	p.relist(ctx)
	if got := drain(p); len(got) != 0 {
		t.Errorf("failed relist emitted %v", got)
	}
	if got, _ := p.Relisted(); len(got) != 1 || got[0].UID != "a" {
		t.Errorf("Relisted() after a failed relist = %v, want the previous result", got)
	}

	// The next successful relist compares with the last successful one.
	l.set([]*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")}, nil)
	p.relist(ctx)
	if got, want := drain(p), []Event{ev("a", ContainerDied, "c1")}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// TestRelisted: what runs is known only after a successful relist, and
// not while the latest relist failed (then the pods are the last known).
func TestRelisted(t *testing.T) {
	p, l, _ := newTestPLEG(t)
	ctx := context.Background()
	if pods, ok := p.Relisted(); ok || len(pods) != 0 {
		t.Fatalf("Relisted before any relist = %v, %v; want nothing, false", pods, ok)
	}
	l.set(nil, errors.New("runtime unavailable"))
	p.relist(ctx)
	if _, ok := p.Relisted(); ok {
		t.Fatal("Relisted after only a failed relist = true")
	}
	l.set([]*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")}, nil)
	p.relist(ctx)
	if pods, ok := p.Relisted(); !ok || len(pods) != 1 || pods[0].UID != "a" {
		t.Fatalf("Relisted after a successful relist = %v, %v; want [a], true", pods, ok)
	}
	l.set(nil, errors.New("runtime unavailable"))
	p.relist(ctx)
	if pods, ok := p.Relisted(); ok || len(pods) != 1 {
		t.Fatalf("Relisted after a failed relist = %v, %v; want the last pods, false", pods, ok)
	}
	l.set(nil, nil)
	p.relist(ctx)
	if pods, ok := p.Relisted(); !ok || len(pods) != 0 {
		t.Fatalf("Relisted after recovering = %v, %v; want nothing, true", pods, ok)
	}
}

func TestFullChannelCoalescesPerPod(t *testing.T) {
	p, l, _ := newTestPLEG(t)
	var containers []string
	for i := range eventBuffer + 10 {
		containers = append(containers, fmt.Sprintf("c%04d=running", i))
	}
	l.set([]*runtime.PodStatus{pod("a", nil, containers...), pod("b", nil, "x=running")}, nil)
	p.relist(context.Background()) // must not block
	if n := len(p.Events()); n != eventBuffer {
		t.Errorf("queued events = %d, want %d", n, eventBuffer)
	}
	got := drain(p)
	// The reader caught up: the next relist delivers the latest event of
	// each pod that had to wait, even though nothing changed since.
	p.relist(context.Background())
	late := drain(p)
	want := []Event{ev("a", ContainerStarted, fmt.Sprintf("c%04d", eventBuffer+9)), ev("b", ContainerStarted, "x")}
	if !slices.Equal(late, want) {
		t.Errorf("events after the next relist = %v, want the latest of each waiting pod %v", late, want)
	}
	if len(got)+len(late) != eventBuffer+2 {
		t.Errorf("%d events in all, want %d", len(got)+len(late), eventBuffer+2)
	}
}

func histogram(t *testing.T, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatalf("read histogram: %v", err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

func TestMetrics(t *testing.T) {
	p, l, clk := newTestPLEG(t)
	ctx := context.Background()
	durCount, durSum := histogram(t, metrics.PLEGRelistDuration)
	intCount, intSum := histogram(t, metrics.PLEGRelistInterval)

	l.mu.Lock()
	l.step = 250 * time.Millisecond
	l.mu.Unlock()
	l.set([]*runtime.PodStatus{
		pod("a", sb("s1=ready"), "c1=running", "c2=running", "c3=exited"),
		pod("b", sb("s2=notready"), "c4=created", "c5=weird"),
		pod("c", sb("s4=ready", "s3=notready")),
	}, nil)
	p.relist(ctx)

	check := func(wantPods float64, want map[string]float64, wantSeries int) {
		t.Helper()
		if got := testutil.ToFloat64(metrics.RunningPods); got != wantPods {
			t.Errorf("running_pods = %v, want %v", got, wantPods)
		}
		if n := testutil.CollectAndCount(metrics.RunningContainers); n != wantSeries {
			t.Errorf("running_containers has %d series, want %d", n, wantSeries)
		}
		for state, v := range want {
			if got := testutil.ToFloat64(metrics.RunningContainers.WithLabelValues(state)); got != v {
				t.Errorf("running_containers{container_state=%q} = %v, want %v", state, got, v)
			}
		}
	}
	check(2, map[string]float64{"running": 2, "exited": 1, "created": 1, "unknown": 0, "weird": 1}, 5)

	clk.Step(time.Second)
	l.set([]*runtime.PodStatus{pod("b", sb("s2=notready"), "c4=exited")}, nil)
	p.relist(ctx)
	check(0, map[string]float64{"running": 0, "exited": 1, "created": 0, "unknown": 0}, 4)

	n, sum := histogram(t, metrics.PLEGRelistDuration)
	if n-durCount != 2 || sum-durSum != 0.5 {
		t.Errorf("relist duration grew by %d observations, %v s; want 2, 0.5 s", n-durCount, sum-durSum)
	}
	n, sum = histogram(t, metrics.PLEGRelistInterval)
	if n-intCount != 1 || sum-intSum != 1.25 {
		t.Errorf("relist interval grew by %d observations, %v s; want 1, 1.25 s", n-intCount, sum-intSum)
	}
}

func TestHealthy(t *testing.T) {
	p, l, clk := newTestPLEG(t)
	ctx := context.Background()
	if err := p.Healthy(); err == nil {
		t.Errorf("Healthy() before any relist = nil, want an error")
	}
	p.relist(ctx)
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy() after a relist = %v", err)
	}
	clk.Step(RelistThreshold)
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy() at the threshold = %v", err)
	}
	l.set(nil, errors.New("runtime unavailable"))
	p.relist(ctx)
	clk.Step(time.Second)
	err := p.Healthy()
	if err == nil || !strings.Contains(err.Error(), "3m1s") {
		t.Errorf("Healthy() 3m1s after the last success = %v, want an error naming 3m1s", err)
	}
	l.set(nil, nil)
	p.relist(ctx)
	if err := p.Healthy(); err != nil {
		t.Errorf("Healthy() after a new successful relist = %v", err)
	}
}

// RuntimeHealthy reports a runtime that fails relists, or does not answer
// them, once no relist succeeded for RuntimeThreshold, and passes again
// with the next success.
func TestRuntimeHealthy(t *testing.T) {
	tests := []struct {
		name    string
		err     error         // what relists after the first return
		advance time.Duration // time since the last successful relist
		wantErr string        // "" for healthy
	}{
		{name: "recent success", advance: RuntimeThreshold},
		{name: "failing within the threshold", err: errors.New("connection refused"), advance: RuntimeThreshold},
		{name: "failing past the threshold", err: errors.New("connection refused"), advance: RuntimeThreshold + time.Second,
			wantErr: "container runtime unreachable: last successful relist was 11s ago, threshold is 10s: connection refused"},
		{name: "no relist past the threshold", advance: RuntimeThreshold + time.Second,
			wantErr: "container runtime unreachable: last successful relist was 11s ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, l, clk := newTestPLEG(t)
			ctx := context.Background()
			p.relist(ctx)
			clk.Step(tt.advance)
			if tt.err != nil {
				l.set(nil, tt.err)
				p.relist(ctx)
			}
			err := p.RuntimeHealthy()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("RuntimeHealthy() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("RuntimeHealthy() = %v, want an error starting %q", err, tt.wantErr)
			}
			// The PLEG check tolerates this much.
			if err := p.Healthy(); err != nil {
				t.Errorf("Healthy() = %v, want nil", err)
			}
			l.set(nil, nil)
			p.relist(ctx)
			if err := p.RuntimeHealthy(); err != nil {
				t.Errorf("RuntimeHealthy() after a successful relist = %v", err)
			}
		})
	}
}

func TestRuntimeHealthyBeforeFirstRelist(t *testing.T) {
	p, l, _ := newTestPLEG(t)
	if err := p.RuntimeHealthy(); err == nil {
		t.Errorf("RuntimeHealthy() before any relist = nil, want an error")
	}
	l.set(nil, errors.New("connection refused"))
	p.relist(context.Background())
	if err := p.RuntimeHealthy(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("RuntimeHealthy() after a failed first relist = %v, want an error naming the cause", err)
	}
}

// runPLEG runs p until the test ends and returns a channel that receives
// after every relist once the next one is scheduled.
func runPLEG(t *testing.T, p *PLEG) (scheduled chan struct{}, stop func()) {
	t.Helper()
	scheduled = make(chan struct{}, 100)
	WithAfterRelist(func() { scheduled <- struct{}{} })(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run() = %v, want nil", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return after its context was cancelled")
		}
	}
	t.Cleanup(stop)
	return scheduled, stop
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %s within %v", what, waitTimeout)
	}
	var zero T
	return zero
}

func TestRunRelistsEveryPeriod(t *testing.T) {
	p, l, clk := newTestPLEG(t)
	l.set([]*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=running")}, nil)
	scheduled, stop := runPLEG(t, p)

	first := receive(t, l.calls, "first relist")
	receive(t, scheduled, "schedule after the first relist")
	if got := receive(t, p.Events(), "event"); got != ev("a", SandboxChanged, "s1") {
		t.Errorf("first event = %v, want SandboxChanged of s1", got)
	}
	if got := receive(t, p.Events(), "event"); got != ev("a", ContainerStarted, "c1") {
		t.Errorf("second event = %v, want ContainerStarted of c1", got)
	}

	l.set([]*runtime.PodStatus{pod("a", sb("s1=ready"), "c1=exited")}, nil)
	clk.Step(time.Second - time.Millisecond)
	clk.Step(time.Millisecond)
	second := receive(t, l.calls, "second relist")
	if d := second.Sub(first); d != time.Second {
		t.Errorf("second relist %v after the first, want 1s", d)
	}
	receive(t, scheduled, "schedule after the second relist")
	if got := receive(t, p.Events(), "event"); got != ev("a", ContainerDied, "c1") {
		t.Errorf("event = %v, want ContainerDied of c1", got)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Errorf("second Run() = nil, want an error")
	}
	stop()
	select {
	case c := <-l.calls:
		t.Errorf("relist at %v after Run returned", c)
	default:
	}
}

func TestHealthyWithStalledLister(t *testing.T) {
	p, l, clk := newTestPLEG(t)
	scheduled, _ := runPLEG(t, p)
	receive(t, l.calls, "first relist")
	receive(t, scheduled, "schedule after the first relist")
	if err := p.Healthy(); err != nil {
		t.Fatalf("Healthy() after a relist = %v", err)
	}

	l.mu.Lock()
	l.block = true
	l.mu.Unlock()
	clk.Step(time.Second)
	receive(t, l.calls, "stalled relist")
	clk.Step(RelistThreshold)
	err := p.Healthy()
	if err == nil || !strings.Contains(err.Error(), "3m1s") {
		t.Errorf("Healthy() with a stalled lister = %v, want an error naming 3m1s", err)
	}
}

// kubelet_pleg_last_seen_seconds is the start of the last successful
// relist; a failed one leaves it.
func TestLastSeenMetric(t *testing.T) {
	p, l, clk := newTestPLEG(t)
	ctx := context.Background()
	l.set(nil, nil)
	p.relist(ctx)
	first := clk.Now().Unix()
	if got := testutil.ToFloat64(metrics.PLEGLastSeen); got != float64(first) {
		t.Errorf("pleg_last_seen_seconds = %v, want %d", got, first)
	}
	clk.Step(time.Minute)
	l.set(nil, errors.New("runtime unavailable"))
	p.relist(ctx)
	if got := testutil.ToFloat64(metrics.PLEGLastSeen); got != float64(first) {
		t.Errorf("pleg_last_seen_seconds after a failed relist = %v, want %d", got, first)
	}
	clk.Step(time.Minute)
	l.set(nil, nil)
	p.relist(ctx)
	if got, want := testutil.ToFloat64(metrics.PLEGLastSeen), float64(clk.Now().Unix()); got != want {
		t.Errorf("pleg_last_seen_seconds = %v, want %v", got, want)
	}
}

// BenchmarkDiffUnchanged is one relist's diff on a node of 100 pods of
// which none changed, as nearly every relist is.
func BenchmarkDiffUnchanged(b *testing.B) {
	prev, next := map[types.UID]*record{}, map[types.UID]*record{}
	for i := range 100 {
		uid := types.UID(fmt.Sprintf("pod-%d", i))
		s := &runtime.PodStatus{UID: uid,
			Sandboxes:  []*runtime.SandboxStatus{{ID: fmt.Sprintf("sb-%d", i), State: runtime.SandboxReady}},
			Containers: []*runtime.ContainerStatus{{ID: fmt.Sprintf("c-%d", i), SandboxID: fmt.Sprintf("sb-%d", i), State: runtime.ContainerRunning}},
		}
		prev[uid], next[uid] = newRecord(), newRecord()
		prev[uid].add(s)
		next[uid].add(s)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ev := diff(prev, next); len(ev) != 0 {
			b.Fatalf("events %v for unchanged pods", ev)
		}
	}
}
