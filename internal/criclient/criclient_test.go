package criclient

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// shortTimeout is the client timeout of tests whose calls must time out:
// short, yet ample for a connection and a call over a local socket.
const shortTimeout = 200 * time.Millisecond

// unaryFunc answers one unary call in place of the fake's default.
type unaryFunc func(ctx context.Context, req any) (any, error)

// fake is a CRI v1 runtime and image service on a unix socket: a real gRPC
// server whose Version and ImageFsInfo answer, and whose other calls are
// Unimplemented unless the test sets them. It records the deadline and the
// request of the last call.
type fake struct {
	// unary and stream answer calls by method name (e.g. "RunPodSandbox").
	unary  map[string]unaryFunc
	stream map[string]func(grpc.ServerStream) error
	// noCRI serves no service at all: the peer is not a CRI v1 runtime.
	noCRI bool

	mu       sync.Mutex
	deadline map[string]time.Duration // remaining at the call's start; 0: none
	request  map[string]any
}

type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return validVersion(), nil
}

type fakeImages struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (fakeImages) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func validVersion() *runtimeapi.VersionResponse {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}
}

// socketDir returns a directory for a unix socket whose path stays within
// the 108 bytes a socket path may have.
func socketDir(t testing.TB) string {
	dir := t.TempDir()
	if len(dir) > 80 {
		d, err := os.MkdirTemp("", "cri")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dir = d
	}
	return dir
}

// start serves f on a new socket and returns its endpoint. The server
// stops when the test ends.
func (f *fake) start(t testing.TB) string {
	t.Helper()
	f.deadline = map[string]time.Duration{}
	f.request = map[string]any{}
	sock := filepath.Join(socketDir(t), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			name := path.Base(info.FullMethod)
			f.record(ctx, name, req)
			if h := f.unary[name]; h != nil {
				return h(ctx, req)
			}
			return handler(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			name := path.Base(info.FullMethod)
			f.record(ss.Context(), name, nil)
			if h := f.stream[name]; h != nil {
				return h(ss)
			}
			return handler(srv, ss)
		}),
	)
	if !f.noCRI {
		runtimeapi.RegisterRuntimeServiceServer(gs, fakeRuntime{})
		runtimeapi.RegisterImageServiceServer(gs, fakeImages{})
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(l)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return "unix://" + sock
}

