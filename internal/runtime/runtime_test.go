package runtime

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

const testImage = "localhost:5000/busybox:1.35"

// newTestRuntime starts a fake CRI server and connects a Runtime to it.
func newTestRuntime(t *testing.T) (*Runtime, *fakecri.Server) {
	t.Helper()
	srv := fakecri.Start(t)
	ctx := context.Background()
	r, err := New(ctx, srv.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatalf("New(%s): %v", srv.Endpoint(), err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r, srv
}

func sandboxConfig(pod *v1.Pod, attempt uint32, hostNetwork bool) *runtimeapi.PodSandboxConfig {
	mode := runtimeapi.NamespaceMode_POD
	if hostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		LogDirectory: "/var/log/pods/" + pod.Namespace + "_" + pod.Name + "_" + string(pod.UID),
		Labels:       SandboxLabels(pod),
		Annotations:  SandboxAnnotations(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode},
		}},
	}
}

func containerConfig(pod *v1.Pod, c *v1.Container, restart int, init bool) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restart)},
		Image:       &runtimeapi.ImageSpec{Image: c.Image},
		Command:     c.Command,
		LogPath:     c.Name + "/0.log",
		Labels:      ContainerLabels(pod, c.Name),
		Annotations: ContainerAnnotations(pod, c, restart, init),
	}
}

func opCount(op string) float64 {
	return testutil.ToFloat64(metrics.RuntimeOperations.WithLabelValues(op))
}
func errCount(op string) float64 {
	return testutil.ToFloat64(metrics.RuntimeOperationsErrors.WithLabelValues(op))
}

// durCount returns how many latencies the duration histogram holds for op.
func durCount(t *testing.T, op string) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != "kubelet_runtime_operations_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// metricDelta snapshots the three runtime metrics of op.
type metricDelta struct {
	op        string
	ops, errs float64
	durs      uint64
}

func snapshot(t *testing.T, op string) metricDelta {
	return metricDelta{op: op, ops: opCount(op), errs: errCount(op), durs: durCount(t, op)}
}

// check asserts op was counted calls times, with errs of them failed.
func (d metricDelta) check(t *testing.T, calls, errs int) {
	t.Helper()
	if got := opCount(d.op) - d.ops; got != float64(calls) {
		t.Errorf("runtime_operations_total{operation_type=%q} moved by %v, want %d", d.op, got, calls)
	}
	if got := errCount(d.op) - d.errs; got != float64(errs) {
		t.Errorf("runtime_operations_errors_total{operation_type=%q} moved by %v, want %d", d.op, got, errs)
	}
	if got := durCount(t, d.op) - d.durs; got != uint64(calls) {
		t.Errorf("runtime_operations_duration_seconds{operation_type=%q} count moved by %d, want %d", d.op, got, calls)
	}
}

func TestNew(t *testing.T) {
	r, srv := newTestRuntime(t)
	v, err := r.Version(context.Background())
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v.RuntimeName != fakecri.RuntimeName || v.RuntimeApiVersion != "v1" {
		t.Errorf("Version = %+v, want runtime %s API v1", v, fakecri.RuntimeName)
	}
	calls := srv.Calls()
	if len(calls) == 0 || calls[0] != "Version" {
		t.Errorf("New made calls %v, want Version first", calls)
	}
}

