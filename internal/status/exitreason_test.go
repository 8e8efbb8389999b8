package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/heartlet/heartlet/internal/runtime"
)

// The terminated state of a container reports the runtime's exit code,
// reason and message as they are. containerd 1.6 (pkg/cri/server:
// container_status.go, events.go, container_start.go) gives "Completed"
// for exit 0, "Error" otherwise, "OOMKilled" after an OOM kill, and
// "StartError" with exit code 128 and the start error as message for a
// container it failed to start (its start time stays zero, which
// upstream's kubelet reports as the Unix epoch). Dockershim's
// "ContainerCannotRun" passes through the same way.
func TestTerminatedReasons(t *testing.T) {
	epoch := time.Unix(0, 0)
	tests := []struct {
		name        string
		code        int32
		reason      string
		message     string
		neverRan    bool
		wantReason  string
		wantMessage string
	}{
		{name: "success", code: 0, reason: "Completed", wantReason: "Completed"},
		{name: "failure", code: 1, reason: "Error", wantReason: "Error"},
		{name: "killed", code: 137, reason: "Error", wantReason: "Error"},
		{name: "oom", code: 137, reason: "OOMKilled", wantReason: "OOMKilled"},
		{
			name: "start error", code: 128, reason: "StartError", neverRan: true,
			message:     `failed to create containerd task: exec: "nonexistent": executable file not found in $PATH: unknown`,
			wantReason:  "StartError",
			wantMessage: `failed to create containerd task: exec: "nonexistent": executable file not found in $PATH: unknown`,
		},
		{name: "cannot run", code: 128, reason: "ContainerCannotRun", neverRan: true, message: "no such file", wantReason: "ContainerCannotRun", wantMessage: "no such file"},
		// A runtime that gives no reason: Completed or Error by exit code.
		{name: "no reason, zero", code: 0, wantReason: "Completed"},
		{name: "no reason, non-zero", code: 2, wantReason: "Error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &runtime.ContainerStatus{
				ID: "c1", Name: "app", SandboxID: "sb1", State: runtime.ContainerExited,
				CreatedAt: t0, StartedAt: t0.Add(time.Second), FinishedAt: t0.Add(time.Minute),
				ExitCode: tt.code, Reason: tt.reason, Message: tt.message,
			}
			if tt.neverRan {
				rec.StartedAt = time.Time{}
			}
			pod := testPod(withPolicy(v1.RestartPolicyNever))
			st := Compute(pod, &runtime.PodStatus{UID: pod.UID, Sandboxes: []*runtime.SandboxStatus{sandbox("10.0.0.2")}, Containers: []*runtime.ContainerStatus{rec}}, Inputs{Now: now})
			term := st.ContainerStatuses[0].State.Terminated
			if term == nil {
				t.Fatalf("state = %+v, want terminated", st.ContainerStatuses[0].State)
			}
			if term.ExitCode != tt.code || term.Reason != tt.wantReason || term.Message != tt.wantMessage {
				t.Errorf("terminated = exit %d reason %q message %q; want exit %d reason %q message %q",
					term.ExitCode, term.Reason, term.Message, tt.code, tt.wantReason, tt.wantMessage)
			}
			wantStart := t0.Add(time.Second)
			if tt.neverRan {
				wantStart = epoch
			}
			if !term.StartedAt.Time.Equal(wantStart) {
				t.Errorf("startedAt = %v, want %v", term.StartedAt, wantStart)
			}
			if !term.FinishedAt.Time.Equal(t0.Add(time.Minute)) {
				t.Errorf("finishedAt = %v, want %v", term.FinishedAt, t0.Add(time.Minute))
			}
			wantPhase := v1.PodSucceeded
			if tt.code != 0 {
				wantPhase = v1.PodFailed
			}
			if st.Phase != wantPhase {
				t.Errorf("phase = %s, want %s", st.Phase, wantPhase)
			}
			if tt.neverRan {
				b, err := json.Marshal(term)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), `"startedAt":"1970-01-01T00:00:00Z"`) {
					t.Errorf("terminated state JSON %s, want startedAt 1970-01-01T00:00:00Z", b)
				}
			}
		})
	}
}
