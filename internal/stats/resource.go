package stats

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The series of /metrics/resource, named and labelled as the kubelet's
// resource metrics, which metrics-server scrapes.
var (
	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative CPU time consumed by the node, in core-seconds", nil, nil)
	nodeMemoryWorkingSetDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node, in bytes", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative CPU time consumed by the container, in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryWorkingSetDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container, in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container, in seconds since the Unix epoch", []string{"container", "pod", "namespace"}, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative CPU time consumed by the pod, in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryWorkingSetDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod, in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"[ALPHA] 1 if getting the container metrics failed, 0 otherwise (deprecated: use resource_scrape_error)", nil, nil)
	resourceScrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if getting the container metrics failed, 0 otherwise", nil, nil)
)

// ResourceMetricsHandler serves /metrics/resource: the CPU and memory of
// the node, its pods and containers from a CPU-and-memory collection, each
// sample stamped with the time it was read, as the kubelet does.
func (p *Provider) ResourceMetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := p.collect(r.Context(), false)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to collect resource metrics")
		}
		serveCollector(w, r, &resourceCollector{snap: s})
	})
}

// serveCollector serves the metrics of one collector from a registry of
// its own.
func serveCollector(w http.ResponseWriter, r *http.Request, c prometheus.Collector) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// resourceCollector emits the resource metrics of one collection; a nil
// snapshot is a failed collection.
type resourceCollector struct {
	snap *snapshot
}

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		nodeCPUUsageDesc, nodeMemoryWorkingSetDesc, containerCPUUsageDesc, containerMemoryWorkingSetDesc,
		containerStartTimeDesc, podCPUUsageDesc, podMemoryWorkingSetDesc, scrapeErrorDesc, resourceScrapeErrorDesc,
	} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	if c.snap == nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(resourceScrapeErrorDesc, prometheus.GaugeValue, failed)
	if c.snap == nil {
		return
	}
	sum := c.snap.summary
	emitCPU(ch, nodeCPUUsageDesc, sum.Node.CPU)
	emitWorkingSet(ch, nodeMemoryWorkingSetDesc, sum.Node.Memory)
	for _, pod := range sum.Pods {
		for _, ctr := range pod.Containers {
			labels := []string{ctr.Name, pod.PodRef.Name, pod.PodRef.Namespace}
			if ctr.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(containerStartTimeDesc, prometheus.GaugeValue,
					float64(ctr.StartTime.UnixNano())/float64(time.Second), labels...)
			}
			emitCPU(ch, containerCPUUsageDesc, ctr.CPU, labels...)
			emitWorkingSet(ch, containerMemoryWorkingSetDesc, ctr.Memory, labels...)
		}
		emitCPU(ch, podCPUUsageDesc, pod.CPU, pod.PodRef.Name, pod.PodRef.Namespace)
		emitWorkingSet(ch, podMemoryWorkingSetDesc, pod.Memory, pod.PodRef.Name, pod.PodRef.Namespace)
	}
}

// emitCPU sends the cumulative CPU time in seconds, stamped.
func emitCPU(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), labels...))
}

// emitWorkingSet sends the memory working set, stamped.
func emitWorkingSet(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time,
		prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...))
}