func (f *fake) record(ctx context.Context, name string, req any) {
	var remaining time.Duration
	if d, ok := ctx.Deadline(); ok {
		remaining = time.Until(d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline[name] = remaining
	f.request[name] = req
}

// lastCall returns the remaining time of the last call of name when it
// started (0: no deadline) and its request.
func (f *fake) lastCall(t *testing.T, name string) (time.Duration, any) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.deadline[name]
	if !ok {
		t.Fatalf("the runtime saw no %s call", name)
	}
	return d, f.request[name]
}

// clients starts f and connects both services to it with timeout; both are
// closed when the test ends.
func (f *fake) clients(t *testing.T, timeout time.Duration) (criapi.RuntimeService, criapi.ImageManagerService) {
	t.Helper()
	endpoint := f.start(t)
	rs, err := NewRuntimeService(context.Background(), endpoint, timeout)
	if err != nil {
		t.Fatalf("NewRuntimeService: %v", err)
	}
	t.Cleanup(func() { _ = rs.Close(context.Background()) })
	is, err := NewImageService(context.Background(), endpoint, timeout)
	if err != nil {
		t.Fatalf("NewImageService: %v", err)
	}
	t.Cleanup(func() { _ = is.Close(context.Background()) })
	return rs, is
}

// answer returns a unaryFunc that answers resp.
func answer(resp any) unaryFunc {
	return func(context.Context, any) (any, error) { return resp, nil }
}

// block is a call that never answers: it returns when its context ends.
func block(ctx context.Context, _ any) (any, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}

// watchdog returns a context without deadline that is canceled after a
// generous while, so that a call the client fails to bound ends as
// Canceled (not DeadlineExceeded) instead of hanging the test.
func watchdog(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(10*time.Second, cancel)
	t.Cleanup(func() {
		stop.Stop()
		cancel()
	})
	return ctx
}

// TestDeadlines checks the deadline the runtime sees for each kind of
// call: the client timeout, the longer bounds of RunPodSandbox,
// StopContainer, ExecSync and CheckpointContainer, and none for PullImage
// and an ExecSync without timeout.
func TestDeadlines(t *testing.T) {
	const timeout = 10 * time.Second
	tests := []struct {
		name   string
		method string
		resp   any
		call   func(ctx context.Context, rs criapi.RuntimeService, is criapi.ImageManagerService) error
		want   time.Duration // 0: no deadline
	}{
		{
			name:   "ListContainers",
			method: "ListContainers",
			resp:   &runtimeapi.ListContainersResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.ListContainers(ctx, nil)
				return err
			},
			want: timeout,
		},
		{
			name:   "ImageStatus",
			method: "ImageStatus",
			resp:   &runtimeapi.ImageStatusResponse{},
			call: func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
				_, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "img"}, false)
				return err
			},
			want: timeout,
		},
		{
			name:   "RunPodSandbox twice the timeout",
			method: "RunPodSandbox",
			resp:   &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb"},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, "")
				return err
			},
			want: 2 * timeout,
		},
		{
			name:   "StopContainer timeout plus grace",
			method: "StopContainer",
			resp:   &runtimeapi.StopContainerResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				return rs.StopContainer(ctx, "c", 30)
			},
			want: timeout + 30*time.Second,
		},
		{
			name:   "ExecSync timeout plus command timeout",
			method: "ExecSync",
			resp:   &runtimeapi.ExecSyncResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, _, err := rs.ExecSync(ctx, "c", []string{"true"}, 20*time.Second)
				return err
			},
			want: timeout + 20*time.Second,
		},
		{
			name:   "ExecSync without timeout",
			method: "ExecSync",
			resp:   &runtimeapi.ExecSyncResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, _, err := rs.ExecSync(ctx, "c", []string{"true"}, 0)
				return err
			},
		},
		{
			name:   "PullImage unbounded",
			method: "PullImage",
			resp:   &runtimeapi.PullImageResponse{ImageRef: "sha256:1"},
			call: func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
				_, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "img"}, nil, nil)
				return err
			},
		},
		{
			name:   "CheckpointContainer longer request timeout",
			method: "CheckpointContainer",
			resp:   &runtimeapi.CheckpointContainerResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				return rs.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "c", Timeout: 60})
			},
			want: time.Minute,
		},
		{
			name:   "CheckpointContainer shorter request timeout",
			method: "CheckpointContainer",
			resp:   &runtimeapi.CheckpointContainerResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				return rs.CheckpointContainer(ctx, &runtimeapi.CheckpointContainerRequest{ContainerId: "c", Timeout: 1})
			},
			want: timeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{unary: map[string]unaryFunc{tt.method: answer(tt.resp)}}
			rs, is := f.clients(t, timeout)
			if err := tt.call(context.Background(), rs, is); err != nil {
				t.Fatalf("%s: %v", tt.method, err)
			}
			got, _ := f.lastCall(t, tt.method)
			switch {
			case tt.want == 0 && got != 0:
				t.Errorf("%s reached the runtime with %s left, want no deadline", tt.method, got)
			case tt.want != 0 && (got <= tt.want-timeout/2 || got > tt.want):
				t.Errorf("%s reached the runtime with %s left, want about %s", tt.method, got, tt.want)
			}
		})
	}
}

