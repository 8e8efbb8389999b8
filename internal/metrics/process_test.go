package metrics

import "testing"

// The registry serves the process and Go runtime series dashboards for
// the kubelet read, with values that describe this process.
func TestProcessAndGoSeries(t *testing.T) {
	byName := gatherByName(t)
	value := func(name string) (float64, bool) {
		mf := byName[name]
		if mf == nil || len(mf.GetMetric()) == 0 {
			return 0, false
		}
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		}
		return 0, false
	}
	for _, tc := range []struct {
		name string
		min  float64
	}{
		{"process_resident_memory_bytes", 1 << 20},
		{"process_open_fds", 3},
		{"process_start_time_seconds", 1},
		{"process_cpu_seconds_total", 0},
		{"go_goroutines", 1},
		{"go_threads", 1},
		{"go_memstats_alloc_bytes_total", 1},
		{"go_memstats_heap_inuse_bytes", 1},
		{"go_gc_cycles_total_gc_cycles_total", 0},
		{"go_sched_gomaxprocs_threads", 1},
	} {
		v, ok := value(tc.name)
		if !ok {
			t.Errorf("%s: not gathered", tc.name)
			continue
		}
		if v < tc.min {
			t.Errorf("%s = %v, want at least %v", tc.name, v, tc.min)
		}
	}
}
