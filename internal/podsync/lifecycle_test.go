package podsync

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/podworker"
)

// events collects the events the syncer records, as "Reason: message",
// and what each is about.
type events struct {
	mu   sync.Mutex
	list []string
	// paths are the events' field paths ("" for one on the pod itself).
	paths []string
}

func (e *events) Eventf(obj k8sruntime.Object, _, reason, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, reason+": "+fmt.Sprintf(format, args...))
	path := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		path = ref.FieldPath
	}
	e.paths = append(e.paths, path)
}

// pathOf returns the field path of the first event ev, and whether there
// is one.
func (e *events) pathOf(ev string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := slices.Index(e.list, ev)
	if i < 0 {
		return "", false
	}
	return e.paths[i], true
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// withReason returns the events of one reason.
func (e *events) withReason(reason string) []string {
	var out []string
	for _, ev := range e.all() {
		if strings.HasPrefix(ev, reason+": ") {
			out = append(out, ev)
		}
	}
	return out
}

// lifecycleHarness is the syncer harness with an event recorder and a
// root directory for termination message files.
func lifecycleHarness(t *testing.T) (*harness, *events) {
	t.Helper()
	h := newHarness(t)
	ev := &events{}
	h.syncer.opts.Recorder = ev
	h.syncer.opts.RootDir = t.TempDir()
	h.useVolumes(nil)
	return h, ev
}

// hookPod is a one-container pod running busybox with lifecycle hooks.
func hookPod(policy v1.RestartPolicy, grace int64, lc *v1.Lifecycle) *v1.Pod {
	p := testPod(policy, nil, "app")
	p.Spec.TerminationGracePeriodSeconds = &grace
	c := &p.Spec.Containers[0]
	c.Image = "busybox:1.35"
	c.ImagePullPolicy = v1.PullIfNotPresent
	c.TerminationMessagePath = v1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	c.Lifecycle = lc
	return p
}

func execHook(cmd ...string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: cmd}}
}

// callIndex is the position of the first call of method at or after from,
// or -1.
func callIndex(calls []string, method string, from int) int {
	for i := from; i < len(calls); i++ {
		if calls[i] == method {
			return i
		}
	}
	return -1
}

func TestPostStartExecRunsRightAfterStart(t *testing.T) {
	h, ev := lifecycleHarness(t)
	var got [][]string
	var stateAtExec []runtimeapi.ContainerState
	h.fake.SetExec(func(id string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
		got = append(got, cmd)
		for _, c := range h.fake.Containers() {
			if c.ID == id {
				stateAtExec = append(stateAtExec, c.State)
			}
		}
		return nil, nil, 0, nil
	})
	pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PostStart: execHook("sh", "-c", "echo hi > /tmp/started")})
	h.sync(pod)

	calls := h.fake.Calls()
	start := callIndex(calls, "StartContainer", 0)
	exec := callIndex(calls, "ExecSync", 0)
	if start < 0 || exec < start {
		t.Fatalf("calls %v: want ExecSync after StartContainer", calls)
	}
	if len(got) != 1 || !slices.Equal(got[0], []string{"sh", "-c", "echo hi > /tmp/started"}) {
		t.Errorf("postStart commands = %q, want the hook's command once", got)
	}
	if len(stateAtExec) != 1 || stateAtExec[0] != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container state during the hook = %v, want running", stateAtExec)
	}
	if n := len(ev.withReason(EventFailedPostStartHook)); n != 0 {
		t.Errorf("a succeeding hook recorded %d FailedPostStartHook events", n)
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if findStatus(st, "app").State.Running == nil {
		t.Errorf("app state = %+v, want running", findStatus(st, "app").State)
	}
}

