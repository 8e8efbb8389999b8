package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

func withEphemeral(names ...string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		for _, n := range names {
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "debug-" + n},
				TargetContainerName:      "app",
			})
		}
	}
}

// Ephemeral containers are reported in ephemeralContainerStatuses, sorted
// by name, waiting until they have a record, then running or terminated;
// a terminated one stays terminated whatever the pod's restart policy and
// whatever the sync loop says; they are never ready and decide neither the
// phase nor the conditions.
func TestComputeEphemeralContainerStatuses(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		records  []*runtime.ContainerStatus
		waiting  map[string]Waiting
		want     map[string]string // name → waiting reason, "running" or "terminated"
		wantExit map[string]int32
	}{
		{
			name: "not started yet",
			pod:  testPod(withEphemeral("dbg")),
			want: map[string]string{"dbg": ReasonContainerCreating},
		},
		{
			name:    "start failed",
			pod:     testPod(withEphemeral("dbg")),
			waiting: map[string]Waiting{"dbg": {Reason: "ErrImagePull", Message: "no such image"}},
			want:    map[string]string{"dbg": "ErrImagePull"},
		},
		{
			name:     "running and exited",
			pod:      testPod(withEphemeral("zz", "dbg")),
			records:  []*runtime.ContainerStatus{running("dbg", "e1", 0), exited("zz", "e2", 3, 0)},
			want:     map[string]string{"dbg": "running", "zz": "terminated"},
			wantExit: map[string]int32{"zz": 3},
		},
		{
			name:     "exited with restartPolicy Always and a stray waiting reason",
			pod:      testPod(withEphemeral("dbg")),
			records:  []*runtime.ContainerStatus{exited("dbg", "e1", 1, 0)},
			waiting:  map[string]Waiting{"dbg": {Reason: "CrashLoopBackOff"}},
			want:     map[string]string{"dbg": "terminated"},
			wantExit: map[string]int32{"dbg": 1},
		},
		{
			name: "init containers still running",
			pod:  testPod(withInit("setup"), withEphemeral("dbg")),
			want: map[string]string{"dbg": ReasonPodInitializing},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := &runtime.PodStatus{UID: tt.pod.UID, Sandboxes: []*runtime.SandboxStatus{sandbox("10.0.0.5")},
				Containers: append([]*runtime.ContainerStatus{running("app", "c1", 0)}, tt.records...)}
			if len(tt.pod.Spec.InitContainers) > 0 {
				rs.Containers = tt.records
			}
			got := Compute(tt.pod, rs, Inputs{NodeIPs: []string{"192.0.2.1"}, Now: now, Waiting: tt.waiting})
			if len(got.EphemeralContainerStatuses) != len(tt.want) {
				t.Fatalf("ephemeral statuses %+v, want %d", got.EphemeralContainerStatuses, len(tt.want))
			}
			for i, st := range got.EphemeralContainerStatuses {
				if i > 0 && got.EphemeralContainerStatuses[i-1].Name > st.Name {
					t.Errorf("statuses not sorted by name: %s before %s", got.EphemeralContainerStatuses[i-1].Name, st.Name)
				}
				var state string
				switch {
				case st.State.Running != nil:
					state = "running"
				case st.State.Terminated != nil:
					state = "terminated"
					if st.State.Terminated.ExitCode != tt.wantExit[st.Name] {
						t.Errorf("%s exit code %d, want %d", st.Name, st.State.Terminated.ExitCode, tt.wantExit[st.Name])
					}
				case st.State.Waiting != nil:
					state = st.State.Waiting.Reason
				}
				if state != tt.want[st.Name] {
					t.Errorf("%s state %q, want %q (%+v)", st.Name, state, tt.want[st.Name], st.State)
				}
				if st.Ready {
					t.Errorf("%s is ready; ephemeral containers never are", st.Name)
				}
				if st.Image != "debug-"+st.Name {
					t.Errorf("%s image %q", st.Name, st.Image)
				}
			}
			for _, cs := range got.ContainerStatuses {
				if cs.Name != "app" {
					t.Errorf("container statuses name %s", cs.Name)
				}
			}
			if len(tt.pod.Spec.InitContainers) == 0 && (got.Phase != v1.PodRunning || conditionStatus(got, v1.PodReady) != v1.ConditionTrue) {
				t.Errorf("phase %s, Ready %s: want Running and Ready whatever the ephemeral containers do", got.Phase, conditionStatus(got, v1.PodReady))
			}
		})
	}
}

func conditionStatus(s v1.PodStatus, ct v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}
