package agent

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/server"
)

// streamingRuntime is the part of the runtime the streaming endpoints use.
type streamingRuntime interface {
	podStatusGetter
	Exec(ctx context.Context, containerID string, cmd []string, o runtime.StreamOptions) (*url.URL, error)
	Attach(ctx context.Context, containerID string, o runtime.StreamOptions) (*url.URL, error)
	PortForward(ctx context.Context, sandboxID string, ports []int32) (*url.URL, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (runtime.ExecResult, error)
}

// streamer answers the kubelet API's streaming endpoints: the pod among
// those heartlet manages, the container in its spec, the running instance
// of it in the runtime.
type streamer struct {
	rt   streamingRuntime
	pods server.PodLister
}

var _ server.Streamer = (*streamer)(nil)

// pod finds the target's pod; a UID in the request must match.
func (s *streamer) pod(t server.StreamTarget) (*v1.Pod, error) {
	for _, p := range s.pods() {
		if p.Namespace == t.Namespace && p.Name == t.Pod {
			if t.UID != "" && p.UID != t.UID {
				break
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("pod %q does not exist: %w", t.Pod, errdefs.ErrNotFound)
}

// containerSpec finds the named container of any kind in the pod's spec.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c
		}
	}
	return nil
}

// container finds the target's container: its spec and the ID of its
// running instance. Unknown pods and containers are errdefs.ErrNotFound, a
// container without a running instance ErrBadRequest.
func (s *streamer) container(ctx context.Context, t server.StreamTarget) (*v1.Container, string, error) {
	pod, err := s.pod(t)
	if err != nil {
		return nil, "", err
	}
	spec := containerSpec(pod, t.Container)
	if spec == nil {
		return nil, "", fmt.Errorf("container %q not found in pod %q: %w", t.Container, pod.Name, errdefs.ErrNotFound)
	}
	st, err := s.rt.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return nil, "", fmt.Errorf("pod %q: runtime status: %w", pod.Name, err)
	}
	for _, c := range st.Containers { // newest first
		if c.Name == t.Container && c.State == runtime.ContainerRunning {
			return spec, c.ID, nil
		}
	}
	return nil, "", fmt.Errorf("container %q in pod %q is not running: %w", t.Container, pod.Name, server.ErrBadRequest)
}

func runtimeOptions(o server.StreamOptions) runtime.StreamOptions {
	return runtime.StreamOptions{Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr, TTY: o.TTY}
}

func (s *streamer) Exec(ctx context.Context, t server.StreamTarget, cmd []string, o server.StreamOptions) (*url.URL, error) {
	_, id, err := s.container(ctx, t)
	if err != nil {
		return nil, err
	}
	return s.rt.Exec(ctx, id, cmd, runtimeOptions(o))
}

// Attach uses the container's TTY setting: whether its process runs on a
// terminal cannot change after it started.
func (s *streamer) Attach(ctx context.Context, t server.StreamTarget, o server.StreamOptions) (*url.URL, error) {
	spec, id, err := s.container(ctx, t)
	if err != nil {
		return nil, err
	}
	ro := runtimeOptions(o)
	ro.TTY = spec.TTY
	if ro.TTY {
		ro.Stderr = false
	}
	return s.rt.Attach(ctx, id, ro)
}

// PortForward forwards into the newest ready sandbox of the pod.
func (s *streamer) PortForward(ctx context.Context, t server.StreamTarget, ports []int32) (*url.URL, error) {
	pod, err := s.pod(t)
	if err != nil {
		return nil, err
	}
	st, err := s.rt.GetPodStatus(ctx, pod.UID)
	if err != nil {
		return nil, fmt.Errorf("pod %q: runtime status: %w", pod.Name, err)
	}
	for _, sb := range st.Sandboxes { // newest first
		if sb.State == runtime.SandboxReady {
			return s.rt.PortForward(ctx, sb.ID, ports)
		}
	}
	return nil, fmt.Errorf("pod %q has no running sandbox: %w", pod.Name, server.ErrBadRequest)
}

// Run runs cmd without a timeout, as the kubelet does, and returns stdout
// followed by stderr.
func (s *streamer) Run(ctx context.Context, t server.StreamTarget, cmd []string) ([]byte, error) {
	_, id, err := s.container(ctx, t)
	if err != nil {
		return nil, err
	}
	res, err := s.rt.ExecSync(ctx, id, cmd, 0)
	if err != nil {
		return nil, err
	}
	out := append(res.Stdout, res.Stderr...)
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), res.ExitCode, out)
	}
	return out, nil
}