// TestCheckpointContainerTimeoutSent checks that a request timeout below
// the client's is raised to it in what the runtime gets, and that the
// caller's request is left alone.
func TestCheckpointContainerTimeoutSent(t *testing.T) {
	f := &fake{unary: map[string]unaryFunc{"CheckpointContainer": answer(&runtimeapi.CheckpointContainerResponse{})}}
	rs, _ := f.clients(t, 10*time.Second)
	req := &runtimeapi.CheckpointContainerRequest{ContainerId: "c", Timeout: 1}
	if err := rs.CheckpointContainer(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	_, got := f.lastCall(t, "CheckpointContainer")
	if sent := got.(*runtimeapi.CheckpointContainerRequest).Timeout; sent != 10 {
		t.Errorf("runtime got timeout %d, want 10", sent)
	}
	if req.Timeout != 1 {
		t.Errorf("caller's request changed to timeout %d", req.Timeout)
	}
}

// TestCallTimeout checks that a call the runtime never answers ends with
// DeadlineExceeded once the client timeout has passed, the caller's context
// having no deadline.
func TestCallTimeout(t *testing.T) {
	const timeout = shortTimeout
	tests := []struct {
		method string
		call   func(ctx context.Context, rs criapi.RuntimeService, is criapi.ImageManagerService) error
	}{
		{"ListContainers", func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
			_, err := rs.ListContainers(ctx, nil)
			return err
		}},
		{"Status", func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
			_, err := rs.Status(ctx, false)
			return err
		}},
		{"ContainerStatus", func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
			_, err := rs.ContainerStatus(ctx, "c", false)
			return err
		}},
		{"RunPodSandbox", func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
			_, err := rs.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, "")
			return err
		}},
		{"ListImages", func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
			_, err := is.ListImages(ctx, nil)
			return err
		}},
		{"RemoveImage", func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
			return is.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "img"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			f := &fake{unary: map[string]unaryFunc{tt.method: block}}
			rs, is := f.clients(t, timeout)
			err := tt.call(watchdog(t), rs, is)
			if status.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("%s = %v, want DeadlineExceeded", tt.method, err)
			}
			if !strings.HasPrefix(err.Error(), tt.method+": ") {
				t.Errorf("error %q does not name %s", err, tt.method)
			}
		})
	}
}

func TestExecSync(t *testing.T) {
	tests := []struct {
		name       string
		handler    unaryFunc
		timeout    time.Duration
		wantStdout string
		wantStderr string
		wantCode   int        // exit code in a CodeExitError; 0: none
		wantGRPC   codes.Code // status.Code of the error (Unknown: no gRPC status)
		wantTimout bool       // ErrCommandTimedOut in the chain
	}{
		{
			name:       "exit 0",
			handler:    answer(&runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("err")}),
			timeout:    2 * time.Second,
			wantStdout: "out",
			wantStderr: "err",
		},
		{
			name:       "exit code",
			handler:    answer(&runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("err"), ExitCode: 3}),
			timeout:    2 * time.Second,
			wantStdout: "out",
			wantStderr: "err",
			wantCode:   3,
			wantGRPC:   codes.Unknown,
		},
		{
			name:       "timeout",
			handler:    block,
			timeout:    shortTimeout,
			wantGRPC:   codes.DeadlineExceeded,
			wantTimout: true,
		},
		{
			name: "runtime error",
			handler: func(context.Context, any) (any, error) {
				return nil, status.Error(codes.NotFound, "no such container")
			},
			timeout:  2 * time.Second,
			wantGRPC: codes.NotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{unary: map[string]unaryFunc{"ExecSync": tt.handler}}
			rs, _ := f.clients(t, shortTimeout)
			stdout, stderr, err := rs.ExecSync(watchdog(t), "c", []string{"sh", "-c", "x"}, tt.timeout)
			if string(stdout) != tt.wantStdout || string(stderr) != tt.wantStderr {
				t.Errorf("ExecSync output %q, %q; want %q, %q", stdout, stderr, tt.wantStdout, tt.wantStderr)
			}
			if got := status.Code(err); got != tt.wantGRPC {
				t.Errorf("ExecSync error %v has gRPC code %s, want %s", err, got, tt.wantGRPC)
			}
			if got := errors.Is(err, ErrCommandTimedOut); got != tt.wantTimout {
				t.Errorf("ExecSync error %v: ErrCommandTimedOut in chain = %t, want %t", err, got, tt.wantTimout)
			}
			var ce utilexec.CodeExitError
			if got := errors.As(err, &ce); got != (tt.wantCode != 0) || got && ce.Code != tt.wantCode {
				t.Errorf("ExecSync error %v (%T), want an exit code %d", err, err, tt.wantCode)
			}
			var ee utilexec.ExitError
			if tt.wantCode != 0 && (!errors.As(err, &ee) || ee.ExitStatus() != tt.wantCode) {
				t.Errorf("ExecSync error %v is not a utilexec.ExitError with status %d", err, tt.wantCode)
			}
			_, req := f.lastCall(t, "ExecSync")
			if got, want := req.(*runtimeapi.ExecSyncRequest).Timeout, int64(tt.timeout.Seconds()); got != want {
				t.Errorf("runtime got timeout %d, want %d", got, want)
			}
		})
	}
}

