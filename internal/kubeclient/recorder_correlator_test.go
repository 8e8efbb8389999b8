package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// apiCall is a write of an event the fake API server received.
type apiCall struct {
	verb      string // create or patch
	event     *v1.Event
	name      string
	namespace string
	patchType types.PatchType
	patch     string
}

// recorderTest is a recorder writing to a fake API server, with a fake
// clock.
type recorderTest struct {
	t        *testing.T
	clock    *testingclock.FakeClock
	kube     *fake.Clientset
	rec      *eventRecorder
	stop     func()
	calls    chan apiCall
	watched  chan *v1.Event
	sentinel int
}

// t0 is the fake clock's start; its nanoseconds show in event names.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// newRecorderTest starts a recorder. reactors run on the fake clientset
// after the one that records the calls, before its object tracker.
func newRecorderTest(t *testing.T, reactors ...k8stesting.ReactionFunc) *recorderTest {
	t.Helper()
	rt := &recorderTest{
		t:       t,
		clock:   testingclock.NewFakeClock(t0),
		kube:    fake.NewClientset(),
		calls:   make(chan apiCall, 4*maxQueuedEvents),
		watched: make(chan *v1.Event, 4*maxQueuedEvents),
	}
	for _, r := range reactors {
		rt.kube.PrependReactor("*", "events", r)
	}
	rt.kube.PrependReactor("*", "events", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		switch a := a.(type) {
		case k8stesting.CreateAction:
			rt.calls <- apiCall{verb: "create", event: a.GetObject().(*v1.Event).DeepCopy(), namespace: a.GetNamespace()}
		case k8stesting.PatchAction:
			rt.calls <- apiCall{verb: "patch", name: a.GetName(), namespace: a.GetNamespace(), patchType: a.GetPatchType(), patch: string(a.GetPatch())}
		}
		return false, nil, nil
	})
	rt.rec = newEventRecorder(context.Background(), eventSink{kubeapifake.Wrap(rt.kube).CoreV1()}, "worker-1", rt.clock, func(ev *v1.Event) {
		rt.watched <- ev.DeepCopy()
	})
	rt.rec.jitter = func() float64 { return 1 }
	rt.stop = rt.rec.start()
	t.Cleanup(rt.stop)
	return rt
}

// next returns the next write the API server receives.
func (rt *recorderTest) next() apiCall {
	rt.t.Helper()
	select {
	case c := <-rt.calls:
		return c
	case <-time.After(10 * time.Second):
		rt.t.Fatal("no event reached the API server")
		return apiCall{}
	}
}

// flush records an event about an object of its own and returns the
// writes received before that event's.
func (rt *recorderTest) flush() []apiCall {
	rt.t.Helper()
	rt.sentinel++
	name := fmt.Sprintf("sentinel-%d", rt.sentinel)
	rt.rec.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, v1.EventTypeNormal, "Sentinel", "flush")
	var out []apiCall
	for {
		c := rt.next()
		if c.verb == "create" && c.event.InvolvedObject.Name == name {
			return out
		}
		out = append(out, c)
	}
}

// waitForTimer waits until the recorder waits on the clock.
func (rt *recorderTest) waitForTimer() {
	rt.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !rt.clock.HasWaiters() {
		if time.Now().After(deadline) {
			rt.t.Fatal("the recorder does not wait to try again")
		}
		runtime.Gosched()
	}
}

func testPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "uid-1", ResourceVersion: "7"}}
}