func TestNewAcceptsBarePath(t *testing.T) {
	srv := fakecri.Start(t)
	r, err := New(context.Background(), strings.TrimPrefix(srv.Endpoint(), "unix://"), 5*time.Second)
	if err != nil {
		t.Fatalf("New(bare path): %v", err)
	}
	_ = r.Close(context.Background())
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	if len(dir) > 80 {
		d, err := os.MkdirTemp("", "rt")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}

	// A gRPC server that serves only the health service: not a CRI runtime.
	healthSock := filepath.Join(dir, "health.sock")
	hl, err := net.Listen("unix", healthSock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(hl) }()
	t.Cleanup(gs.Stop)

	// A listener that accepts and never speaks: the call times out.
	mute := filepath.Join(dir, "mute.sock")
	ml, err := net.Listen("unix", mute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Close() })
	go func() {
		for {
			c, err := ml.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()

	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		endpoint string
		timeout  time.Duration
		want     []string
		is       error
	}{
		{
			name:     "missing socket",
			endpoint: "unix://" + filepath.Join(dir, "nope.sock"),
			want:     []string{"container runtime endpoint unix://" + filepath.Join(dir, "nope.sock") + ": no such socket"},
			is:       fs.ErrNotExist,
		},
		{
			name:     "not a socket",
			endpoint: "unix://" + regular,
			want:     []string{"unix://" + regular, "is not a socket"},
		},
		{
			name:     "unsupported scheme",
			endpoint: "tcp://127.0.0.1:1234",
			want:     []string{"tcp://127.0.0.1:1234", "only unix sockets"},
		},
		{
			name:     "not a CRI runtime",
			endpoint: "unix://" + healthSock,
			want:     []string{"unix://" + healthSock, "not a CRI v1 runtime"},
		},
		{
			name:     "timeout",
			endpoint: "unix://" + mute,
			timeout:  300 * time.Millisecond,
			want:     []string{"unix://" + mute, "no answer within 300ms"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			r, err := New(context.Background(), tt.endpoint, timeout)
			if err == nil {
				_ = r.Close(context.Background())
				t.Fatalf("New(%s) succeeded, want an error", tt.endpoint)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New(%s) error %q does not contain %q", tt.endpoint, err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("New(%s) error %v is not %v", tt.endpoint, err, tt.is)
			}
		})
	}
}

func TestSandboxLifecycle(t *testing.T) {
	r, srv := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod("web", "uid-sb")

	run := snapshot(t, opRunPodSandbox)
	id, err := r.RunPodSandbox(ctx, sandboxConfig(pod, 0, false), "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	run.check(t, 1, 0)
	if sbs := srv.Sandboxes(); len(sbs) != 1 || sbs[0].ID != id || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("fake sandboxes = %+v, want one ready %s", sbs, id)
	}

	// The same attempt again is refused, and counted as an error.
	run = snapshot(t, opRunPodSandbox)
	if _, err := r.RunPodSandbox(ctx, sandboxConfig(pod, 0, false), ""); status.Code(err) != codes.AlreadyExists {
		t.Errorf("second RunPodSandbox of attempt 0 = %v, want AlreadyExists", err)
	}
	run.check(t, 1, 1)

	rm := snapshot(t, opRemovePodSandbox)
	if err := r.RemovePodSandbox(ctx, id); err == nil {
		t.Error("RemovePodSandbox of a ready sandbox succeeded, want an error")
	}
	rm.check(t, 1, 1)

	stop := snapshot(t, opStopPodSandbox)
	if err := r.StopPodSandbox(ctx, id); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	stop.check(t, 1, 0)
	if sbs := srv.Sandboxes(); sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("after StopPodSandbox state = %v, want NOTREADY", sbs[0].State)
	}

	rm = snapshot(t, opRemovePodSandbox)
	if err := r.RemovePodSandbox(ctx, id); err != nil {
		t.Fatalf("RemovePodSandbox: %v", err)
	}
	rm.check(t, 1, 0)
	if sbs := srv.Sandboxes(); len(sbs) != 0 {
		t.Errorf("after RemovePodSandbox sandboxes = %+v, want none", sbs)
	}

	stop = snapshot(t, opStopPodSandbox)
	err = r.StopPodSandbox(ctx, id)
	if !errors.Is(err, errdefs.ErrNotFound) || status.Code(err) != codes.NotFound {
		t.Errorf("StopPodSandbox of a removed sandbox = %v, want errdefs.ErrNotFound with the gRPC status kept", err)
	}
	if err != nil && !strings.Contains(err.Error(), id) {
		t.Errorf("error %q does not name sandbox %s", err, id)
	}
	stop.check(t, 1, 1)
}

