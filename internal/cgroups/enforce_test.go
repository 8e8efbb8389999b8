package cgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	testclock "k8s.io/utils/clock/testing"
)

// chanRecorder sends every event as "Kind/name type reason: message".
type chanRecorder chan string

func (c chanRecorder) Eventf(obj k8sruntime.Object, typ, reason, format string, args ...any) {
	name := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		name = ref.Kind + "/" + ref.Name
	}
	c <- fmt.Sprintf("%s %s %s: %s", name, typ, reason, fmt.Sprintf(format, args...))
}

func nextEvent(t *testing.T, c chanRecorder) string {
	t.Helper()
	select {
	case e := <-c:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return ""
	}
}

// TestEnforcerRetriesEveryPeriod: a kubepods limit the kernel refuses
// gives a FailedNodeAllocatableEnforcement warning on the node and is
// tried again every period (not before), and once it holds the node gets
// NodeAllocatableEnforced and Run ends; the limited reserved cgroups get
// theirs first.
func TestEnforcerRetriesEveryPeriod(t *testing.T) {
	ctx := context.Background()
	root := fakeV1(t)
	for _, c := range []string{"cpu", "memory"} {
		mustMkdir(t, filepath.Join(root, c, "system.slice"))
	}
	limit := filepath.Join(root, "memory/kubepods/memory.limit_in_bytes")
	mustMkdir(t, limit) // a directory where the file should be: every write fails
	m := newManager(t, Options{Root: root, NodeAllocatable: rl("memory", "1Gi"),
		ReservedCgroups: []ReservedCgroup{{Name: "system-reserved-compressible", Path: "/system.slice", Limits: rl("cpu", "1"), CompressibleOnly: true}}})
	if err := m.EnsureQOS(ctx); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := make(chanRecorder, 10)
	e := NewEnforcer(EnforcerOptions{Cgroups: m, Recorder: rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n1"}, Clock: clk})
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	if got, want := nextEvent(t, rec), "Node/n1 Normal NodeAllocatableEnforced: Updated limits on system reserved cgroup /system.slice"; got != want {
		t.Errorf("first event = %q, want %q", got, want)
	}
	got := nextEvent(t, rec)
	if want := `Node/n1 Warning FailedNodeAllocatableEnforcement: Failed to update Node Allocatable Limits "/kubepods": `; !strings.HasPrefix(got, want) {
		t.Errorf("event = %q, want %q…", got, want)
	}
	waitWaiter(t, clk)
	clk.Step(DefaultEnforceRetry - time.Second)
	if !clk.HasWaiters() {
		t.Fatal("retried before the period")
	}
	// Still refused at the next period: another warning.
	clk.Step(time.Second)
	if got := nextEvent(t, rec); !strings.Contains(got, "FailedNodeAllocatableEnforcement") {
		t.Errorf("event = %q, want a second warning", got)
	}
	if err := os.Remove(limit); err != nil {
		t.Fatal(err)
	}
	waitWaiter(t, clk)
	clk.Step(DefaultEnforceRetry)
	if got, want := nextEvent(t, rec), "Node/n1 Normal NodeAllocatableEnforced: Updated Node Allocatable limit across pods"; got != want {
		t.Errorf("event = %q, want %q", got, want)
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if got := readTrim(t, limit); got != "1073741824" {
		t.Errorf("kubepods memory limit = %q, want 1073741824", got)
	}
}

// TestEnforcerStopsWithItsContext: a limit never accepted does not keep
// Run past its context.
func TestEnforcerStopsWithItsContext(t *testing.T) {
	root := fakeV1(t)
	mustMkdir(t, filepath.Join(root, "memory/kubepods/memory.limit_in_bytes"))
	m := newManager(t, Options{Root: root, NodeAllocatable: rl("memory", "1Gi")})
	if err := m.EnsureQOS(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clk := testclock.NewFakeClock(time.Now())
	done := make(chan error, 1)
	go func() { done <- NewEnforcer(EnforcerOptions{Cgroups: m, Clock: clk}).Run(ctx) }()
	waitWaiter(t, clk)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if m.KubepodsLimitErr() == nil {
		t.Error("KubepodsLimitErr = nil for a refused limit")
	}
}

// waitWaiter waits until the enforcer waits on the clock.
func waitWaiter(t *testing.T, clk *testclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the enforcer never waited for its next attempt")
		}
		runtime.Gosched()
	}
}