// TestResponseChecks checks that a response lacking what its call promises
// is an error, and that a complete one is not.
func TestResponseChecks(t *testing.T) {
	sandboxStatus := func(md *runtimeapi.PodSandboxMetadata) *runtimeapi.PodSandboxStatusResponse {
		return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "sb", Metadata: md, CreatedAt: 1}}
	}
	containerStatus := func(imageRef string) *runtimeapi.ContainerStatusResponse {
		return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
			Id: "c", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, CreatedAt: 1,
			Image: &runtimeapi.ImageSpec{Image: "img"}, ImageRef: imageRef,
		}}
	}
	conditions := func(n int) *runtimeapi.StatusResponse {
		st := &runtimeapi.RuntimeStatus{}
		for range n {
			st.Conditions = append(st.Conditions, &runtimeapi.RuntimeCondition{Type: "Ready", Status: true})
		}
		return &runtimeapi.StatusResponse{Status: st}
	}
	tests := []struct {
		method    string
		good, bad any
		call      func(ctx context.Context, rs criapi.RuntimeService, is criapi.ImageManagerService) error
	}{
		{
			method: "RunPodSandbox",
			good:   &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb"},
			bad:    &runtimeapi.RunPodSandboxResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{}, "")
				return err
			},
		},
		{
			method: "CreateContainer",
			good:   &runtimeapi.CreateContainerResponse{ContainerId: "c"},
			bad:    &runtimeapi.CreateContainerResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.CreateContainer(ctx, "sb", &runtimeapi.ContainerConfig{}, nil)
				return err
			},
		},
		{
			method: "Exec",
			good:   &runtimeapi.ExecResponse{Url: "http://x"},
			bad:    &runtimeapi.ExecResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "c"})
				return err
			},
		},
		{
			method: "Attach",
			good:   &runtimeapi.AttachResponse{Url: "http://x"},
			bad:    &runtimeapi.AttachResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "c"})
				return err
			},
		},
		{
			method: "PortForward",
			good:   &runtimeapi.PortForwardResponse{Url: "http://x"},
			bad:    &runtimeapi.PortForwardResponse{},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "sb"})
				return err
			},
		},
		{
			method: "Version",
			good:   validVersion(),
			bad:    &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeApiVersion: "v1"},
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.Version(ctx, "v1")
				return err
			},
		},
		{
			method: "Status",
			good:   conditions(2),
			bad:    conditions(1),
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.Status(ctx, false)
				return err
			},
		},
		{
			method: "PodSandboxStatus",
			good:   sandboxStatus(&runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u"}),
			bad:    sandboxStatus(&runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns"}),
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.PodSandboxStatus(ctx, "sb", false)
				return err
			},
		},
		{
			method: "ContainerStatus",
			good:   containerStatus("sha256:1"),
			bad:    containerStatus(""),
			call: func(ctx context.Context, rs criapi.RuntimeService, _ criapi.ImageManagerService) error {
				_, err := rs.ContainerStatus(ctx, "c", false)
				return err
			},
		},
		{
			method: "ImageStatus",
			good:   &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:1", Size: 1}},
			bad:    &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:1"}},
			call: func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
				_, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "img"}, false)
				return err
			},
		},
		{
			method: "PullImage",
			good:   &runtimeapi.PullImageResponse{ImageRef: "sha256:1"},
			bad:    &runtimeapi.PullImageResponse{},
			call: func(ctx context.Context, _ criapi.RuntimeService, is criapi.ImageManagerService) error {
				_, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "img"}, nil, nil)
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			for _, good := range []bool{true, false} {
				resp := tt.bad
				if good {
					resp = tt.good
				}
				f := &fake{unary: map[string]unaryFunc{tt.method: answer(resp)}}
				rs, is := f.clients(t, 5*time.Second)
				err := tt.call(context.Background(), rs, is)
				switch {
				case good && err != nil:
					t.Errorf("%s with a complete response: %v", tt.method, err)
				case !good && err == nil:
					t.Errorf("%s with an incomplete response succeeded, want an error", tt.method)
				case !good && !strings.HasPrefix(err.Error(), tt.method+": invalid response: "):
					t.Errorf("%s error %q does not say the response is invalid", tt.method, err)
				}
			}
		})
	}
}