func TestContainerLifecycle(t *testing.T) {
	r, srv := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod("web", "uid-ct")
	sbCfg := sandboxConfig(pod, 0, false)
	sbID, err := r.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	cCfg := containerConfig(pod, &pod.Spec.Containers[0], 0, false)

	create := snapshot(t, opCreateContainer)
	_, err = r.CreateContainer(ctx, sbID, cCfg, sbCfg)
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "not present") {
		t.Errorf("CreateContainer without the image = %v, want errdefs.ErrNotFound naming the missing image", err)
	}
	create.check(t, 1, 1)

	pull := snapshot(t, opPullImage)
	ref, err := r.PullImage(ctx, testImage, nil, sbCfg)
	if err != nil || !strings.HasPrefix(ref, "sha256:") {
		t.Fatalf("PullImage = %q, %v; want a sha256 ref", ref, err)
	}
	pull.check(t, 1, 0)

	create = snapshot(t, opCreateContainer)
	id, err := r.CreateContainer(ctx, sbID, cCfg, sbCfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	create.check(t, 1, 0)

	start := snapshot(t, opStartContainer)
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	start.check(t, 1, 0)
	if cs := srv.Containers(); cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after StartContainer state = %v, want RUNNING", cs[0].State)
	}

	stop := snapshot(t, opStopContainer)
	srv.SetStopExitCode(id, 143)
	if err := r.StopContainer(ctx, id, 1500*time.Millisecond); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	stop.check(t, 1, 0)
	cs := srv.Containers()[0]
	if cs.State != runtimeapi.ContainerState_CONTAINER_EXITED || cs.ExitCode != 143 {
		t.Errorf("after StopContainer = %v exit %d, want EXITED exit 143", cs.State, cs.ExitCode)
	}
	if cs.StopTimeout != 2 {
		t.Errorf("StopContainer sent timeout %ds for a 1.5s grace, want 2s", cs.StopTimeout)
	}

	rm := snapshot(t, opRemoveContainer)
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	rm.check(t, 1, 0)
	if len(srv.Containers()) != 0 {
		t.Errorf("after RemoveContainer containers = %+v, want none", srv.Containers())
	}

	start = snapshot(t, opStartContainer)
	if err := r.StartContainer(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("StartContainer of a removed container = %v, want errdefs.ErrNotFound", err)
	}
	start.check(t, 1, 1)
}

func TestGraceSeconds(t *testing.T) {
	tests := []struct {
		grace time.Duration
		want  int64
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Millisecond, 1},
		{time.Second, 1},
		{30 * time.Second, 30},
		{30*time.Second + 1, 31},
	}
	for _, tt := range tests {
		if got := graceSeconds(tt.grace); got != tt.want {
			t.Errorf("graceSeconds(%v) = %d, want %d", tt.grace, got, tt.want)
		}
	}
}

