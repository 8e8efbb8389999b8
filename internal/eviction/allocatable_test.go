package eviction

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/heartlet/heartlet/internal/metrics"
)

// setPods gives the summary a pods system container: the kubepods cgroup
// limited to limitMi with the given working set.
func (f *fakeSummary) setPods(limitMi, workingSetMi uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s.Node.SystemContainers = []statsapi.ContainerStats{{
		Name:   statsapi.SystemContainerPods,
		Memory: &statsapi.MemoryStats{AvailableBytes: u64((limitMi - workingSetMi) << 20), WorkingSetBytes: u64(workingSetMi << 20)},
	}}
}

// TestAllocatableMemoryThreshold: with pods enforced, the pods nearing the
// kubepods limit are evicted for memory while the node as a whole still
// has plenty, as upstream's allocatableMemory.available does; without
// enforcement the same figures evict nothing.
func TestAllocatableMemoryThreshold(t *testing.T) {
	for _, tt := range []struct {
		name        string
		enforcePods bool
		wantKills   string
	}{
		{"pods enforced", true, "[hog/kill/keep=true/grace=1]"},
		{"pods not enforced", false, "[]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hog, calm := testPod("hog", 0, "10Mi"), testPod("calm", 0, "500Mi")
			h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}, EnforcePods: tt.enforcePods}, 5*time.Minute, calm, hog)
			before := testutil.ToFloat64(metrics.Evictions.WithLabelValues("allocatableMemory.available"))

			// 900Mi of the node free, the pods 50Mi below their 800Mi limit.
			h.summary.set(900, map[string]uint64{"hog": 600 << 20, "calm": 150 << 20})
			h.summary.setPods(800, 750)
			h.pass()
			if got := fmt.Sprint(h.killed()); got != tt.wantKills {
				t.Fatalf("kills = %s, want %s", got, tt.wantKills)
			}
			if h.m.MemoryPressure() != tt.enforcePods || h.m.DiskPressure() {
				t.Errorf("memory/disk pressure = %v/%v, want %v/false", h.m.MemoryPressure(), h.m.DiskPressure(), tt.enforcePods)
			}
			if !tt.enforcePods {
				return
			}
			st, _ := h.status.GetPodStatus("hog")
			wantMsg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. " +
				"Container c was using 600Mi, request is 10Mi, has larger consumption of memory. "
			if st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != wantMsg {
				t.Errorf("status = %s %q %q, want Failed Evicted %q", st.Phase, st.Reason, st.Message, wantMsg)
			}
			if got := testutil.ToFloat64(metrics.Evictions.WithLabelValues("allocatableMemory.available")) - before; got != 1 {
				t.Errorf("kubelet_evictions{allocatableMemory.available} grew by %v, want 1", got)
			}
		})
	}
}

// TestRunPassesWhenTheAllocatableThresholdFires: the kubepods notifier is
// armed at the pods' usage where allocatableMemory.available would be
// crossed (limit less threshold plus the pods' inactive page cache), and
// its firing runs a pass at once.
func TestRunPassesWhenTheAllocatableThresholdFires(t *testing.T) {
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}, EnforcePods: true}, 0)
	cs := &countingSummary{calls: make(chan struct{}, 10)}
	cs.set(900, nil)
	cs.setPods(800, 500)
	cs.s.Node.SystemContainers[0].Memory.UsageBytes = u64(530 << 20) // 30 Mi of inactive page cache
	root, pods := &fakeNotifier{ch: make(chan struct{}, 1)}, &fakeNotifier{ch: make(chan struct{}, 1)}
	h.m.opts.Summary, h.m.opts.MemoryNotifier, h.m.opts.AllocatableNotifier = cs, root, pods
	runUntilNotified(t, h, cs, pods)
	pods.checkArmed(t, uint64(800-100+30)<<20)
}

// TestMemcgNotifierBelowNeedsCgroupV1: a hierarchy without cgroup v1
// memory files (cgroup v2, or none) gives no notifier, so the caller
// warns and reads memory every interval.
func TestMemcgNotifierBelowNeedsCgroupV1(t *testing.T) {
	if n, err := NewMemcgNotifierBelow(t.TempDir(), "/kubepods"); err == nil || n != nil {
		t.Errorf("NewMemcgNotifierBelow on an empty directory = %v, %v; want an error", n, err)
	}
}
