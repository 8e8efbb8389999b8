package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

func TestExecSync(t *testing.T) {
	tests := []struct {
		name     string
		exec     fakecri.ExecFunc
		stopped  bool
		wantCode int
		wantOut  string
		wantErr  error
		errText  string
	}{
		{
			name: "success with output",
			exec: func(_ string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
				return []byte(strings.Join(cmd, " ")), nil, 0, nil
			},
			wantOut: "cat /tmp/x",
		},
		{
			name: "non-zero exit is a result, not an error",
			exec: func(string, []string, time.Duration) ([]byte, []byte, int32, error) {
				return nil, []byte("no such file"), 3, nil
			},
			wantCode: 3,
		},
		{
			name: "timeout",
			exec: func(string, []string, time.Duration) ([]byte, []byte, int32, error) {
				return nil, nil, 0, status.Error(codes.DeadlineExceeded, "deadline")
			},
			wantErr: ErrExecTimeout,
		},
		{
			name:    "container not running",
			stopped: true,
			errText: "not running",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := fakecri.Start(t)
			f.SetExec(tt.exec)
			r, err := New(ctx, f.Endpoint(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			id := runContainer(t, ctx, f, r)
			if tt.stopped {
				if err := r.StopContainer(ctx, id, 0); err != nil {
					t.Fatal(err)
				}
			}
			res, err := r.ExecSync(ctx, id, []string{"cat", "/tmp/x"}, time.Second)
			if wantedErr(t, err, tt.wantErr, tt.errText) {
				return
			}
			if res.ExitCode != tt.wantCode || string(res.Stdout) != tt.wantOut {
				t.Errorf("result = code %d stdout %q, want code %d stdout %q", res.ExitCode, res.Stdout, tt.wantCode, tt.wantOut)
			}
		})
	}
}

// runContainer creates a sandbox and a running container in f.
func runContainer(t *testing.T, ctx context.Context, f *fakecri.Server, r *Runtime) string {
	t.Helper()
	f.AddImage("busybox:1.35")
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u1"}}
	sb, err := r.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox:1.35"},
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// wantedErr checks err against a test case's expectation: wantErr in its
// chain, or a message containing errText, or no error when both are
// unset. It reports whether an error was expected (and the case is done).
func wantedErr(t *testing.T, err, wantErr error, errText string) bool {
	t.Helper()
	switch {
	case wantErr != nil:
		if !errors.Is(err, wantErr) {
			t.Fatalf("err = %v, want %v in the chain", err, wantErr)
		}
		return true
	case errText != "":
		if err == nil || !strings.Contains(err.Error(), errText) {
			t.Fatalf("err = %v, want it to mention %q", err, errText)
		}
		return true
	case err != nil:
		t.Fatal(err)
	}
	return false
}
