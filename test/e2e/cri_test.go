//go:build e2e

package e2e

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/heartlet/heartlet/internal/criclient"
)

// Labels heartlet puts on sandboxes and containers (the io.kubernetes.*
// convention shared with the upstream kubelet).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// cri queries the private containerd directly, behind heartlet's back.
// Methods that fail the test take the calling (sub)test's *testing.T.
type cri struct {
	rs internalapi.RuntimeService
}

func newCRI(t *testing.T) *cri {
	t.Helper()
	return newCRIAt(t, criEndpoint)
}

// newCRIAt is newCRI for the runtime at endpoint.
func newCRIAt(t *testing.T, endpoint string) *cri {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := criclient.NewRuntimeService(ctx, endpoint, 30*time.Second)
	if err != nil {
		t.Fatalf("connect to CRI endpoint %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = rs.Close(context.Background()) })
	return &cri{rs: rs}
}

func ctx30() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// sandboxes lists the sandboxes whose labels match sel.
func (c *cri) sandboxes(sel map[string]string) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := ctx30()
	defer cancel()
	return c.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
}

// containers lists the containers whose labels match sel, oldest first.
func (c *cri) containers(sel map[string]string) ([]*runtimeapi.Container, error) {
	ctx, cancel := ctx30()
	defer cancel()
	cs, err := c.rs.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].CreatedAt < cs[j].CreatedAt })
	return cs, nil
}

// podContainers lists the containers of pod uid named name ("" for all).
func (c *cri) podContainers(t *testing.T, uid, name string) []*runtimeapi.Container {
	t.Helper()
	sel := map[string]string{labelPodUID: uid}
	if name != "" {
		sel[labelContainerName] = name
	}
	cs, err := c.containers(sel)
	if err != nil {
		t.Fatalf("list containers of pod %s: %v", uid, err)
	}
	return cs
}

// podSandboxes lists the sandboxes of pod uid.
func (c *cri) podSandboxes(t *testing.T, uid string) []*runtimeapi.PodSandbox {
	t.Helper()
	sbs, err := c.sandboxes(map[string]string{labelPodUID: uid})
	if err != nil {
		t.Fatalf("list sandboxes of pod %s: %v", uid, err)
	}
	return sbs
}

// status returns a container's status; nil with a NotFound error once the
// container is gone.
func (c *cri) status(id string) (*runtimeapi.ContainerStatus, error) {
	ctx, cancel := ctx30()
	defer cancel()
	resp, err := c.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, err
	}
	return resp.GetStatus(), nil
}

// mustStatus is status for a container that must exist.
func (c *cri) mustStatus(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	st, err := c.status(id)
	if err != nil {
		t.Fatalf("status of container %s: %v", id, err)
	}
	return st
}

// countPodObjects counts the sandboxes and containers of the pod with this
// full name in namespace default.
func (c *cri) countPodObjects(podName string) (int, error) {
	sel := map[string]string{labelPodName: podName, labelPodNamespace: "default"}
	sbs, err := c.sandboxes(sel)
	if err != nil {
		return 0, err
	}
	cs, err := c.containers(sel)
	if err != nil {
		return 0, err
	}
	return len(sbs) + len(cs), nil
}

// forceRemovePod stops and removes every sandbox (and so container) of a pod
// through CRI; the last resort of a test's cleanup.
func (c *cri) forceRemovePod(t *testing.T, podName string) {
	sel := map[string]string{labelPodName: podName, labelPodNamespace: "default"}
	ctx, cancel := ctx30()
	defer cancel()
	cs, _ := c.containers(sel)
	for _, ctr := range cs {
		_ = c.rs.StopContainer(ctx, ctr.Id, 0)
		_ = c.rs.RemoveContainer(ctx, ctr.Id)
	}
	sbs, _ := c.sandboxes(sel)
	for _, sb := range sbs {
		if err := c.rs.StopPodSandbox(ctx, sb.Id); err != nil {
			t.Logf("stop sandbox %s: %v", sb.Id, err)
		}
		if err := c.rs.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// byName indexes containers by their container-name label, keeping the
// newest of each name.
func byName(cs []*runtimeapi.Container) map[string]*runtimeapi.Container {
	m := make(map[string]*runtimeapi.Container)
	for _, c := range cs {
		name := c.GetLabels()[labelContainerName]
		if old, ok := m[name]; !ok || c.CreatedAt > old.CreatedAt {
			m[name] = c
		}
	}
	return m
}

// exec runs cmd in a running container through CRI ExecSync, the way a
// user would look from inside with crictl exec, and returns its stdout,
// stderr and exit code. Failing to run the command at all fails the test.
func (c *cri) exec(t *testing.T, containerID string, cmd ...string) (stdout, stderr string, exitCode int) {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	out, errOut, err := c.rs.ExecSync(ctx, containerID, cmd, 20*time.Second)
	var exitErr utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		exitCode = exitErr.ExitStatus()
	default:
		t.Fatalf("exec %q in container %s: %v", cmd, containerID, err)
	}
	return string(out), string(errOut), exitCode
}
