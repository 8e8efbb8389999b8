package eviction

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestMemoryUsageThreshold(t *testing.T) {
	const mi = uint64(1 << 20)
	summary := &statsapi.Summary{Node: statsapi.NodeStats{Memory: &statsapi.MemoryStats{
		UsageBytes: u64(800 * mi), WorkingSetBytes: u64(600 * mi), AvailableBytes: u64(424 * mi),
	}}}
	tests := []struct {
		name   string
		cfg    Config
		want   uint64
		wantOK bool
	}{
		{"the highest memory threshold is crossed first", Config{
			Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			Soft: map[string]string{"memory.available": "300Mi"}, SoftGracePeriod: map[string]string{"memory.available": "1m"},
		}, (1024 - 300 + 200) * mi, true},
		{"percentage of capacity", Config{Hard: map[string]string{"memory.available": "50%"}}, (1024 - 512 + 200) * mi, true},
		{"no memory threshold", Config{Hard: map[string]string{"nodefs.available": "10%"}}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := MemoryUsageThreshold(mustThresholds(t, tt.cfg), summary)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("MemoryUsageThreshold = %d Mi, %v; want %d Mi, %v", got/mi, ok, tt.want/mi, tt.wantOK)
			}
		})
	}
	if _, ok := MemoryUsageThreshold(mustThresholds(t, tests[0].cfg), &statsapi.Summary{}); ok {
		t.Errorf("a threshold without memory figures")
	}
}

type fakeNotifier struct {
	mu     sync.Mutex
	ch     chan struct{}
	armed  []uint64
	closed bool
}

func (f *fakeNotifier) Arm(_ context.Context, usage uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = append(f.armed, usage)
	return nil
}

func (f *fakeNotifier) C() <-chan struct{} { return f.ch }

func (f *fakeNotifier) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

type countingSummary struct {
	fakeSummary
	calls chan struct{}
}

func (c *countingSummary) SummaryOf(ctx context.Context, pick func(types.UID) bool) (*statsapi.Summary, error) {
	c.calls <- struct{}{}
	return c.fakeSummary.SummaryOf(ctx, pick)
}

func TestRunPassesWhenTheMemoryThresholdFires(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, 0)
	cs := &countingSummary{calls: make(chan struct{}, 10)}
	cs.set(500, nil)
	cs.s.Node.Memory.UsageBytes = u64(600 << 20) // 76 Mi of inactive page cache
	n := &fakeNotifier{ch: make(chan struct{}, 1)}
	h.m.opts.Summary, h.m.opts.MemoryNotifier = cs, n
	runUntilNotified(t, h, cs, n)
	n.checkArmed(t, uint64(1024-100+76)<<20)
}

// runUntilNotified runs the manager, steps its clock one interval for the
// first pass, fires n for the next (the fake clock does not move, so only
// the notification can cause it), and stops the manager.
func runUntilNotified(t *testing.T, h *harness, cs *countingSummary, n *fakeNotifier) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	waitCall := func(what string) {
		t.Helper()
		select {
		case <-cs.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no pass %s", what)
		}
	}
	// The first pass comes one interval after the start.
	for !h.clk.HasWaiters() {
		runtime.Gosched()
	}
	select {
	case <-cs.calls:
		t.Fatal("a pass before the first interval")
	default:
	}
	h.clk.Step(DefaultInterval)
	waitCall("after the first interval")
	n.ch <- struct{}{}
	waitCall("after the notification")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// checkArmed: the notifier was armed at want first and closed when the
// manager stopped.
func (f *fakeNotifier) checkArmed(t *testing.T, want uint64) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.armed) == 0 || f.armed[0] != want {
		t.Errorf("armed at %v, want %d first", f.armed, want)
	}
	if !f.closed {
		t.Errorf("notifier not closed when Run returned")
	}
}

// TestMemcgNotifier arms a threshold on a memory cgroup of its own and
// crosses it with a process writing page cache in that cgroup.
func TestMemcgNotifier(t *testing.T) {
	root := "/sys/fs/cgroup/memory"
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a memory cgroup")
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.event_control")); err != nil {
		t.Skipf("no cgroup v1 memory hierarchy: %v", err)
	}
	dir := filepath.Join(root, fmt.Sprintf("heartlet-eviction-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fill")
	t.Cleanup(func() {
		os.Remove(file)
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	if _, err := NewMemcgNotifier(t.TempDir()); err == nil {
		t.Errorf("NewMemcgNotifier accepted a directory without memory cgroup files")
	}
	n, err := NewMemcgNotifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Arm(context.Background(), 4<<20); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.C():
		t.Fatal("notified before the threshold was crossed")
	default:
	}
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && dd if=/dev/zero of=%s bs=1M count=16 2>/dev/null", dir, file)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("fill: %v: %s", err, out)
	}
	select {
	case <-n.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after usage crossed the threshold")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestRunFollowsANotificationUp: the pass a notification runs may read
// stats from before the crossing, and the kernel does not notify again:
// one more pass comes a second later, then passes are an interval apart
// again.
func TestRunFollowsANotificationUp(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, 0)
	cs := &countingSummary{calls: make(chan struct{}, 10)}
	cs.set(500, nil)
	cs.s.Node.Memory.UsageBytes = u64(600 << 20)
	n := &fakeNotifier{ch: make(chan struct{}, 1)}
	h.m.opts.Summary, h.m.opts.MemoryNotifier = cs, n
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	waitCall := func(what string) {
		t.Helper()
		select {
		case <-cs.calls:
		case <-time.After(10 * time.Second):
			t.Fatalf("no pass %s", what)
		}
	}
	waitWaiting := func() {
		for !h.clk.HasWaiters() {
			runtime.Gosched()
		}
	}
	noCall := func(what string) {
		t.Helper()
		select {
		case <-cs.calls:
			t.Fatalf("a pass %s", what)
		default:
		}
	}
	waitWaiting()
	h.clk.Step(DefaultInterval)
	waitCall("after the first interval")
	n.ch <- struct{}{}
	waitCall("after the notification")
	waitWaiting()
	h.clk.Step(waitInterval)
	waitCall("a second after the notification's pass")
	waitWaiting()
	h.clk.Step(waitInterval)
	noCall("a second after the follow-up")
	h.clk.Step(DefaultInterval - waitInterval)
	waitCall("an interval after the follow-up")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}