func TestEventFields(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", UID: "node-uid"}}
	tests := []struct {
		name          string
		record        func(EventRecorder)
		want          *v1.Event // nil: none written
		wantEventName string
	}{
		{
			name: "a pod's event",
			record: func(r EventRecorder) {
				r.Eventf(testPod(), v1.EventTypeNormal, Pulled, "Successfully pulled image %q", "busybox")
			},
			want: &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web.%x", t0.UnixNano()), Namespace: "team"},
				InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: "uid-1", ResourceVersion: "7"},
				Reason:         Pulled,
				Message:        `Successfully pulled image "busybox"`,
				Type:           v1.EventTypeNormal,
			},
		},
		{
			name: "a node's event goes to the default namespace",
			record: func(r EventRecorder) {
				r.Event(node, v1.EventTypeWarning, "Rebooted", "Node worker-1 has been rebooted")
			},
			want: &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("worker-1.%x", t0.UnixNano()), Namespace: metav1.NamespaceDefault},
				InvolvedObject: v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "worker-1", UID: "node-uid"},
				Reason:         "Rebooted",
				Message:        "Node worker-1 has been rebooted",
				Type:           v1.EventTypeWarning,
			},
		},
		{
			name: "an annotated event",
			record: func(r EventRecorder) {
				r.AnnotatedEventf(testPod(), map[string]string{"a": "b"}, v1.EventTypeNormal, "Started", "Started container %s", "app")
			},
			want: &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web.%x", t0.UnixNano()), Namespace: "team", Annotations: map[string]string{"a": "b"}},
				InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: "uid-1", ResourceVersion: "7"},
				Reason:         "Started",
				Message:        "Started container app",
				Type:           v1.EventTypeNormal,
			},
		},
		{
			name: "a reference with a field path",
			record: func(r EventRecorder) {
				r.Event(&v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: "uid-1", FieldPath: "spec.containers{app}"}, v1.EventTypeNormal, "Killing", "Stopping container app")
			},
			want: &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("web.%x", t0.UnixNano()), Namespace: "team"},
				InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: "uid-1", FieldPath: "spec.containers{app}"},
				Reason:         "Killing",
				Message:        "Stopping container app",
				Type:           v1.EventTypeNormal,
			},
		},
		{
			name: "an invalid type is dropped",
			record: func(r EventRecorder) {
				r.Event(testPod(), "Info", Pulled, "pulled")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRecorderTest(t)
			tt.record(rt.rec)
			calls := rt.flush()
			if tt.want == nil {
				if len(calls) != 0 {
					t.Fatalf("wrote %d events, want none", len(calls))
				}
				return
			}
			if len(calls) != 1 || calls[0].verb != "create" {
				t.Fatalf("calls = %+v, want one create", calls)
			}
			got := calls[0].event
			want := tt.want.DeepCopy()
			now := metav1.NewTime(t0)
			want.FirstTimestamp, want.LastTimestamp, want.Count = now, now, 1
			want.Source = v1.EventSource{Component: EventComponent, Host: "worker-1"}
			want.ReportingController, want.ReportingInstance = EventComponent, "worker-1"
			if calls[0].namespace != want.Namespace {
				t.Errorf("created in namespace %q, want %q", calls[0].namespace, want.Namespace)
			}
			if !equalEvents(got, want) {
				t.Errorf("event =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// equalEvents compares events with their times to the nanosecond.
func equalEvents(a, b *v1.Event) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	if !a.FirstTimestamp.Time.Equal(b.FirstTimestamp.Time) || !a.LastTimestamp.Time.Equal(b.LastTimestamp.Time) {
		return false
	}
	a.FirstTimestamp, a.LastTimestamp = b.FirstTimestamp, b.LastTimestamp
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

// step is one event recorded by TestEventCorrelation, after advancing the
// clock, and the write expected of it.
type step struct {
	advance time.Duration
	reason  string
	message string

	verb        string // create or patch
	wantCount   int32
	wantMessage string
}

func TestEventCorrelation(t *testing.T) {
	same := func(n int, every time.Duration) []step {
		var out []step
		for i := range n {
			s := step{advance: every, reason: "BackOff", message: "Back-off restarting failed container", verb: "patch", wantCount: int32(i + 1), wantMessage: "Back-off restarting failed container"}
			if i == 0 {
				s.advance, s.verb = 0, "create"
			}
			out = append(out, s)
		}
		return out
	}
	similar := func(n int, every time.Duration) []step {
		var out []step
		for i := range n {
			m := fmt.Sprintf("Failed to pull image %q", fmt.Sprint("image-", i))
			out = append(out, step{advance: every, reason: "Failed", message: m, verb: "create", wantCount: 1, wantMessage: m})
		}
		return out
	}
	elevenSimilar := similar(11, time.Second)
	elevenSimilar[9].wantMessage = `(combined from similar events): Failed to pull image "image-9"`
	elevenSimilar[10].verb, elevenSimilar[10].wantCount = "patch", 2
	elevenSimilar[10].wantMessage = `(combined from similar events): Failed to pull image "image-10"`

	tests := []struct {
		name  string
		steps []step
	}{
		{name: "the same event twice is one event counted twice", steps: same(2, time.Minute)},
		{name: "the same event four times", steps: same(4, 3*time.Minute)},
		{name: "different reasons are different events", steps: []step{
			{reason: "Pulling", message: "m", verb: "create", wantCount: 1, wantMessage: "m"},
			{reason: "Pulled", message: "m", verb: "create", wantCount: 1, wantMessage: "m"},
		}},
		{name: "eleven similar events within ten minutes are aggregated from the tenth", steps: elevenSimilar},
		{name: "similar events more than ten minutes apart are not aggregated", steps: similar(11, 10*time.Minute+time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRecorderTest(t)
			// client-go's correlator, fed the same events at the same
			// times, says what client-go would write.
			upstream := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: rt.clock})
			var firstName string
			for i, s := range tt.steps {
				rt.clock.Step(s.advance)
				rt.rec.Event(testPod(), v1.EventTypeWarning, s.reason, s.message)
				c := rt.next()
				recorded := <-rt.watched
				if recorded.Count != 1 || recorded.Message != s.message {
					t.Errorf("step %d: the watcher got count %d message %q, want the event as recorded", i, recorded.Count, recorded.Message)
				}
				want, err := upstream.EventCorrelate(recorded)
				if err != nil || want.Skip {
					t.Fatalf("step %d: client-go's correlator: %v, skip %v", i, err, want.Skip)
				}
				if c.verb != s.verb {
					t.Fatalf("step %d: %s, want %s", i, c.verb, s.verb)
				}
				switch c.verb {
				case "create":
					if c.event.Count != s.wantCount || c.event.Message != s.wantMessage {
						t.Errorf("step %d: created count %d message %q, want %d %q", i, c.event.Count, c.event.Message, s.wantCount, s.wantMessage)
					}
					if c.event.Name != want.Event.Name || c.event.Count != want.Event.Count || c.event.Message != want.Event.Message || want.Patch != nil {
						t.Errorf("step %d: created %s count %d %q; client-go would write %s count %d %q (patch %s)", i, c.event.Name, c.event.Count, c.event.Message, want.Event.Name, want.Event.Count, want.Event.Message, want.Patch)
					}
					if i == 0 {
						firstName = c.event.Name
					}
					upstream.UpdateState(c.event)
				case "patch":
					wantPatch := fmt.Sprintf(`{"count":%d,"lastTimestamp":%q,"message":%q}`, s.wantCount, rt.clock.Now().UTC().Format(time.RFC3339), s.wantMessage)
					if c.patch != wantPatch {
						t.Errorf("step %d: patch %s, want %s", i, c.patch, wantPatch)
					}
					if c.patch != string(want.Patch) {
						t.Errorf("step %d: patch %s, client-go would send %s", i, c.patch, want.Patch)
					}
					if c.patchType != types.StrategicMergePatchType {
						t.Errorf("step %d: patch type %s", i, c.patchType)
					}
					if c.name != want.Event.Name || c.namespace != "team" {
						t.Errorf("step %d: patched %s/%s, client-go would patch team/%s", i, c.namespace, c.name, want.Event.Name)
					}
					if s.reason == "BackOff" && c.name != firstName {
						t.Errorf("step %d: patched %s, want the first event %s", i, c.name, firstName)
					}
				}
			}
			if extra := rt.flush(); len(extra) != 0 {
				t.Errorf("%d more writes: %+v", len(extra), extra)
			}
		})
	}
}

func TestEventSpamFilter(t *testing.T) {
	rt := newRecorderTest(t)
	pod := testPod()
	// 26 events about one pod in an instant, each its own (by reason):
	// the object's bucket holds 25. They share a name (same object, same
	// time), so the API server keeps the first; what counts is that 25
	// were sent.
	for i := range 26 {
		rt.rec.Event(pod, v1.EventTypeNormal, fmt.Sprint("Reason", i), "m")
	}
	if calls := rt.flush(); len(calls) != 25 {
		t.Fatalf("wrote %d events of 26 in an instant, want 25", len(calls))
	}
	// The other type has a bucket of its own.
	rt.rec.Event(pod, v1.EventTypeWarning, "Other", "m")
	if calls := rt.flush(); len(calls) != 1 {
		t.Fatalf("wrote %d warnings, want 1", len(calls))
	}
	rt.rec.Event(pod, v1.EventTypeNormal, "Reason26", "m")
	if calls := rt.flush(); len(calls) != 0 {
		t.Fatalf("wrote %d events over the rate, want none", len(calls))
	}
	rt.clock.Step(5 * time.Minute)
	rt.rec.Event(pod, v1.EventTypeNormal, "Reason27", "m")
	rt.rec.Event(pod, v1.EventTypeNormal, "Reason28", "m")
	if calls := rt.flush(); len(calls) != 1 || calls[0].event.Reason != "Reason27" {
		t.Fatalf("five minutes later wrote %+v, want Reason27 alone", calls)
	}
}

func TestEventPatchNotFound(t *testing.T) {
	rt := newRecorderTest(t, func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() == fmt.Sprintf("web.%x", t0.UnixNano()) {
			return true, nil, apierrors.NewNotFound(v1.Resource("events"), p.GetName())
		}
		return false, nil, nil
	})
	pod := testPod()
	rt.rec.Event(pod, v1.EventTypeNormal, Pulled, "pulled")
	first := rt.next()
	rt.clock.Step(time.Minute)
	rt.rec.Event(pod, v1.EventTypeNormal, Pulled, "pulled")
	if c := rt.next(); c.verb != "patch" || c.name != first.event.Name {
		t.Fatalf("second event: %s %s, want a patch of %s", c.verb, c.name, first.event.Name)
	}
	c := rt.next()
	if c.verb != "create" || c.event.Name != first.event.Name || c.event.Count != 2 || c.event.ResourceVersion != "" ||
		!c.event.LastTimestamp.Time.Equal(rt.clock.Now()) || !c.event.FirstTimestamp.Time.Equal(t0) {
		t.Fatalf("after NotFound: %s %+v, want the event created anew with count 2", c.verb, c.event)
	}
}

func TestEventRetries(t *testing.T) {
	refuse := func(err error, times int) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
			if c, ok := a.(k8stesting.CreateAction); ok && c.GetObject().(*v1.Event).InvolvedObject.Name == "web" && times != 0 {
				times--
				return true, nil, err
			}
			return false, nil, nil
		}
	}
	tests := []struct {
		name      string
		err       error
		refusals  int // -1: always
		wantTries int
	}{
		{name: "a connection error is tried again", err: errors.New("connection refused"), refusals: 2, wantTries: 3},
		{name: "at most twelve tries", err: errors.New("connection refused"), refusals: -1, wantTries: 12},
		{name: "a refusal is not tried again", err: apierrors.NewForbidden(v1.Resource("events"), "x", errors.New("no")), refusals: -1, wantTries: 1},
		{name: "an existing event is dropped", err: apierrors.NewAlreadyExists(v1.Resource("events"), "x"), refusals: -1, wantTries: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newRecorderTest(t, refuse(tt.err, tt.refusals))
			rt.rec.Event(testPod(), v1.EventTypeNormal, Pulled, "pulled")
			for try := 1; try <= tt.wantTries; try++ {
				if c := rt.next(); c.verb != "create" {
					t.Fatalf("try %d: %s", try, c.verb)
				}
				if try < tt.wantTries {
					rt.waitForTimer()
					rt.clock.Step(eventRetryDelay)
				}
			}
			if rt.clock.HasWaiters() {
				t.Fatal("the recorder waits to try again after the last try")
			}
			if extra := rt.flush(); len(extra) != 0 {
				t.Errorf("%d more writes: %+v", len(extra), extra)
			}
		})
	}
}

