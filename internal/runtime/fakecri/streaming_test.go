package fakecri

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestStreaming(t *testing.T) {
	s := Start(t)
	s.SetStreamBase("http://127.0.0.1:9999")
	s.AddImage(img)
	c := dial(t, s)
	ctx := context.Background()
	sb := runSandbox(t, c, sbConfig("p", 0, false))
	id := createContainer(t, c, sb, ctConfig("c", 0))
	if _, err := c.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"ls"}, Stdout: true}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Exec in a created container = %v, want FailedPrecondition", err)
	}
	if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}

	exec, err := c.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh", "-c", "true"}, Stdin: true, Stdout: true, Tty: true})
	if err != nil || exec.GetUrl() != "http://127.0.0.1:9999/exec/1" {
		t.Errorf("Exec = %v, %v; want URL http://127.0.0.1:9999/exec/1", exec, err)
	}
	attach, err := c.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true})
	if err != nil || attach.GetUrl() != "http://127.0.0.1:9999/attach/2" {
		t.Errorf("Attach = %v, %v; want URL http://127.0.0.1:9999/attach/2", attach, err)
	}
	pf, err := c.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{80}})
	if err != nil || pf.GetUrl() != "http://127.0.0.1:9999/portforward/3" {
		t.Errorf("PortForward = %v, %v; want URL http://127.0.0.1:9999/portforward/3", pf, err)
	}
	want := []StreamRequest{
		{Method: "Exec", ContainerID: id, Cmd: []string{"sh", "-c", "true"}, Stdin: true, Stdout: true, TTY: true, Ports: []int32{}, URL: "http://127.0.0.1:9999/exec/1"},
		{Method: "Attach", ContainerID: id, Cmd: []string{}, Stdout: true, Stderr: true, Ports: []int32{}, URL: "http://127.0.0.1:9999/attach/2"},
		{Method: "PortForward", SandboxID: sb, Cmd: []string{}, Ports: []int32{80}, URL: "http://127.0.0.1:9999/portforward/3"},
	}
	got := s.StreamRequests()
	for i := range got { // nil and empty are the same here
		if got[i].Cmd == nil {
			got[i].Cmd = []string{}
		}
		if got[i].Ports == nil {
			got[i].Ports = []int32{}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("StreamRequests = %+v\nwant %+v", got, want)
	}

	errs := []struct {
		name string
		err  error
		want codes.Code
	}{
		{"exec without a command", func() error {
			_, err := c.rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Stdout: true})
			return err
		}(), codes.InvalidArgument},
		{"attach to a missing container", func() error {
			_, err := c.rt.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: "nope", Stdout: true})
			return err
		}(), codes.NotFound},
		{"port forward to a missing sandbox", func() error {
			_, err := c.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: "nope"})
			return err
		}(), codes.NotFound},
	}
	for _, e := range errs {
		if status.Code(e.err) != e.want {
			t.Errorf("%s: %v, want %s", e.name, e.err, e.want)
		}
	}
	if n := len(s.StreamRequests()); n != 3 {
		t.Errorf("%d stream requests after failed calls, want 3", n)
	}
}
