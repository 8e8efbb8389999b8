package runtime

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

func TestDecodeContainerEvent(t *testing.T) {
	labels := map[string]string{LabelPodUID: "uid-1", LabelPodName: "web", LabelPodNamespace: "default", LabelContainerName: "app"}
	at := time.Date(2024, 1, 1, 0, 0, 1, 5, time.UTC)
	tests := []struct {
		name     string
		resp     *runtimeapi.ContainerEventResponse
		wantType ContainerEventType
		wantUID  string
		wantSB   int
		wantC    int
	}{
		{
			name: "stopped, with its sandbox",
			resp: &runtimeapi.ContainerEventResponse{
				ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, CreatedAt: at.UnixNano(),
				PodSandboxStatus:   &runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: labels},
				ContainersStatuses: []*runtimeapi.ContainerStatus{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: labels}},
			},
			wantType: ContainerStoppedEvent, wantUID: "uid-1", wantSB: 1, wantC: 1,
		},
		{
			name: "deleted, sandbox gone: the UID comes from a container",
			resp: &runtimeapi.ContainerEventResponse{
				ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT,
				ContainersStatuses: []*runtimeapi.ContainerStatus{nil, {Id: "c2", Labels: labels}},
			},
			wantType: ContainerDeletedEvent, wantUID: "uid-1", wantC: 1,
		},
		{
			name: "not ours",
			resp: &runtimeapi.ContainerEventResponse{
				ContainerId: "x", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
				PodSandboxStatus: &runtimeapi.PodSandboxStatus{Id: "other"},
			},
			wantType: ContainerCreatedEvent, wantSB: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := decodeContainerEvent(klog.Background(), tt.resp)
			if e.Type != tt.wantType || string(e.Pod.UID) != tt.wantUID || len(e.Pod.Sandboxes) != tt.wantSB || len(e.Pod.Containers) != tt.wantC {
				t.Errorf("got type %s uid %q, %d sandboxes, %d containers; want %s %q %d %d",
					e.Type, e.Pod.UID, len(e.Pod.Sandboxes), len(e.Pod.Containers), tt.wantType, tt.wantUID, tt.wantSB, tt.wantC)
			}
			if tt.resp.CreatedAt != 0 && !e.CreatedAt.Equal(at) {
				t.Errorf("CreatedAt = %v, want %v", e.CreatedAt, at)
			}
			for _, c := range e.Pod.Containers {
				if len(e.Pod.Sandboxes) > 0 && c.SandboxID != e.Pod.Sandboxes[0].ID {
					t.Errorf("container %s: sandbox %q, want %q", c.ID, c.SandboxID, e.Pod.Sandboxes[0].ID)
				}
			}
		})
	}
}