func TestEventQueueFull(t *testing.T) {
	rt := newRecorderTest(t)
	entered, release := make(chan struct{}), make(chan struct{})
	first := true
	rt.rec.watchers = append(rt.rec.watchers, func(*v1.Event) {
		if first {
			first = false
			close(entered)
			<-release
		}
	})
	// The dispatcher holds the first event, the queue the next
	// maxQueuedEvents; the rest are dropped, and no call blocks.
	pod := testPod()
	rt.rec.Event(pod, v1.EventTypeNormal, Pulled, "first")
	<-entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range maxQueuedEvents + 100 {
			rt.rec.Eventf(pod, v1.EventTypeNormal, Pulled, "event %d", i)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocks on a full queue")
	}
	close(release)
	var messages []string
	for len(messages) == 0 || messages[len(messages)-1] != fmt.Sprint("event ", maxQueuedEvents-1) {
		select {
		case ev := <-rt.watched:
			messages = append(messages, ev.Message)
		case <-time.After(10 * time.Second):
			t.Fatalf("the watcher got %d events, the last %q; want those queued", len(messages), messages[len(messages)-1])
		}
	}
	// The write queue may have dropped events too: check the watcher only.
	rt.rec.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "sentinel"}}, v1.EventTypeNormal, "Sentinel", "last")
	select {
	case ev := <-rt.watched:
		if ev.Reason != "Sentinel" {
			t.Errorf("after the queued events the watcher got %q, want none before the sentinel", ev.Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not get the event recorded after the queue drained")
	}
	if want := 1 + maxQueuedEvents; len(messages) != want {
		t.Errorf("the watcher got %d events, want %d", len(messages), want)
	}
}

func TestEventWatchers(t *testing.T) {
	rt := newRecorderTest(t)
	var second []*v1.Event
	rt.rec.watchers = append(rt.rec.watchers, func(ev *v1.Event) { second = append(second, ev.DeepCopy()) })
	pod := testPod()
	rt.rec.Event(pod, v1.EventTypeNormal, Pulled, "pulled")
	rt.rec.Event(pod, "Bogus", Pulled, "dropped")
	rt.rec.Event(pod, v1.EventTypeNormal, Pulled, "pulled")
	rt.rec.Event(pod, v1.EventTypeWarning, "Failed", "failed")
	rt.flush()
	// The watchers see an event before it is written.
	var first []*v1.Event
	for len(rt.watched) > 0 {
		first = append(first, <-rt.watched)
	}
	for name, got := range map[string][]*v1.Event{"first": first, "second": second} {
		var reasons []string
		for _, ev := range got {
			reasons = append(reasons, ev.Reason+"/"+ev.Message)
			if ev.Count != 1 {
				t.Errorf("the %s watcher got %s with count %d, want the event as recorded", name, ev.Reason, ev.Count)
			}
		}
		if want := "[Pulled/pulled Pulled/pulled Failed/failed Sentinel/flush]"; fmt.Sprint(reasons) != want {
			t.Errorf("the %s watcher got %v, want %s", name, reasons, want)
		}
	}
}

func TestEventRecorderStops(t *testing.T) {
	tests := []struct {
		name string
		stop func(rt *recorderTest, cancel context.CancelFunc)
	}{
		{name: "the returned func", stop: func(rt *recorderTest, _ context.CancelFunc) { rt.stop() }},
		{name: "the context", stop: func(_ *recorderTest, cancel context.CancelFunc) { cancel() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt := newRecorderTest(t, func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, errors.New("connection refused")
			})
			// The recorder of newRecorderTest is replaced by one on ctx.
			rt.stop()
			rt.rec = newEventRecorder(ctx, rt.rec.sink, "worker-1", rt.clock)
			rt.rec.jitter = func() float64 { return 1 }
			rt.stop = rt.rec.start()
			// It waits to try an event again, others queued behind it.
			for i := range 10 {
				rt.rec.Eventf(testPod(), v1.EventTypeNormal, Pulled, "event %d", i)
			}
			rt.next()
			rt.waitForTimer()
			tt.stop(rt, cancel)
			// Recording after the stop neither blocks nor panics.
			rt.rec.Event(testPod(), v1.EventTypeNormal, Pulled, "late")
		})
	}
}
