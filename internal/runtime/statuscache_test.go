package runtime

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statusCalls counts the status calls since the last ResetCalls.
func (w *world) statusCalls() (sandbox, container int) {
	calls := w.srv.Calls()
	return countCalls(calls, "PodSandboxStatus"), countCalls(calls, "ContainerStatus")
}

// A pod start as the pod worker makes it (sandbox, its IPs, container
// created and started, the status reported, the relist, the sync the
// relist triggers) reads the sandbox's status once and the container's
// once.
func TestPodStartReadsEachStatusOnce(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}
	pod := testPod("web", "uid-web")
	w.srv.ResetCalls()
	sb := w.sandbox(t, pod, 0, false)
	ips, err := w.r.SandboxIPs(ctx, sb)
	if err != nil {
		t.Fatal(err)
	}
	w.container(t, pod, sb, &pod.Spec.Containers[0], 0, false, true)
	for _, step := range []string{"after the start", "relist", "after the relist"} {
		if step == "relist" {
			if _, err := w.r.ListPods(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		st, err := w.r.GetPodStatus(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Sandboxes) != 1 || st.Sandboxes[0].State != SandboxReady || len(st.Sandboxes[0].IPs) == 0 || st.Sandboxes[0].IPs[0] != ips[0] {
			t.Fatalf("%s: sandboxes %+v, want one ready with IPs %v", step, st.Sandboxes, ips)
		}
		if len(st.Containers) != 1 || st.Containers[0].State != ContainerRunning || st.Containers[0].StartedAt.IsZero() {
			t.Fatalf("%s: containers %+v, want one running with its start time", step, st.Containers)
		}
	}
	if sb, c := w.statusCalls(); sb != 1 || c != 1 {
		t.Errorf("status calls: %d sandbox, %d container; want 1 and 1", sb, c)
	}
}

// A status read is reported until the object's state changes as the
// Runtime knows it: at once for what is done through it or reported by an
// event, at the next full list for what the runtime does on its own.
func TestStatusFollowsState(t *testing.T) {
	tests := []struct {
		name string
		// change changes the pod's sandbox sb or container c; it returns
		// whether GetPodStatus is to see the change without a full
		// list.
		change func(t *testing.T, w *world, sb, c string) (atOnce bool)
		// check checks the status after the change is seen.
		check func(t *testing.T, st *PodStatus)
	}{
		{
			name: "container exits on its own",
			change: func(t *testing.T, w *world, _, c string) bool {
				w.srv.SetExit(c, 3, "Error")
				return false
			},
			check: func(t *testing.T, st *PodStatus) {
				if c := st.Containers[0]; c.State != ContainerExited || c.ExitCode != 3 || c.Reason != "Error" {
					t.Errorf("container %s exit %d %q, want exited 3 Error", c.State, c.ExitCode, c.Reason)
				}
			},
		},
		{
			name: "sandbox stopped by another client",
			change: func(t *testing.T, w *world, sb, _ string) bool {
				other := NewFromServices(w.r.rs, w.r.is)
				if err := other.StopPodSandbox(context.Background(), sb); err != nil {
					t.Fatal(err)
				}
				return false
			},
			check: sandboxStopped,
		},
		{
			name: "container stopped through the Runtime",
			change: func(t *testing.T, w *world, _, c string) bool {
				w.srv.SetStopExitCode(c, 143)
				if err := w.r.StopContainer(context.Background(), c, 0); err != nil {
					t.Fatal(err)
				}
				return true
			},
			check: func(t *testing.T, st *PodStatus) {
				if c := st.Containers[0]; c.State != ContainerExited || c.ExitCode != 143 {
					t.Errorf("container %s exit %d, want exited 143", c.State, c.ExitCode)
				}
			},
		},
		{
			name: "sandbox stopped through the Runtime",
			change: func(t *testing.T, w *world, sb, _ string) bool {
				if err := w.r.StopPodSandbox(context.Background(), sb); err != nil {
					t.Fatal(err)
				}
				return true
			},
			check: sandboxStopped,
		},
		{
			name: "container exit reported by an event",
			change: func(t *testing.T, w *world, _, c string) bool {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				seen := make(chan ContainerEvent, 1)
				done := make(chan error, 1)
				go func() {
					done <- w.r.WatchContainerEvents(ctx, nil, func(e ContainerEvent) {
						if e.Type == ContainerStoppedEvent {
							select {
							case seen <- e:
							default:
							}
						}
					})
				}()
				if err := w.srv.WaitEventStreams(ctx, 1); err != nil {
					t.Fatal(err)
				}
				w.srv.SetExit(c, 4, "Error")
				select {
				case <-seen:
				case err := <-done:
					t.Fatalf("event stream ended: %v", err)
				case <-time.After(10 * time.Second):
					t.Fatal("no stopped event")
				}
				return true
			},
			check: func(t *testing.T, st *PodStatus) {
				if c := st.Containers[0]; c.State != ContainerExited || c.ExitCode != 4 {
					t.Errorf("container %s exit %d, want exited 4", c.State, c.ExitCode)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, pod, sb, c := runningPodRead(t)
			ctx := context.Background()
			atOnce := tc.change(t, w, sb, c)
			if !atOnce {
				st, err := w.r.GetPodStatus(ctx, pod.UID)
				if err != nil {
					t.Fatal(err)
				}
				if st.Sandboxes[0].State != SandboxReady || st.Containers[0].State != ContainerRunning {
					t.Errorf("before a full list: sandbox %s, container %s; want the statuses read before (ready, running)", st.Sandboxes[0].State, st.Containers[0].State)
				}
				if _, err := w.r.ListPods(ctx); err != nil {
					t.Fatal(err)
				}
			}
			st, err := w.r.GetPodStatus(ctx, pod.UID)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Sandboxes) != 1 || len(st.Containers) != 1 {
				t.Fatalf("status %+v, want one sandbox and one container", st)
			}
			tc.check(t, st)
		})
	}
}

// runningPodRead makes a pod with a running container, relists and reads
// its status once; it returns the pod, its sandbox and container IDs.
func runningPodRead(t *testing.T) (w *world, pod *v1.Pod, sb, c string) {
	t.Helper()
	w = newWorld(t)
	ctx := context.Background()
	pod = testPod("web", "uid-web")
	sb = w.sandbox(t, pod, 0, false)
	c = w.container(t, pod, sb, &pod.Spec.Containers[0], 0, false, true)
	if _, err := w.r.ListPods(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.GetPodStatus(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	return w, pod, sb, c
}

// sandboxStopped checks that the pod's sandbox is not ready and its
// container exited.
func sandboxStopped(t *testing.T, st *PodStatus) {
	t.Helper()
	if st.Sandboxes[0].State != SandboxNotReady || st.Containers[0].State != ContainerExited {
		t.Errorf("sandbox %s, container %s; want not ready and exited", st.Sandboxes[0].State, st.Containers[0].State)
	}
}

// A container's resources change with its state unchanged: its status is
// read again after UpdateContainerResources.
func TestStatusReadAfterResourceUpdate(t *testing.T) {
	w, pod, _, c := runningPodRead(t)
	ctx := context.Background()
	if err := w.r.UpdateContainerResources(ctx, c, &runtimeapi.LinuxContainerResources{CpuShares: 512}); err != nil {
		t.Fatal(err)
	}
	w.srv.ResetCalls()
	if _, err := w.r.GetPodStatus(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if sb, c := w.statusCalls(); sb != 0 || c != 1 {
		t.Errorf("status calls after the update: %d sandbox, %d container; want 0 and 1", sb, c)
	}
}

// A deleted event forgets the container at once; the other statuses the
// event carries are still learnt.
func TestDeletedEventForgetsContainer(t *testing.T) {
	w, pod, sb, c := runningPodRead(t)
	ctx := context.Background()
	w.r.learnEvent(&runtimeapi.ContainerEventResponse{
		ContainerId:        c,
		ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
		PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Id: sb, State: runtimeapi.PodSandboxState_SANDBOX_READY},
		ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: c, State: runtimeapi.ContainerState_CONTAINER_EXITED}},
	})
	w.srv.ResetCalls()
	st, err := w.r.GetPodStatus(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Containers) != 0 || len(st.Sandboxes) != 1 {
		t.Errorf("status after the deleted event: %d sandboxes, %d containers; want 1 and 0", len(st.Sandboxes), len(st.Containers))
	}
	if sb, c := w.statusCalls(); sb != 0 || c != 0 {
		t.Errorf("status calls: %d sandbox, %d container; want none (the sandbox's state is unchanged)", sb, c)
	}
}