func TestPostStartFailureKillsAndRestarts(t *testing.T) {
	tests := []struct {
		name      string
		hook      *v1.LifecycleHandler
		exec      func(id string, cmd []string, timeout time.Duration) ([]byte, []byte, int32, error)
		wantMsg   []string
		wantExecs int
	}{
		{
			name: "exec exits non-zero",
			hook: execHook("sh", "-c", "exit 3"),
			exec: func(string, []string, time.Duration) ([]byte, []byte, int32, error) {
				return []byte("out"), []byte("boom"), 3, nil
			},
			// Upstream pkg/kubelet/lifecycle/handlers.go: the Exec message.
			wantMsg: []string{`Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "p_default(uid1)" failed - error: command 'sh -c exit 3' exited with 3: boom, message: "outboom"`},
		},
		{
			name: "httpGet connection refused",
			hook: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(closedPort(t))), Path: "/started"}},
			// Upstream: the HTTP message names the path.
			wantMsg: []string{`HTTP lifecycle hook (/started) for Container "app" in Pod "p_default(uid1)" failed - error: `, "connection refused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ev := lifecycleHarness(t)
			if tt.exec != nil {
				h.fake.SetExec(tt.exec)
			}
			pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PostStart: tt.hook})
			_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			if err == nil {
				t.Fatal("SyncPod succeeded although the postStart hook failed")
			}
			first := h.containers("app")
			if len(first) != 1 || first[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
				t.Fatalf("after a failed postStart: containers %+v, want one exited", first)
			}
			if first[0].StopTimeout != 30 {
				t.Errorf("stop timeout = %d, want the pod's grace 30", first[0].StopTimeout)
			}
			// Upstream kuberuntime startContainer: FailedPostStartHook
			// without the output (it may hold secrets), then Killing with
			// the reason FailedPostStartHook.
			all := ev.all()
			fi := slices.Index(all, "FailedPostStartHook: PostStartHook failed")
			ki := slices.Index(all, "Killing: FailedPostStartHook")
			si := slices.Index(all, "Started: Container started")
			if si < 0 || fi < si || ki < fi {
				t.Errorf("events %q: want Started, FailedPostStartHook, Killing in order", all)
			}
			// As upstream, each is about the container.
			for _, e := range []string{"Created: Container created", "Started: Container started", "FailedPostStartHook: PostStartHook failed", "Killing: FailedPostStartHook"} {
				if p, ok := ev.pathOf(e); !ok || p != "spec.containers{app}" {
					t.Errorf("event %q is about %q (found: %v), want spec.containers{app}", e, p, ok)
				}
			}
			st, _ := h.status.GetPodStatus(pod.UID)
			w := findStatus(st, "app").State.Waiting
			if w == nil || w.Reason != ReasonPostStartHookError {
				t.Fatalf("app state = %+v, want waiting %s", findStatus(st, "app").State, ReasonPostStartHookError)
			}
			for _, want := range tt.wantMsg {
				if !strings.Contains(w.Message, want) {
					t.Errorf("waiting message %q does not contain %q", w.Message, want)
				}
			}
			if findStatus(st, "app").LastTerminationState.Terminated == nil {
				t.Error("lastState.terminated is empty after the kill")
			}

			// The restart policy restarts it (the first restart is not held
			// by the backoff), and the new attempt runs the hook again.
			_, _ = h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			all2 := h.containers("app")
			if len(all2) != 2 || all2[1].Config.GetMetadata().GetAttempt() != 1 {
				t.Fatalf("after the next sync: containers %+v, want a second attempt", all2)
			}
			if n := len(ev.withReason(EventFailedPostStartHook)); n != 2 {
				t.Errorf("%d FailedPostStartHook events, want one per attempt", n)
			}
		})
	}
}

func TestPreStopRunsBeforeStop(t *testing.T) {
	tests := []struct {
		name string
		// hookTakes is how long the exec hook runs on the fake clock.
		hookTakes time.Duration
		grace     int64
		execCode  int32
		wantExec  bool
		// wantStop is the StopContainer timeout: the grace minus the
		// hook's time, at least 2 s (upstream minimumGracePeriodInSeconds).
		wantStop   int64
		wantFailed bool
		anyEvent   bool
	}{
		{name: "quick hook keeps the whole grace", hookTakes: 0, grace: 30, wantExec: true, wantStop: 30},
		{name: "hook time counts against the grace", hookTakes: 12 * time.Second, grace: 30, wantExec: true, wantStop: 18},
		{name: "fractions round up", hookTakes: 12500 * time.Millisecond, grace: 30, wantExec: true, wantStop: 18},
		{name: "little left gets the minimum", hookTakes: 29500 * time.Millisecond, grace: 30, wantExec: true, wantStop: 2},
		// Whether the overrun hook is reported as failed depends on whether
		// it was still running when the stop cancelled it.
		{name: "hook outlasting the grace", hookTakes: 45 * time.Second, grace: 30, wantExec: true, wantStop: 2, anyEvent: true},
		{name: "zero grace skips the hook", grace: 0, wantExec: false, wantStop: 2},
		{name: "failing hook does not stop the stop", grace: 10, execCode: 1, wantExec: true, wantStop: 10, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ev := lifecycleHarness(t)
			pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PreStop: execHook("/bin/drain")})
			h.sync(pod)
			app := h.running("app")
			execs := 0
			h.fake.SetExec(func(id string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
				execs++
				if id != app.ID || !slices.Equal(cmd, []string{"/bin/drain"}) {
					t.Errorf("exec %q in %s, want /bin/drain in the app container", cmd, id)
				}
				h.clock.Step(tt.hookTakes)
				return nil, []byte("drain failed"), tt.execCode, nil
			})
			h.fake.ResetCalls()
			if err := h.syncer.SyncTerminatingPod(h.ctx, pod, tt.grace); err != nil {
				t.Fatalf("SyncTerminatingPod: %v", err)
			}
			calls := h.fake.Calls()
			exec, stop := callIndex(calls, "ExecSync", 0), callIndex(calls, "StopContainer", 0)
			if stop < 0 {
				t.Fatalf("calls %v: no StopContainer", calls)
			}
			if tt.wantExec && (exec < 0 || exec > stop) {
				t.Errorf("calls %v: want ExecSync before StopContainer", calls)
			}
			if !tt.wantExec && execs != 0 {
				t.Errorf("hook ran %d times, want none", execs)
			}
			if got := h.containers("app")[0].StopTimeout; got != tt.wantStop {
				t.Errorf("stop timeout = %ds, want %ds", got, tt.wantStop)
			}
			failed := ev.withReason(EventFailedPreStopHook)
			if !tt.anyEvent && tt.wantFailed != (len(failed) == 1) {
				t.Errorf("FailedPreStopHook events = %q, want %v", failed, tt.wantFailed)
			}
			if tt.wantFailed && failed[0] != "FailedPreStopHook: PreStopHook failed" {
				t.Errorf("event %q, want upstream's message without the output", failed[0])
			}
		})
	}
}

