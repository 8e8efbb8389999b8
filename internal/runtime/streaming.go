package runtime

import (
	"context"
	"fmt"
	"net/url"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Operation types of the streaming calls, named as the upstream kubelet's.
const (
	opExec        = "exec"
	opAttach      = "attach"
	opPortForward = "port_forward"
)

// StreamOptions are the streams of an exec or attach session.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// Exec asks the runtime to prepare a streaming exec of cmd in a running
// container and returns the URL of its stream server that serves it.
func (r *Runtime) Exec(ctx context.Context, containerID string, cmd []string, o StreamOptions) (_ *url.URL, err error) {
	defer r.record(opExec, r.clock.Now(), &err)
	resp, err := r.rs.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: containerID,
		Cmd:         cmd,
		Tty:         o.TTY,
		Stdin:       o.Stdin,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
	})
	if err != nil {
		return nil, wrap(err, "exec in container %s", containerID)
	}
	return streamURL(resp.GetUrl(), "exec in container %s", containerID)
}

// Attach asks the runtime to prepare a streaming attach to a running
// container's main process and returns the URL that serves it. tty must
// match the container's configuration.
func (r *Runtime) Attach(ctx context.Context, containerID string, o StreamOptions) (_ *url.URL, err error) {
	defer r.record(opAttach, r.clock.Now(), &err)
	resp, err := r.rs.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: containerID,
		Stdin:       o.Stdin,
		Tty:         o.TTY,
		Stdout:      o.Stdout,
		Stderr:      o.Stderr,
	})
	if err != nil {
		return nil, wrap(err, "attach to container %s", containerID)
	}
	return streamURL(resp.GetUrl(), "attach to container %s", containerID)
}

// PortForward asks the runtime to prepare port forwarding into a pod
// sandbox's network namespace and returns the URL that serves it. ports
// may be empty: SPDY clients name the ports in their stream headers.
func (r *Runtime) PortForward(ctx context.Context, sandboxID string, ports []int32) (_ *url.URL, err error) {
	defer r.record(opPortForward, r.clock.Now(), &err)
	resp, err := r.rs.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return nil, wrap(err, "port forward to pod sandbox %s", sandboxID)
	}
	return streamURL(resp.GetUrl(), "port forward to pod sandbox %s", sandboxID)
}

// streamURL parses the URL a runtime returned; it must be absolute.
func streamURL(raw, format string, args ...any) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: runtime returned an invalid URL: %w", fmt.Sprintf(format, args...), err)
	}
	if !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("%s: runtime returned URL %q, want an absolute URL", fmt.Sprintf(format, args...), raw)
	}
	return u, nil
}
