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