// waitWaiters yields until the fake clock has n waiters: the goroutines
// under test have reached their timers.
func waitWaiters(t *testing.T, h *harness, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.clock.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the clock has %d waiters, want %d", h.clock.Waiters(), n)
		}
		runtime.Gosched()
	}
}

func TestPreStopSleep(t *testing.T) {
	tests := []struct {
		name     string
		sleep    int64
		grace    int64
		step     time.Duration
		wantStop int64
	}{
		// The sleep ends first: the rest of the grace is the stop timeout.
		{name: "sleep within the grace", sleep: 5, grace: 30, step: 5 * time.Second, wantStop: 25},
		// The grace ends first: the container gets the minimum, as upstream
		// (test/e2e/common/node/lifecycle_hook.go: a sleep hook longer
		// than the grace is cut by it).
		{name: "sleep longer than the grace", sleep: 100, grace: 10, step: 10 * time.Second, wantStop: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := lifecycleHarness(t)
			pod := hookPod(v1.RestartPolicyAlways, tt.grace, &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: tt.sleep}}})
			h.sync(pod)
			done := make(chan error, 1)
			go func() { done <- h.syncer.SyncTerminatingPod(h.ctx, pod, tt.grace) }()
			waitWaiters(t, h, 2) // the sleep and the grace timers
			if c := h.running("app"); c.StopTimeout != 0 {
				t.Fatalf("container stopped before its preStop sleep ended")
			}
			h.clock.Step(tt.step)
			if err := <-done; err != nil {
				t.Fatalf("SyncTerminatingPod: %v", err)
			}
			if got := h.containers("app")[0].StopTimeout; got != tt.wantStop {
				t.Errorf("stop timeout = %ds, want %ds", got, tt.wantStop)
			}
		})
	}
}

