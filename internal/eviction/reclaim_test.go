package eviction

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fakeReclaimer frees what the test gives it and counts its calls.
type fakeReclaimer struct {
	mu         sync.Mutex
	dedicated  bool
	containers int
	bytes      uint64
	calls      []string
	// onReclaim runs after each call (the disk frees up).
	onReclaim func()
}

func (f *fakeReclaimer) DeleteUnusedContainers(context.Context) (int, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "containers")
	n, hook := f.containers, f.onReclaim
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return n, nil
}

func (f *fakeReclaimer) DeleteUnusedImages(context.Context) (uint64, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "images")
	b, hook := f.bytes, f.onReclaim
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	return b, nil
}

func (f *fakeReclaimer) ImageFsDedicated(context.Context) bool { return f.dedicated }

func (f *fakeReclaimer) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// setDisk makes nodefs and imagefs (one filesystem of 100 Gi) have
// availGi free, and the pods' usage.
func (f *fakeSummary) setDisk(availGi uint64, use map[string]uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := &statsapi.FsStats{AvailableBytes: u64(availGi << 30), CapacityBytes: u64(100 << 30), InodesFree: u64(1000), Inodes: u64(1000)}
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory:  &statsapi.MemoryStats{AvailableBytes: u64(900 << 20), WorkingSetBytes: u64(100 << 20)},
		Fs:      fs,
		Runtime: &statsapi.RuntimeStats{ImageFs: fs},
	}}
	for _, ps := range usageStats(use) {
		s.Pods = append(s.Pods, ps)
	}
	f.s = s
}

func TestReclaims(t *testing.T) {
	tests := []struct {
		signal                Signal
		dedicated             bool
		containers, wantImage bool
	}{
		{SignalNodeFsAvailable, false, true, true},
		{SignalNodeFsAvailable, true, true, false},
		{SignalNodeFsInodesFree, false, true, true},
		{SignalNodeFsInodesFree, true, true, false},
		{SignalImageFsAvailable, true, true, true},
		{SignalImageFsAvailable, false, true, true},
		{SignalImageFsInodesFree, true, true, true},
		{SignalMemoryAvailable, false, false, false},
		{SignalPIDAvailable, false, false, false},
	}
	for _, tt := range tests {
		c, i := Reclaims(tt.signal, tt.dedicated)
		if c != tt.containers || i != tt.wantImage {
			t.Errorf("Reclaims(%s, dedicated=%v) = %v, %v; want %v, %v", tt.signal, tt.dedicated, c, i, tt.containers, tt.wantImage)
		}
	}
}

// A disk signal first removes dead containers and unused images; when
// that frees the disk no pod is evicted, and DiskPressure is reported all
// the same.
func TestNodeLevelReclaimBeforeEviction(t *testing.T) {
	hog := testPod("hog", 0, "1Mi")
	h := newHarness(t, Config{Hard: map[string]string{"nodefs.available": "10%"}}, time.Minute, hog)
	rec := &fakeReclaimer{containers: 3, bytes: 5 << 30}
	rec.onReclaim = func() { h.summary.setDisk(20, map[string]uint64{"hog": 1 << 30}) }
	h.m.opts.Reclaimer = rec
	h.summary.setDisk(5, map[string]uint64{"hog": 1 << 30})
	h.pass()
	if got, want := rec.called(), []string{"containers", "images"}; !slices.Equal(got, want) {
		t.Errorf("reclaims = %v, want %v", got, want)
	}
	if got := h.killed(); len(got) != 0 {
		t.Errorf("killed %v although node-level reclaim freed the disk", got)
	}
	if !h.m.DiskPressure() {
		t.Error("no DiskPressure while the threshold was met")
	}
	h.clk.Step(3 * time.Second)
	h.pass()
	if got := h.killed(); len(got) != 0 {
		t.Errorf("killed %v on fresh stats below the threshold", got)
	}
	if got := rec.called(); len(got) != 2 {
		t.Errorf("reclaims = %v; want no second reclaim without pressure", got)
	}
}

// When reclaim frees nothing, the pod is evicted in the same pass; when it
// freed something but the threshold is still met on fresh stats, the next
// pass evicts without reclaiming again.
func TestEvictionAfterReclaimNotEnough(t *testing.T) {
	t.Run("nothing freed", func(t *testing.T) {
		hog := testPod("hog", 0, "1Mi")
		h := newHarness(t, Config{Hard: map[string]string{"imagefs.available": "10%"}}, time.Minute, hog)
		rec := &fakeReclaimer{dedicated: true}
		h.m.opts.Reclaimer = rec
		h.summary.setDisk(5, map[string]uint64{"hog": 1 << 30})
		h.pass()
		if got, want := rec.called(), []string{"containers", "images"}; !slices.Equal(got, want) {
			t.Errorf("reclaims = %v, want %v", got, want)
		}
		if got := h.killed(); len(got) != 1 {
			t.Errorf("killed %v, want the hog", got)
		}
	})
	t.Run("freed, still over", func(t *testing.T) {
		hog := testPod("hog", 0, "1Mi")
		h := newHarness(t, Config{Hard: map[string]string{"nodefs.available": "10%"}}, time.Minute, hog)
		rec := &fakeReclaimer{dedicated: true, containers: 1}
		h.m.opts.Reclaimer = rec
		h.summary.setDisk(5, map[string]uint64{"hog": 1 << 30})
		h.pass()
		if got := h.killed(); len(got) != 0 {
			t.Fatalf("killed %v before the stats after the reclaim", got)
		}
		// Within the settle period nothing happens.
		h.clk.Step(time.Second)
		h.pass()
		if got := h.killed(); len(got) != 0 {
			t.Fatalf("killed %v within the settle period", got)
		}
		h.clk.Step(2 * time.Second)
		h.pass()
		if got := rec.called(); !slices.Equal(got, []string{"containers"}) {
			t.Errorf("reclaims = %v; want one container reclaim only (nodefs, dedicated imagefs)", got)
		}
		if got := h.killed(); len(got) != 1 {
			t.Errorf("killed %v, want the hog once reclaim was not enough", got)
		}
	})
}

// Memory signals never reclaim on the node.
func TestNoNodeLevelReclaimForMemory(t *testing.T) {
	hog := testPod("hog", 0, "10Mi")
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, time.Minute, hog)
	rec := &fakeReclaimer{containers: 5, bytes: 1 << 30}
	h.m.opts.Reclaimer = rec
	h.summary.set(50, map[string]uint64{"hog": 500 << 20})
	h.pass()
	if got := rec.called(); len(got) != 0 {
		t.Errorf("reclaims = %v for a memory signal", got)
	}
	if got := h.killed(); len(got) != 1 {
		t.Errorf("killed %v, want the hog", got)
	}
}