// TestVerbose checks that the verbose flag reaches the runtime.
func TestVerbose(t *testing.T) {
	f := &fake{unary: map[string]unaryFunc{
		"Status":           answer(&runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: make([]*runtimeapi.RuntimeCondition, 2)}}),
		"PodSandboxStatus": answer(&runtimeapi.PodSandboxStatusResponse{}),
		"ContainerStatus":  answer(&runtimeapi.ContainerStatusResponse{}),
		"ImageStatus":      answer(&runtimeapi.ImageStatusResponse{}),
	}}
	rs, is := f.clients(t, 5*time.Second)
	ctx := context.Background()
	for _, verbose := range []bool{true, false} {
		if _, err := rs.Status(ctx, verbose); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.PodSandboxStatus(ctx, "sb", verbose); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.ContainerStatus(ctx, "c", verbose); err != nil {
			t.Fatal(err)
		}
		if _, err := is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "img"}, verbose); err != nil {
			t.Fatal(err)
		}
		for method, get := range map[string]func(any) bool{
			"Status":           func(r any) bool { return r.(*runtimeapi.StatusRequest).Verbose },
			"PodSandboxStatus": func(r any) bool { return r.(*runtimeapi.PodSandboxStatusRequest).Verbose },
			"ContainerStatus":  func(r any) bool { return r.(*runtimeapi.ContainerStatusRequest).Verbose },
			"ImageStatus":      func(r any) bool { return r.(*runtimeapi.ImageStatusRequest).Verbose },
		} {
			if _, req := f.lastCall(t, method); get(req) != verbose {
				t.Errorf("%s(verbose %t) reached the runtime with verbose %t", method, verbose, !verbose)
			}
		}
	}
}

// TestErrorsKeepStatus checks that an error names its call and keeps the
// runtime's gRPC status reachable.
func TestErrorsKeepStatus(t *testing.T) {
	f := &fake{unary: map[string]unaryFunc{
		"ContainerStatus": func(context.Context, any) (any, error) {
			return nil, status.Error(codes.NotFound, "no such container")
		},
		"PullImage": func(context.Context, any) (any, error) {
			return nil, status.Error(codes.Unknown, "pull access denied")
		},
	}}
	rs, is := f.clients(t, 5*time.Second)
	_, err := rs.ContainerStatus(context.Background(), "c", false)
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.NotFound {
		t.Errorf("ContainerStatus error %v: status.FromError = %v, %t; want NotFound", err, st, ok)
	}
	if want := "ContainerStatus: rpc error: code = NotFound desc = no such container"; err == nil || err.Error() != want {
		t.Errorf("ContainerStatus error %q, want %q", err, want)
	}
	// A runtime's own pull error comes as Unknown, reduced to its message.
	_, err = is.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "img"}, nil, nil)
	if want := "PullImage: pull access denied"; err == nil || err.Error() != want {
		t.Errorf("PullImage error %q, want %q", err, want)
	}
	// Calls the runtime does not implement say so.
	if _, err := rs.RuntimeConfig(context.Background()); status.Code(err) != codes.Unimplemented {
		t.Errorf("RuntimeConfig error %v, want Unimplemented", err)
	}
}

