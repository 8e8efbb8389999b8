package metrics

import "github.com/prometheus/client_golang/prometheus/collectors"

// The process and Go runtime series every Kubernetes component serves on
// /metrics, as upstream's registry does: process_* (CPU seconds, resident
// and virtual memory, open file descriptors, start time) and go_* (the
// classic MemStats series, goroutines, threads, and every runtime/metrics
// value, e.g. go_gc_cycles_total_gc_cycles_total). Dashboards and alerts
// written for the kubelet's job read them.
func init() {
	Registry.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsAll)),
	)
}
