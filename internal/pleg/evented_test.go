package pleg

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// watchedSource wraps a runtime's event stream and reports every open
// stream on connected and every end of one on ended.
type watchedSource struct {
	src       EventSource
	connected chan struct{}
	ended     chan error
}

func (w *watchedSource) WatchContainerEvents(ctx context.Context, connected func(), f func(runtime.ContainerEvent)) error {
	err := w.src.WatchContainerEvents(ctx, func() {
		connected()
		w.connected <- struct{}{}
	}, f)
	w.ended <- err
	return err
}

type eventedEnv struct {
	p        *PLEG
	rt       *runtime.Runtime
	srv      *fakecri.Server
	clk      *testclock.FakeClock
	src      *watchedSource
	relisted chan struct{}
	retries  chan time.Duration
}

// startEvented runs a PLEG over a fake CRI runtime with container events
// and a relist period of an hour that the test never reaches: every event
// the test sees comes from the stream (or the first relist).
func startEvented(t *testing.T, prep func(*fakecri.Server)) *eventedEnv {
	t.Helper()
	srv := fakecri.Start(t)
	srv.AddImage("busybox")
	if prep != nil {
		prep(srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt, err := runtime.New(ctx, srv.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatalf("runtime.New: %v", err)
	}
	clk := testclock.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	e := &eventedEnv{
		rt: rt, srv: srv, clk: clk,
		src:      &watchedSource{src: rt, connected: make(chan struct{}, 10), ended: make(chan error, 10)},
		relisted: make(chan struct{}, 10),
		retries:  make(chan time.Duration, 10),
	}
	e.p = New(rt, time.Hour, clk, WithEvents(e.src), WithAfterRelist(func() { e.relisted <- struct{}{} }))
	e.p.afterStreamError = func(d time.Duration) { e.retries <- d }
	done := make(chan error, 1)
	go func() { done <- e.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = rt.Close(context.Background())
	})
	recv(t, e.relisted, "first relist")
	return e
}

// streamOpen waits until the PLEG opened its event stream and the fake
// runtime holds it: the client's side is open before the runtime's
// handler registers it, and events in between reach no stream.
func (e *eventedEnv) streamOpen(t *testing.T, what string) {
	t.Helper()
	recv(t, e.src.connected, what)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.srv.WaitEventStreams(ctx, 1); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// wantEvents reads len(want) events and compares their types.
func wantEvents(t *testing.T, p *PLEG, uid types.UID, want ...EventType) []Event {
	t.Helper()
	var got []Event
	for range want {
		got = append(got, recv(t, p.Events(), "a PLEG event"))
	}
	var types []EventType
	for _, e := range got {
		if e.UID != uid {
			t.Errorf("event %+v: UID %q, want %q", e, e.UID, uid)
		}
		types = append(types, e.Type)
	}
	if !slices.Equal(types, want) {
		t.Errorf("event types = %v, want %v", types, want)
	}
	return got
}

var testPod = &v1.Pod{
	ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
	Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
}

// runPod starts testPod's sandbox and creates (not starts) its container.
func (e *eventedEnv) runPod(t *testing.T) (sandboxID, containerID string) {
	t.Helper()
	ctx := context.Background()
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: testPod.Name, Namespace: testPod.Namespace, Uid: string(testPod.UID)},
		Labels:      runtime.SandboxLabels(testPod),
		Annotations: runtime.SandboxAnnotations(testPod),
	}
	sb, err := e.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	c := &testPod.Spec.Containers[0]
	id, err := e.rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name},
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		Labels:      runtime.ContainerLabels(testPod, c.Name),
		Annotations: runtime.ContainerAnnotations(testPod, c, 0, false),
	}, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return sb, id
}