// hookServer records the requests it gets.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newHookServer(t *testing.T, status int) *hookServer {
	t.Helper()
	s := &hookServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(context.Background()))
		s.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hookServer) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func (s *hookServer) port(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(s.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// closedPort is a local port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestHTTPGetHooks(t *testing.T) {
	tests := []struct {
		name   string
		status int
		// get builds the action from the server's port.
		get func(port int) *v1.HTTPGetAction
		// ports are the container's ports.
		ports    []v1.ContainerPort
		wantPath string
		wantHdr  map[string]string
		wantFail bool
		// wantFallback: the HTTPS request was answered in plain HTTP and
		// retried over HTTP, with a LifecycleHTTPFallback event (upstream).
		wantFallback bool
	}{
		{
			name:   "number port, path with query, headers",
			status: http.StatusOK,
			get: func(port int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port)), Path: "/hook?x=1",
					HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "post"}}}
			},
			wantPath: "/hook?x=1",
			// Upstream pkg/probe/http/request.go: a kube-lifecycle user agent
			// and Accept */* unless the hook sets them.
			wantHdr: map[string]string{"X-Hook": "post", "Accept": "*/*"},
		},
		{
			name:   "named port",
			status: http.StatusOK,
			get: func(int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromString("web"), Path: "/named"}
			},
			wantPath: "/named",
		},
		{
			name:   "user agent and accept from the hook",
			status: http.StatusOK,
			get: func(port int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port)), Path: "/",
					HTTPHeaders: []v1.HTTPHeader{{Name: "User-Agent", Value: "mine"}, {Name: "Accept", Value: "text/plain"}}}
			},
			wantPath: "/",
			wantHdr:  map[string]string{"User-Agent": "mine", "Accept": "text/plain"},
		},
		{
			// Upstream checks no status code: only a failed request fails.
			name:   "error status is not a failure",
			status: http.StatusInternalServerError,
			get: func(port int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port)), Path: "/fail"}
			},
			wantPath: "/fail",
		},
		{
			// An HTTPS hook answered in plain HTTP is retried over HTTP.
			name:   "https falls back to http",
			status: http.StatusOK,
			get: func(port int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(port)), Path: "/tls", Scheme: v1.URISchemeHTTPS}
			},
			wantPath:     "/tls",
			wantFallback: true,
		},
		{
			name:   "unknown named port fails",
			status: http.StatusOK,
			get: func(int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromString("nope"), Path: "/"}
			},
			wantFail: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ev := lifecycleHarness(t)
			srv := newHookServer(t, tt.status)
			pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: tt.get(srv.port(t))}})
			pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(srv.port(t))}}
			_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			if tt.wantFail {
				if err == nil || len(ev.withReason(EventFailedPostStartHook)) != 1 {
					t.Fatalf("SyncPod error %v, events %q: want a failed postStart", err, ev.all())
				}
				return
			}
			if err != nil {
				t.Fatalf("SyncPod: %v", err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("server got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodGet || r.URL.RequestURI() != tt.wantPath {
				t.Errorf("request %s %s, want GET %s", r.Method, r.URL.RequestURI(), tt.wantPath)
			}
			if _, ok := tt.wantHdr["User-Agent"]; !ok && !strings.HasPrefix(r.UserAgent(), "kube-lifecycle/1.") {
				t.Errorf("User-Agent %q, want kube-lifecycle/<major>.<minor>", r.UserAgent())
			}
			for k, v := range tt.wantHdr {
				if got := r.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if got := len(ev.withReason("LifecycleHTTPFallback")); (got == 1) != tt.wantFallback {
				t.Errorf("%d LifecycleHTTPFallback events, want fallback %v", got, tt.wantFallback)
			}
			h.running("app")
		})
	}
}

// A hook without a host goes to the pod IP.
func TestHTTPGetHookDefaultsToPodIP(t *testing.T) {
	h, _ := lifecycleHarness(t)
	srv := newHookServer(t, http.StatusOK)
	pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(int32(srv.port(t))), Path: "/stop"}}})
	h.sync(pod)
	h.fake.SetSandboxIPs(h.fake.Sandboxes()[0].ID, "127.0.0.1")
	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 30); err != nil {
		t.Fatalf("SyncTerminatingPod: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || reqs[0].URL.Path != "/stop" {
		t.Fatalf("server got %d requests (%v), want GET /stop", len(reqs), reqs)
	}
}

// Every path that stops a running container runs its preStop hook: an
// image change restarts the container through it too.
func TestPreStopOnSpecChange(t *testing.T) {
	h, _ := lifecycleHarness(t)
	pod := hookPod(v1.RestartPolicyAlways, 30, &v1.Lifecycle{PreStop: execHook("/bin/drain")})
	h.sync(pod)
	old := h.running("app")
	var ran []string
	h.fake.SetExec(func(id string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
		ran = append(ran, id)
		return nil, nil, 0, nil
	})
	h.fake.AddImage("busybox:1.36")
	changed := pod.DeepCopy()
	changed.Spec.Containers[0].Image = "busybox:1.36"
	h.sync(changed)
	if len(ran) != 1 || ran[0] != old.ID {
		t.Errorf("preStop ran in %v, want once in the replaced container %s", ran, old.ID)
	}
	if h.running("app").ID == old.ID {
		t.Error("the changed container was not replaced")
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	tests := []struct {
		port    intstr.IntOrString
		want    int
		wantErr bool
	}{
		{intstr.FromInt32(80), 80, false},
		{intstr.FromString("http"), 8080, false},
		{intstr.FromString("9090"), 9090, false},
		{intstr.FromString("nope"), -1, true},
		{intstr.FromInt32(0), 0, true},
		{intstr.FromInt32(70000), 70000, true},
	}
	for _, tt := range tests {
		got, err := resolvePort(tt.port, c)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("resolvePort(%v) = %d, %v; want %d, error %v", tt.port.String(), got, err, tt.want, tt.wantErr)
		}
	}
}
