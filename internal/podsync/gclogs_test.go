package podsync

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A crash-looping container's older dead instances are removed with their
// log files; the newest dead instance (the pod's lastState) and the
// running one keep theirs.
func TestDeadContainerLogsGoWithThem(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	// writeLogs writes the log file of every container the runtime has,
	// as the runtime would.
	writeLogs := func() {
		for _, c := range h.fake.Containers() {
			if c.LogPath == "" {
				t.Fatalf("container %s has no log path", c.ID)
			}
			if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(c.LogPath); err != nil {
				if err := os.WriteFile(c.LogPath, []byte("log\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var logs []string
	h.sync(pod)
	for i := 0; i < 3; i++ {
		writeLogs()
		c := h.running("app")
		logs = append(logs, c.LogPath)
		h.fake.SetExit(c.ID, 1, "Error")
		res := h.sync(pod)
		if res.RequeueAfter > 0 {
			h.clock.Step(res.RequeueAfter + time.Second)
			h.sync(pod)
		}
	}
	writeLogs()
	if n := len(h.containers("app")); n != 2 {
		t.Fatalf("app containers = %d, want the running one and the newest dead", n)
	}
	for i, p := range logs {
		_, err := os.Stat(p)
		switch {
		case i < len(logs)-1 && err == nil:
			t.Errorf("log %s of a removed dead container is still there", p)
		case i == len(logs)-1 && err != nil:
			t.Errorf("log of the newest dead container: %v", err)
		}
	}
}
