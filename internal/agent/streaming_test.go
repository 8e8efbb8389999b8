package agent

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
	"github.com/heartlet/heartlet/internal/server"
)

// streamRuntime answers pod statuses from fakeStatuses and the streaming
// calls from a real runtime client of the fake CRI server.
type streamRuntime struct {
	*fakeStatuses
	rt *runtime.Runtime
}

func (s streamRuntime) Exec(ctx context.Context, id string, cmd []string, o runtime.StreamOptions) (*url.URL, error) {
	return s.rt.Exec(ctx, id, cmd, o)
}

func (s streamRuntime) Attach(ctx context.Context, id string, o runtime.StreamOptions) (*url.URL, error) {
	return s.rt.Attach(ctx, id, o)
}

func (s streamRuntime) PortForward(ctx context.Context, sandboxID string, ports []int32) (*url.URL, error) {
	return s.rt.PortForward(ctx, sandboxID, ports)
}

func (s streamRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (runtime.ExecResult, error) {
	return s.rt.ExecSync(ctx, id, cmd, timeout)
}

// startFakeContainers runs a sandbox with the named containers in f and
// returns the sandbox ID and the container IDs by name.
func startFakeContainers(t *testing.T, ctx context.Context, f *fakecri.Server, rt *runtime.Runtime, names ...string) (string, map[string]string) {
	t.Helper()
	f.AddImage("busybox:1.35")
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "u1"}}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, n := range names {
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: n},
			Image:    &runtimeapi.ImageSpec{Image: "busybox:1.35"},
		}, sbCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids[n] = id
	}
	return sb, ids
}