// TestEventsWithoutRelist: with the stream open, a created, started,
// exited and removed container is reported at once, with no relist (the
// fake clock never reaches the relist period).
func TestEventsWithoutRelist(t *testing.T) {
	e := startEvented(t, nil)
	e.streamOpen(t, "stream open")
	ctx := context.Background()
	sb, id := e.runPod(t)
	// The sandbox is first seen with the container's creation event.
	got := wantEvents(t, e.p, testPod.UID, SandboxChanged, ContainerChanged)
	if got[0].ContainerID != sb || got[1].ContainerID != id {
		t.Errorf("events %+v, want sandbox %s then container %s", got, sb, id)
	}
	if err := e.rt.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	wantEvents(t, e.p, testPod.UID, ContainerStarted)
	e.srv.SetExit(id, 1, "Error")
	wantEvents(t, e.p, testPod.UID, ContainerDied)
	if err := e.rt.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	wantEvents(t, e.p, testPod.UID, ContainerRemoved)
	if len(e.relisted) != 0 {
		t.Errorf("%d relists ran, want none after the first", len(e.relisted))
	}
	if got := drain(e.p); len(got) != 0 {
		t.Errorf("extra events %+v", got)
	}
}

// TestStreamErrorReconnects: a broken stream is counted, retried after
// the backoff and events flow again once it reopened.
func TestStreamErrorReconnects(t *testing.T) {
	e := startEvented(t, nil)
	e.streamOpen(t, "stream open")
	before := testutil.ToFloat64(metrics.EventedPLEGConnError)
	e.srv.BreakEventStreams(status.Error(codes.Unavailable, "runtime restarting"))
	if err := recv(t, e.src.ended, "stream end"); status.Code(errors.Unwrap(err)) != codes.Unavailable {
		t.Errorf("stream ended with %v, want Unavailable", err)
	}
	if d := recv(t, e.retries, "retry timer"); d != minStreamBackoff {
		t.Errorf("first retry in %v, want %v", d, minStreamBackoff)
	}
	if got := testutil.ToFloat64(metrics.EventedPLEGConnError) - before; got != 1 {
		t.Errorf("connection errors grew by %v, want 1", got)
	}
	// A second failure in a row doubles the wait.
	e.srv.InjectError("GetContainerEvents", status.Error(codes.Unavailable, "still down"))
	e.clk.Step(minStreamBackoff)
	recv(t, e.src.ended, "failed reopen")
	if d := recv(t, e.retries, "second retry timer"); d != 2*minStreamBackoff {
		t.Errorf("second retry in %v, want %v", d, 2*minStreamBackoff)
	}
	e.clk.Step(2 * minStreamBackoff)
	e.streamOpen(t, "stream reopened")
	e.runPod(t)
	wantEvents(t, e.p, testPod.UID, SandboxChanged, ContainerChanged)
}

// TestUnimplementedRelistsOnly: a runtime without the stream (containerd
// 1.x) is asked once; the relist goes on at its period.
func TestUnimplementedRelistsOnly(t *testing.T) {
	e := startEvented(t, func(s *fakecri.Server) {
		s.InjectStickyError("GetContainerEvents", status.Error(codes.Unimplemented, "unknown service"))
	})
	if err := recv(t, e.src.ended, "stream end"); !errors.Is(err, runtime.ErrEventsUnimplemented) {
		t.Fatalf("stream ended with %v, want ErrEventsUnimplemented", err)
	}
	e.runPod(t)
	if got := drain(e.p); len(got) != 0 {
		t.Errorf("events %+v before a relist, want none", got)
	}
	e.clk.Step(time.Hour)
	recv(t, e.relisted, "second relist")
	wantEvents(t, e.p, testPod.UID, SandboxChanged, ContainerChanged)
	if n := slices.Index(e.srv.Calls(), "GetContainerEvents"); n < 0 {
		t.Errorf("GetContainerEvents never called")
	}
	if n := countCalls(e.srv.Calls(), "GetContainerEvents"); n != 1 {
		t.Errorf("GetContainerEvents called %d times, want 1", n)
	}
	if len(e.retries) != 0 {
		t.Errorf("a retry was scheduled for an unimplemented stream")
	}
}

func countCalls(calls []string, m string) int {
	n := 0
	for _, c := range calls {
		if c == m {
			n++
		}
	}
	return n
}

// hookLister returns pods and runs during (if set) inside ListPods, after
// the PLEG took its event generation and before the list returns.
type hookLister struct {
	mu     sync.Mutex
	pods   []*runtime.PodStatus
	during func()
}