// TestConstructionErrors checks both constructors against a peer that is
// not a CRI v1 service, one that never answers and a missing socket: the
// gRPC status stays in the chain, and TestMain checks that nothing of the
// failed client is left running.
func TestConstructionErrors(t *testing.T) {
	dir := socketDir(t)
	noCRI := (&fake{noCRI: true}).start(t)

	// A listener that accepts connections and never speaks.
	mute := filepath.Join(dir, "mute.sock")
	ml, err := net.Listen("unix", mute)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ml.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ml.Close()
		<-accepted
	})

	constructors := []struct {
		name string
		new  func(ctx context.Context, endpoint string, timeout time.Duration) (io.Closer, error)
	}{
		{"runtime", func(ctx context.Context, endpoint string, timeout time.Duration) (io.Closer, error) {
			rs, err := NewRuntimeService(ctx, endpoint, timeout)
			return closer{rs}, err
		}},
		{"image", func(ctx context.Context, endpoint string, timeout time.Duration) (io.Closer, error) {
			is, err := NewImageService(ctx, endpoint, timeout)
			return closer{is}, err
		}},
	}
	tests := []struct {
		name     string
		endpoint string
		timeout  time.Duration
		want     codes.Code // OK: no gRPC status, an argument error
	}{
		{name: "not CRI v1", endpoint: noCRI, timeout: 5 * time.Second, want: codes.Unimplemented},
		{name: "never answers", endpoint: "unix://" + mute, timeout: shortTimeout, want: codes.DeadlineExceeded},
		{name: "missing socket", endpoint: "unix://" + filepath.Join(dir, "nope.sock"), timeout: 5 * time.Second, want: codes.Unavailable},
		{name: "tcp endpoint", endpoint: "tcp://127.0.0.1:1", timeout: 5 * time.Second},
		{name: "relative unix endpoint", endpoint: "unix://cri.sock", timeout: 5 * time.Second},
		{name: "zero timeout", endpoint: noCRI},
	}
	for _, c := range constructors {
		for _, tt := range tests {
			t.Run(c.name+"/"+tt.name, func(t *testing.T) {
				s, err := c.new(watchdog(t), tt.endpoint, tt.timeout)
				if err == nil {
					_ = s.Close()
					t.Fatalf("connecting to %s succeeded, want an error", tt.endpoint)
				}
				if tt.want == codes.OK {
					if _, ok := status.FromError(err); ok {
						t.Errorf("error %v has a gRPC status, want an argument error", err)
					}
					return
				}
				if got := status.Code(err); got != tt.want {
					t.Errorf("error %v has gRPC code %s, want %s", err, got, tt.want)
				}
			})
		}
	}
}

// closer closes a service with a background context.
type closer struct {
	s interface{ Close(context.Context) error }
}

func (c closer) Close() error { return c.s.Close(context.Background()) }

// TestMessageSize checks that responses above gRPC's default 4 MiB are
// accepted up to 16 MiB.
func TestMessageSize(t *testing.T) {
	containers := func(mib int) *runtimeapi.ListContainersResponse {
		resp := &runtimeapi.ListContainersResponse{}
		for i := range mib {
			resp.Containers = append(resp.Containers, &runtimeapi.Container{Id: strings.Repeat(string(rune('a'+i%26)), 1<<20)})
		}
		return resp
	}
	tests := []struct {
		name string
		mib  int
		want codes.Code
	}{
		{"6 MiB", 6, codes.OK},
		{"15 MiB", 15, codes.OK},
		{"17 MiB", 17, codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{unary: map[string]unaryFunc{"ListContainers": answer(containers(tt.mib))}}
			rs, _ := f.clients(t, 5*time.Second)
			got, err := rs.ListContainers(context.Background(), nil)
			if status.Code(err) != tt.want {
				t.Fatalf("ListContainers of %d MiB: %v, want code %s", tt.mib, err, tt.want)
			}
			if err == nil && len(got) != tt.mib {
				t.Errorf("ListContainers returned %d containers, want %d", len(got), tt.mib)
			}
		})
	}
}

