//go:build integration

package runtime

import (
	"context"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const integrationImage = "localhost:5000/busybox:1.35"

// TestIntegrationRealRuntime runs a sandbox and two containers on the real
// CRI runtime at $HEARTLET_CRI_ENDPOINT and checks what GetPodStatus and
// ListPods report about them.
func TestIntegrationRealRuntime(t *testing.T) {
	endpoint := os.Getenv("HEARTLET_CRI_ENDPOINT")
	if endpoint == "" {
		t.Skip("HEARTLET_CRI_ENDPOINT is not set: no real CRI runtime to test against")
	}
	if os.Geteuid() != 0 {
		t.Skip("running containers needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := New(ctx, endpoint, 30*time.Second)
	if err != nil {
		t.Fatalf("New(%s): %v", endpoint, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	grace := int64(2)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-integration", Namespace: "default", UID: uuid.NewUUID()},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{
				{Name: "sleeper", Image: integrationImage, Command: []string{"sleep", "3600"}},
				{Name: "failer", Image: integrationImage, Command: []string{"sh", "-c", "exit 3"}},
			},
		},
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
		Hostname:     pod.Name,
		LogDirectory: t.TempDir(),
		Labels:       SandboxLabels(pod),
		Annotations:  SandboxAnnotations(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD},
		}},
	}

	ref, err := r.ImageRef(ctx, integrationImage)
	if err != nil {
		t.Fatalf("ImageRef(%s): %v", integrationImage, err)
	}
	if ref == "" {
		if ref, err = r.PullImage(ctx, integrationImage, nil, sbCfg); err != nil {
			t.Fatalf("PullImage(%s): %v", integrationImage, err)
		}
	}

	sbID, err := r.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := r.StopPodSandbox(ctx, sbID); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if err := r.RemovePodSandbox(ctx, sbID); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})

	ids := map[string]string{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cfg := &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:       &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: c.Image},
			Command:     c.Command,
			LogPath:     c.Name + "/0.log",
			Labels:      ContainerLabels(pod, c.Name),
			Annotations: ContainerAnnotations(pod, c, 0, false),
		}
		id, err := r.CreateContainer(ctx, sbID, cfg, sbCfg)
		if err != nil {
			t.Fatalf("CreateContainer(%s): %v", c.Name, err)
		}
		if err := r.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer(%s): %v", c.Name, err)
		}
		ids[c.Name] = id
	}

	// The failer exits on its own; wait for the runtime to notice.
	st := waitFor(ctx, t, r, pod.UID, func(st *PodStatus) bool {
		f := st.FindContainer("failer")
		return f != nil && f.State == ContainerExited
	})
	if len(st.Sandboxes) != 1 || st.Sandboxes[0].ID != sbID || st.Sandboxes[0].State != SandboxReady {
		t.Fatalf("sandboxes = %+v, want %s ready", st.Sandboxes, sbID)
	}
	if len(st.IPs()) == 0 || st.Sandboxes[0].HostNetwork {
		t.Errorf("sandbox IPs = %v hostNetwork %v, want a pod IP", st.IPs(), st.Sandboxes[0].HostNetwork)
	}
	if st.Name != pod.Name || st.Namespace != pod.Namespace {
		t.Errorf("pod name = %s/%s, want %s/%s", st.Namespace, st.Name, pod.Namespace, pod.Name)
	}
	s := st.FindContainer("sleeper")
	if s == nil || s.ID != ids["sleeper"] || s.State != ContainerRunning || s.StartedAt.IsZero() ||
		s.Hash != HashContainer(&pod.Spec.Containers[0]) || s.RestartCount != 0 || s.ImageRef == "" {
		t.Errorf("sleeper = %+v", s)
	}
	f := st.FindContainer("failer")
	if f.ExitCode != 3 || f.FinishedAt.IsZero() || f.LogPath == "" {
		t.Errorf("failer = %+v, want exit code 3 with finish time and log path", f)
	}
	t.Logf("failer exited: code %d reason %q; sandbox IPs %v", f.ExitCode, f.Reason, st.IPs())

	if err := r.StopContainer(ctx, ids["sleeper"], 2*time.Second); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st = waitFor(ctx, t, r, pod.UID, func(st *PodStatus) bool {
		s := st.FindContainer("sleeper")
		return s != nil && s.State == ContainerExited
	})
	t.Logf("sleeper stopped: code %d reason %q", st.FindContainer("sleeper").ExitCode, st.FindContainer("sleeper").Reason)

	pods, err := r.ListPods(ctx)
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	found := false
	for _, p := range pods {
		if p.UID == pod.UID {
			found = len(p.Sandboxes) == 1 && len(p.Containers) == 2
		}
	}
	if !found {
		t.Errorf("ListPods does not show pod %s with one sandbox and two containers", pod.UID)
	}

	// A full list again: the runtime's encoding of the unchanged sandbox
	// and containers is recognised, and their objects are the last list's.
	for _, kind := range []string{"sandbox", "container"} {
		list := func() map[string]any {
			out := map[string]any{}
			switch kind {
			case "sandbox":
				items, err := r.rs.ListPodSandbox(ctx, nil)
				if err != nil {
					t.Fatalf("ListPodSandbox: %v", err)
				}
				for _, it := range items {
					out[it.GetId()] = it
				}
			default:
				items, err := r.rs.ListContainers(ctx, nil)
				if err != nil {
					t.Fatalf("ListContainers: %v", err)
				}
				for _, it := range items {
					out[it.GetId()] = it
				}
			}
			return out
		}
		first, second := list(), list()
		want := []string{sbID}
		if kind == "container" {
			want = []string{ids["sleeper"], ids["failer"]}
		}
		for _, id := range want {
			if first[id] == nil || first[id] != second[id] {
				t.Errorf("%s %s: decoded anew by an unchanged full list (listed: %t, %t)", kind, id, first[id] != nil, second[id] != nil)
			}
		}
	}
}

// waitFor polls GetPodStatus until done holds or ctx ends.
func waitFor(ctx context.Context, t *testing.T, r *Runtime, uid types.UID, done func(*PodStatus) bool) *PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := r.GetPodStatus(ctx, uid)
		if err != nil {
			t.Fatalf("GetPodStatus: %v", err)
		}
		if done(st) {
			return st
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("pod %s did not reach the expected state; last status %+v", uid, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
