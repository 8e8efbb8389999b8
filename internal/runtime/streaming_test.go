package runtime

import (
	"context"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

func TestStreamingURLs(t *testing.T) {
	type call func(ctx context.Context, r *Runtime, containerID, sandboxID string) (*url.URL, error)
	exec := func(cmd []string, o StreamOptions) call {
		return func(ctx context.Context, r *Runtime, id, _ string) (*url.URL, error) { return r.Exec(ctx, id, cmd, o) }
	}
	attach := func(o StreamOptions) call {
		return func(ctx context.Context, r *Runtime, id, _ string) (*url.URL, error) { return r.Attach(ctx, id, o) }
	}
	portForward := func(ports ...int32) call {
		return func(ctx context.Context, r *Runtime, _, sb string) (*url.URL, error) {
			return r.PortForward(ctx, sb, ports)
		}
	}
	tests := []struct {
		name    string
		call    call
		stopped bool
		inject  error  // injected into the CRI method
		method  string // CRI method
		want    fakecri.StreamRequest
		wantErr error
		errText string
	}{
		{
			name:   "exec",
			call:   exec([]string{"sh", "-c", "echo hi"}, StreamOptions{Stdin: true, Stdout: true, TTY: true}),
			method: "Exec",
			want:   fakecri.StreamRequest{Method: "Exec", Cmd: []string{"sh", "-c", "echo hi"}, Stdin: true, Stdout: true, TTY: true},
		},
		{
			name:   "attach",
			call:   attach(StreamOptions{Stdout: true, Stderr: true}),
			method: "Attach",
			want:   fakecri.StreamRequest{Method: "Attach", Stdout: true, Stderr: true},
		},
		{
			name:   "port forward with ports",
			call:   portForward(80, 8080),
			method: "PortForward",
			want:   fakecri.StreamRequest{Method: "PortForward", Ports: []int32{80, 8080}},
		},
		{
			name:   "port forward without ports",
			call:   portForward(),
			method: "PortForward",
			want:   fakecri.StreamRequest{Method: "PortForward"},
		},
		{
			name:    "exec in a stopped container",
			call:    exec([]string{"true"}, StreamOptions{Stdout: true}),
			method:  "Exec",
			stopped: true,
			errText: "not running",
		},
		{
			name: "attach to a missing container",
			call: func(ctx context.Context, r *Runtime, _, _ string) (*url.URL, error) {
				return r.Attach(ctx, "nope", StreamOptions{Stdout: true})
			},
			method:  "Attach",
			wantErr: errdefs.ErrNotFound,
		},
		{
			name:    "runtime error",
			call:    portForward(),
			method:  "PortForward",
			inject:  status.Error(codes.Unavailable, "stream server down"),
			errText: "port forward to pod sandbox",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := fakecri.Start(t)
			f.SetStreamBase("http://127.0.0.1:4242")
			r, err := New(ctx, f.Endpoint(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			id := runContainer(t, ctx, f, r)
			sb := f.Containers()[0].SandboxID
			if tt.stopped {
				if err := r.StopContainer(ctx, id, 0); err != nil {
					t.Fatal(err)
				}
			}
			if tt.inject != nil {
				f.InjectError(tt.method, tt.inject)
			}
			u, err := tt.call(ctx, r, id, sb)
			if wantedErr(t, err, tt.wantErr, tt.errText) {
				return
			}
			reqs := f.StreamRequests()
			if len(reqs) != 1 {
				t.Fatalf("stream requests = %+v, want one", reqs)
			}
			got := reqs[0]
			if u.String() != got.URL || !strings.HasPrefix(got.URL, "http://127.0.0.1:4242/") {
				t.Errorf("URL = %s, want the runtime's %s", u, got.URL)
			}
			want := tt.want
			if want.Method == "PortForward" {
				want.SandboxID = sb
			} else {
				want.ContainerID = id
			}
			want.URL = got.URL
			if len(want.Ports) == 0 && len(got.Ports) == 0 {
				got.Ports, want.Ports = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("runtime request = %+v, want %+v", got, want)
			}
		})
	}
}

func TestStreamURL(t *testing.T) {
	tests := []struct {
		raw  string
		want string // "" for an error
	}{
		{"http://127.0.0.1:3456/exec/abc", "http://127.0.0.1:3456/exec/abc"},
		{"https://[::1]:10010/portforward/x", "https://[::1]:10010/portforward/x"},
		{"/exec/abc", ""},
		{"", ""},
		{"http://%zz", ""},
	}
	for _, tt := range tests {
		u, err := streamURL(tt.raw, "exec in container %s", "c1")
		if tt.want == "" {
			if err == nil || !strings.Contains(err.Error(), "exec in container c1") {
				t.Errorf("streamURL(%q) = %v, %v; want an error naming the call", tt.raw, u, err)
			}
			continue
		}
		if err != nil || u.String() != tt.want {
			t.Errorf("streamURL(%q) = %v, %v; want %s", tt.raw, u, err, tt.want)
		}
	}
}