func TestGetContainerEvents(t *testing.T) {
	t.Run("delivers events until the runtime ends the stream", func(t *testing.T) {
		f := &fake{stream: map[string]func(grpc.ServerStream) error{
			"GetContainerEvents": func(ss grpc.ServerStream) error {
				for _, id := range []string{"a", "b", "c"} {
					if err := ss.SendMsg(&runtimeapi.ContainerEventResponse{ContainerId: id}); err != nil {
						return err
					}
				}
				return nil
			},
		}}
		rs, _ := f.clients(t, 5*time.Second)
		ch := make(chan *runtimeapi.ContainerEventResponse)
		done := make(chan error, 1)
		connected := make(chan struct{})
		go func() {
			done <- rs.GetContainerEvents(watchdog(t), ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(connected) })
		}()
		var got []string
		for len(got) < 3 {
			select {
			case e := <-ch:
				select {
				case <-connected:
				default:
					t.Fatal("an event arrived before the connected callback")
				}
				got = append(got, e.ContainerId)
			case err := <-done:
				t.Fatalf("GetContainerEvents ended after %v: %v", got, err)
			}
		}
		if strings.Join(got, ",") != "a,b,c" {
			t.Errorf("events %v, want a, b, c", got)
		}
		err := <-done
		if !errors.Is(err, io.EOF) || !strings.HasPrefix(err.Error(), "GetContainerEvents: ") {
			t.Errorf("GetContainerEvents = %v, want io.EOF named by the call", err)
		}
	})

	t.Run("ends with ctx though nobody reads", func(t *testing.T) {
		f := &fake{stream: map[string]func(grpc.ServerStream) error{
			"GetContainerEvents": func(ss grpc.ServerStream) error {
				if err := ss.SendMsg(&runtimeapi.ContainerEventResponse{ContainerId: "a"}); err != nil {
					return err
				}
				<-ss.Context().Done()
				return nil
			},
		}}
		rs, _ := f.clients(t, 5*time.Second)
		// Learn when the client has received the event: from then on it
		// is handing it over, not waiting on the stream.
		received := make(chan struct{}, 1)
		s := rs.(*runtimeService)
		s.client = eventsClient{RuntimeServiceClient: s.client, received: received}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rs.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse), nil) }()
		<-received
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("GetContainerEvents = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("GetContainerEvents did not return after its context was canceled")
		}
	})

	t.Run("unimplemented", func(t *testing.T) {
		f := &fake{}
		rs, _ := f.clients(t, 5*time.Second)
		called := false
		err := rs.GetContainerEvents(watchdog(t), make(chan *runtimeapi.ContainerEventResponse), func(runtimeapi.RuntimeService_GetContainerEventsClient) { called = true })
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("GetContainerEvents = %v, want Unimplemented", err)
		}
		if !called {
			t.Error("the connected callback was not called once the stream was open")
		}
	})
}

// eventsClient signals on received each event its GetContainerEvents
// stream receives.
type eventsClient struct {
	runtimeapi.RuntimeServiceClient
	received chan<- struct{}
}

func (c eventsClient) GetContainerEvents(ctx context.Context, req *runtimeapi.GetEventsRequest, opts ...grpc.CallOption) (runtimeapi.RuntimeService_GetContainerEventsClient, error) {
	stream, err := c.RuntimeServiceClient.GetContainerEvents(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	return signalingStream{stream, c.received}, nil
}

type signalingStream struct {
	runtimeapi.RuntimeService_GetContainerEventsClient
	received chan<- struct{}
}

func (s signalingStream) Recv() (*runtimeapi.ContainerEventResponse, error) {
	resp, err := s.RuntimeService_GetContainerEventsClient.Recv()
	if err == nil {
		select {
		case s.received <- struct{}{}:
		default:
		}
	}
	return resp, err
}

func TestClose(t *testing.T) {
	f := &fake{}
	endpoint := f.start(t)
	rs, err := NewRuntimeService(context.Background(), endpoint, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	is, err := NewImageService(context.Background(), endpoint, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Close(context.Background()); err != nil {
		t.Errorf("runtime service Close: %v", err)
	}
	if err := is.Close(context.Background()); err != nil {
		t.Errorf("image service Close: %v", err)
	}
	if _, err := rs.Version(context.Background(), "v1"); status.Code(err) != codes.Canceled {
		t.Errorf("Version after Close = %v, want Canceled (connection closing)", err)
	}
	if _, err := is.ImageFsInfo(context.Background()); status.Code(err) != codes.Canceled {
		t.Errorf("ImageFsInfo after Close = %v, want Canceled (connection closing)", err)
	}
}

func TestBufferPoolFitsListResponses(t *testing.T) {
	for _, size := range []int{100, 5 << 10, 40 << 10, 60 << 10, 100 << 10, 300 << 10, 900 << 10, 2 << 20} {
		b := bufferPool.Get(size)
		if len(*b) != size {
			t.Errorf("Get(%d) gave %d bytes", size, len(*b))
		}
		if c := cap(*b); c >= 2*size && size > 256 {
			t.Errorf("Get(%d) holds %d bytes, twice or more what it needs", size, c)
		}
		bufferPool.Put(b)
	}
	// A buffer above the largest size class is not kept for a later,
	// smaller request above it.
	big := bufferPool.Get(6 << 20)
	bufferPool.Put(big)
	if b := bufferPool.Get(2 << 20); cap(*b) >= 4<<20 {
		t.Errorf("Get(2 MiB) after a 6 MiB buffer was returned holds %d bytes", cap(*b))
	}
}