func (h *hookLister) ListPods(context.Context) ([]*runtime.PodStatus, error) {
	h.mu.Lock()
	pods, during := h.pods, h.during
	h.during = nil
	h.mu.Unlock()
	if during != nil {
		during()
	}
	return pods, nil
}

func podWith(sb runtime.SandboxState, c runtime.ContainerState) *runtime.PodStatus {
	return &runtime.PodStatus{
		UID:        "uid-1",
		Sandboxes:  []*runtime.SandboxStatus{{ID: "sb", State: sb}},
		Containers: []*runtime.ContainerStatus{{ID: "c", SandboxID: "sb", State: c}},
	}
}

func eventOf(t runtime.ContainerEventType, at time.Time, c runtime.ContainerState) runtime.ContainerEvent {
	return runtime.ContainerEvent{ContainerID: "c", Type: t, CreatedAt: at, Pod: podWith(runtime.SandboxReady, c)}
}

// TestStaleRelistDoesNotUndoEvent: an event applied while a relist lists
// the runtime wins over that relist's (older) view of the pod; an event
// older than one applied is dropped.
func TestStaleRelistDoesNotUndoEvent(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &hookLister{pods: []*runtime.PodStatus{podWith(runtime.SandboxReady, runtime.ContainerRunning)}}
	p := New(h, time.Second, testclock.NewFakeClock(t0))
	types := func(evs []Event) []EventType {
		var out []EventType
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}

	steps := []struct {
		name string
		do   func()
		want []EventType
	}{
		{"first relist", func() { p.relist(ctx) }, []EventType{SandboxChanged, ContainerStarted}},
		{"exit seen by an event during a stale relist", func() {
			h.during = func() {
				p.handleEvent(ctx, eventOf(runtime.ContainerStoppedEvent, t0.Add(2*time.Second), runtime.ContainerExited))
			}
			p.relist(ctx)
		}, []EventType{ContainerDied}},
		{"an older event is dropped", func() {
			p.handleEvent(ctx, eventOf(runtime.ContainerStartedEvent, t0.Add(time.Second), runtime.ContainerRunning))
		}, nil},
		{"the next relist sees the exit too", func() {
			h.mu.Lock()
			h.pods = []*runtime.PodStatus{podWith(runtime.SandboxReady, runtime.ContainerExited)}
			h.mu.Unlock()
			p.relist(ctx)
		}, nil},
		{"an event before a relist does not hold that relist back", func() {
			p.handleEvent(ctx, eventOf(runtime.ContainerStartedEvent, t0.Add(3*time.Second), runtime.ContainerRunning))
			p.relist(ctx) // lists the container exited again
		}, []EventType{ContainerStarted, ContainerDied}},
	}
	for _, s := range steps {
		s.do()
		if got := types(drain(p)); !slices.Equal(got, s.want) {
			t.Errorf("%s: events %v, want %v", s.name, got, s.want)
		}
	}
}

// TestEventMergeKeepsOtherSandboxes: an event of the pod's new sandbox
// leaves the containers of its older sandbox alone.
func TestEventMergeKeepsOtherSandboxes(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	old := podWith(runtime.SandboxNotReady, runtime.ContainerExited)
	h := &hookLister{pods: []*runtime.PodStatus{old}}
	p := New(h, time.Second, testclock.NewFakeClock(t0))
	p.relist(ctx)
	drain(p)
	p.handleEvent(ctx, runtime.ContainerEvent{ContainerID: "c2", Type: runtime.ContainerCreatedEvent, CreatedAt: t0, Pod: &runtime.PodStatus{
		UID:        "uid-1",
		Sandboxes:  []*runtime.SandboxStatus{{ID: "sb2", State: runtime.SandboxReady}},
		Containers: []*runtime.ContainerStatus{{ID: "c2", SandboxID: "sb2", State: runtime.ContainerCreated}},
	}})
	got := drain(p)
	want := []Event{{UID: "uid-1", Type: SandboxChanged, ContainerID: "sb2"}, {UID: "uid-1", Type: ContainerChanged, ContainerID: "c2"}}
	if !slices.Equal(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
}