func TestImages(t *testing.T) {
	r, srv := newTestRuntime(t)
	ctx := context.Background()

	st := snapshot(t, opImageStatus)
	ref, err := r.ImageRef(ctx, testImage)
	if err != nil || ref != "" {
		t.Errorf("ImageRef of an absent image = %q, %v; want \"\", nil", ref, err)
	}
	st.check(t, 1, 0)

	srv.RequireAuth(testImage, "user", "secret")
	pull := snapshot(t, opPullImage)
	if _, err := r.PullImage(ctx, testImage, &runtimeapi.AuthConfig{Username: "user", Password: "wrong"}, nil); err == nil ||
		!strings.Contains(err.Error(), testImage) {
		t.Errorf("PullImage with wrong credentials = %v, want an error naming the image", err)
	}
	pulled, err := r.PullImage(ctx, testImage, &runtimeapi.AuthConfig{Username: "user", Password: "secret"}, nil)
	if err != nil {
		t.Fatalf("PullImage with credentials: %v", err)
	}
	pull.check(t, 2, 1)

	ref, err = r.ImageRef(ctx, testImage)
	if err != nil || ref != pulled {
		t.Errorf("ImageRef after pull = %q, %v; want %q", ref, err, pulled)
	}

	list := snapshot(t, opListImages)
	images, err := r.ListImages(ctx)
	if err != nil || len(images) != 1 || images[0].GetId() != pulled {
		t.Errorf("ListImages = %v, %v; want the pulled image", images, err)
	}
	list.check(t, 1, 0)

	rm := snapshot(t, opRemoveImage)
	if err := r.RemoveImage(ctx, testImage); err != nil {
		t.Fatalf("RemoveImage: %v", err)
	}
	rm.check(t, 1, 0)
	if ref, _ := r.ImageRef(ctx, testImage); ref != "" {
		t.Errorf("ImageRef after RemoveImage = %q, want \"\"", ref)
	}

	srv.InjectError("ImageStatus", status.Error(codes.Unavailable, "down"))
	st = snapshot(t, opImageStatus)
	if _, err := r.ImageRef(ctx, testImage); status.Code(err) != codes.Unavailable {
		t.Errorf("ImageRef with the runtime down = %v, want Unavailable", err)
	}
	st.check(t, 1, 1)
}

func TestStatus(t *testing.T) {
	r, srv := newTestRuntime(t)
	srv.SetReady(true, false)
	st := snapshot(t, opStatus)
	resp, err := r.Status(context.Background())
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	st.check(t, 1, 0)
	got := map[string]bool{}
	for _, c := range resp.GetStatus().GetConditions() {
		got[c.GetType()] = c.GetStatus()
	}
	if !got[runtimeapi.RuntimeReady] || got[runtimeapi.NetworkReady] {
		t.Errorf("Status conditions = %v, want RuntimeReady true, NetworkReady false", got)
	}
}

func TestInjectedErrorsAreCounted(t *testing.T) {
	r, srv := newTestRuntime(t)
	ctx := context.Background()
	srv.InjectError("ListContainers", status.Error(codes.Unavailable, "runtime restarting"))

	sb, ct := snapshot(t, opListPodSandbox), snapshot(t, opListContainers)
	if _, err := r.ListPods(ctx); status.Code(err) != codes.Unavailable || errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("ListPods = %v, want Unavailable and not errdefs.ErrNotFound", err)
	}
	sb.check(t, 1, 0)
	ct.check(t, 1, 1)

	// One-shot: the next call succeeds.
	if _, err := r.ListPods(ctx); err != nil {
		t.Errorf("ListPods after a one-shot error: %v", err)
	}
}

func TestVersionCounted(t *testing.T) {
	r, srv := newTestRuntime(t)
	v := snapshot(t, opVersion)
	srv.InjectError("Version", errors.New("boom"))
	if _, err := r.Version(context.Background()); err == nil {
		t.Error("Version with an injected error succeeded")
	}
	if _, err := r.Version(context.Background()); err != nil {
		t.Errorf("Version: %v", err)
	}
	v.check(t, 2, 1)
}

func TestStatusInfoAndRuntimeConfig(t *testing.T) {
	r, srv := newTestRuntime(t)
	srv.SetReady(false, true)
	st := snapshot(t, opStatus)
	resp, err := r.StatusInfo(context.Background())
	if err != nil {
		t.Fatalf("StatusInfo: %v", err)
	}
	st.check(t, 1, 0)
	if c := resp.GetStatus().GetConditions(); len(c) != 2 || c[0].GetStatus() {
		t.Errorf("StatusInfo conditions = %v, want RuntimeReady false first", c)
	}
	// The fake, as containerd 1.6, does not implement RuntimeConfig: the
	// gRPC code stays in the chain for callers to fall back.
	rc := snapshot(t, opRuntimeConfig)
	if _, err := r.RuntimeConfig(context.Background()); status.Code(err) != codes.Unimplemented {
		t.Errorf("RuntimeConfig = %v, want Unimplemented", err)
	}
	rc.check(t, 1, 1)
}