func TestStreamer(t *testing.T) {
	ctx := context.Background()
	f := fakecri.Start(t)
	f.SetStreamBase("http://127.0.0.1:7777")
	f.SetExec(func(_ string, cmd []string, _ time.Duration) ([]byte, []byte, int32, error) {
		if cmd[0] == "fail" {
			return []byte("partial\n"), []byte("boom\n"), 3, nil
		}
		return []byte("out:" + strings.Join(cmd, ",") + "\n"), []byte("err\n"), 0, nil
	})
	rt, err := runtime.New(ctx, f.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	sb, ids := startFakeContainers(t, ctx, f, rt, "main", "term", "debug")

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{
			InitContainers:      []v1.Container{{Name: "init"}},
			Containers:          []v1.Container{{Name: "main"}, {Name: "term", TTY: true, Stdin: true}, {Name: "new"}},
			EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}}},
		}}
	idle := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "ns", UID: "u2"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	statuses := &fakeStatuses{pods: map[types.UID]*runtime.PodStatus{
		"u1": {UID: "u1", Name: "web", Namespace: "ns",
			Sandboxes: []*runtime.SandboxStatus{{ID: sb, State: runtime.SandboxReady}, {ID: "old", State: runtime.SandboxNotReady}},
			Containers: []*runtime.ContainerStatus{
				{ID: ids["main"], Name: "main", State: runtime.ContainerRunning},
				{ID: ids["term"], Name: "term", State: runtime.ContainerRunning},
				{ID: ids["debug"], Name: "debug", State: runtime.ContainerRunning},
				{ID: "i1", Name: "init", State: runtime.ContainerExited},
				{ID: "m0", Name: "main", State: runtime.ContainerExited},
			}},
		"u2": {UID: "u2", Name: "idle", Namespace: "ns",
			Sandboxes: []*runtime.SandboxStatus{{ID: "gone", State: runtime.SandboxNotReady}}},
	}}
	s := &streamer{rt: streamRuntime{fakeStatuses: statuses, rt: rt}, pods: func() []*v1.Pod { return []*v1.Pod{pod, idle} }}

	target := func(pod, uid, ctr string) server.StreamTarget {
		return server.StreamTarget{Namespace: "ns", Pod: pod, UID: types.UID(uid), Container: ctr}
	}
	all := server.StreamOptions{Stdin: true, Stdout: true, Stderr: true}
	tests := []struct {
		name    string
		call    func() (*url.URL, error)
		want    *fakecri.StreamRequest // the runtime request, without URL
		wantErr error
		wantMsg string
	}{
		{name: "exec", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "", "main"), []string{"ls", "/"}, all) },
			want: &fakecri.StreamRequest{Method: "Exec", ContainerID: ids["main"], Cmd: []string{"ls", "/"}, Stdin: true, Stdout: true, Stderr: true}},
		{name: "exec with matching uid and tty", call: func() (*url.URL, error) {
			return s.Exec(ctx, target("web", "u1", "main"), []string{"sh"}, server.StreamOptions{Stdin: true, Stdout: true, TTY: true})
		}, want: &fakecri.StreamRequest{Method: "Exec", ContainerID: ids["main"], Cmd: []string{"sh"}, Stdin: true, Stdout: true, TTY: true}},
		{name: "exec in an ephemeral container", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "", "debug"), []string{"id"}, all) },
			want: &fakecri.StreamRequest{Method: "Exec", ContainerID: ids["debug"], Cmd: []string{"id"}, Stdin: true, Stdout: true, Stderr: true}},
		{name: "exec uid mismatch", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "other", "main"), []string{"ls"}, all) },
			wantErr: errdefs.ErrNotFound, wantMsg: `pod "web" does not exist`},
		{name: "exec unknown pod", call: func() (*url.URL, error) { return s.Exec(ctx, target("nope", "", "main"), []string{"ls"}, all) },
			wantErr: errdefs.ErrNotFound, wantMsg: `pod "nope" does not exist`},
		{name: "exec unknown container", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "", "nope"), []string{"ls"}, all) },
			wantErr: errdefs.ErrNotFound, wantMsg: `container "nope" not found in pod "web"`},
		{name: "exec exited container", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "", "init"), []string{"ls"}, all) },
			wantErr: server.ErrBadRequest, wantMsg: `container "init" in pod "web" is not running`},
		{name: "exec container never started", call: func() (*url.URL, error) { return s.Exec(ctx, target("web", "", "new"), []string{"ls"}, all) },
			wantErr: server.ErrBadRequest, wantMsg: "is not running"},
		{name: "attach takes the spec's tty", call: func() (*url.URL, error) { return s.Attach(ctx, target("web", "", "term"), all) },
			want: &fakecri.StreamRequest{Method: "Attach", ContainerID: ids["term"], Stdin: true, Stdout: true, TTY: true}},
		{name: "attach without a tty in the spec", call: func() (*url.URL, error) {
			return s.Attach(ctx, target("web", "", "main"), server.StreamOptions{Stdout: true, TTY: true})
		}, want: &fakecri.StreamRequest{Method: "Attach", ContainerID: ids["main"], Stdout: true}},
		{name: "attach unknown container", call: func() (*url.URL, error) { return s.Attach(ctx, target("web", "", "nope"), all) },
			wantErr: errdefs.ErrNotFound},
		{name: "port forward to the ready sandbox", call: func() (*url.URL, error) { return s.PortForward(ctx, target("web", "", ""), []int32{8080}) },
			want: &fakecri.StreamRequest{Method: "PortForward", SandboxID: sb, Ports: []int32{8080}}},
		{name: "port forward with uid", call: func() (*url.URL, error) { return s.PortForward(ctx, target("web", "u1", ""), nil) },
			want: &fakecri.StreamRequest{Method: "PortForward", SandboxID: sb}},
		{name: "port forward without a ready sandbox", call: func() (*url.URL, error) { return s.PortForward(ctx, target("idle", "", ""), nil) },
			wantErr: server.ErrBadRequest, wantMsg: `pod "idle" has no running sandbox`},
		{name: "port forward unknown pod", call: func() (*url.URL, error) { return s.PortForward(ctx, target("web", "u9", ""), nil) },
			wantErr: errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.StreamRequests())
			u, err := tt.call()
			reqs := f.StreamRequests()[before:]
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %v, want %v with %q", err, tt.wantErr, tt.wantMsg)
				}
				if len(reqs) != 0 {
					t.Errorf("runtime got %+v, want no streaming call", reqs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 1 {
				t.Fatalf("runtime got %+v, want one streaming call", reqs)
			}
			got := reqs[0]
			if u.String() != got.URL {
				t.Errorf("URL = %s, want the runtime's %s", u, got.URL)
			}
			got.URL = ""
			if len(got.Ports) == 0 {
				got.Ports = nil
			}
			if !reflect.DeepEqual(got, *tt.want) {
				t.Errorf("runtime request = %+v, want %+v", got, *tt.want)
			}
		})
	}

	t.Run("run", func(t *testing.T) {
		out, err := s.Run(ctx, target("web", "", "main"), []string{"echo", "hi"})
		if err != nil || string(out) != "out:echo,hi\nerr\n" {
			t.Errorf("Run = %q, %v; want stdout then stderr", out, err)
		}
		_, err = s.Run(ctx, target("web", "", "main"), []string{"fail"})
		if err == nil || !strings.Contains(err.Error(), "command 'fail' exited with 3: partial\nboom") {
			t.Errorf("Run of a failing command = %v, want its exit code and output", err)
		}
		if _, err := s.Run(ctx, target("web", "", "init"), []string{"ls"}); !errors.Is(err, server.ErrBadRequest) {
			t.Errorf("Run in an exited container = %v, want ErrBadRequest", err)
		}
	})
}
