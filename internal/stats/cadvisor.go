package stats

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// cAdvisor's labels: the container name in the pod spec, the cgroup (id),
// the image, the runtime's container ID (name), the pod's namespace and
// name. Network series add the interface, filesystem series the device.
var (
	cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}
	networkLabels  = append(append([]string(nil), cadvisorLabels...), "interface")
	fsLabels       = append(append([]string(nil), cadvisorLabels...), "device")
)

// sandboxContainerName is the container label of a pod sandbox's series,
// the one that carries the pod's network, as cAdvisor names it.
const sandboxContainerName = "POD"

func newCadvisorDesc(name, help string, labels []string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	cadvisorCPUUsage = newCadvisorDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed in seconds.", cadvisorLabels)
	cadvisorMemoryUsage = newCadvisorDesc("container_memory_usage_bytes",
		"Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels)
	cadvisorMemoryWorkingSet = newCadvisorDesc("container_memory_working_set_bytes",
		"Current working set in bytes.", cadvisorLabels)
	cadvisorMemoryRSS = newCadvisorDesc("container_memory_rss",
		"Size of RSS in bytes.", cadvisorLabels)
	cadvisorMemoryCache = newCadvisorDesc("container_memory_cache",
		"Number of bytes of page cache memory.", cadvisorLabels)
	cadvisorSpecMemoryLimit = newCadvisorDesc("container_spec_memory_limit_bytes",
		"Memory limit for the container.", cadvisorLabels)
	cadvisorStartTime = newCadvisorDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds.", cadvisorLabels)
	cadvisorFsUsage = newCadvisorDesc("container_fs_usage_bytes",
		"Number of bytes that are consumed by the container on this filesystem.", fsLabels)
	cadvisorFsLimit = newCadvisorDesc("container_fs_limit_bytes",
		"Number of bytes that can be consumed by the container on this filesystem.", fsLabels)
	cadvisorRxBytes = newCadvisorDesc("container_network_receive_bytes_total",
		"Cumulative count of bytes received", networkLabels)
	cadvisorTxBytes = newCadvisorDesc("container_network_transmit_bytes_total",
		"Cumulative count of bytes transmitted", networkLabels)
	cadvisorRxPackets = newCadvisorDesc("container_network_receive_packets_total",
		"Cumulative count of packets received", networkLabels)
	cadvisorTxPackets = newCadvisorDesc("container_network_transmit_packets_total",
		"Cumulative count of packets transmitted", networkLabels)
	cadvisorRxErrors = newCadvisorDesc("container_network_receive_errors_total",
		"Cumulative count of errors encountered while receiving", networkLabels)
	cadvisorTxErrors = newCadvisorDesc("container_network_transmit_errors_total",
		"Cumulative count of errors encountered while transmitting", networkLabels)
	cadvisorRxDropped = newCadvisorDesc("container_network_receive_packets_dropped_total",
		"Cumulative count of packets dropped while receiving", networkLabels)
	cadvisorTxDropped = newCadvisorDesc("container_network_transmit_packets_dropped_total",
		"Cumulative count of packets dropped while transmitting", networkLabels)
	cadvisorScrapeError = newCadvisorDesc("container_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil)
)

// CadvisorMetricsHandler serves /metrics/cadvisor: cAdvisor's container
// series for the node's root cgroup ("/"), each pod cgroup, each pod's
// sandbox (its network) and each container, from a full collection.
func (p *Provider) CadvisorMetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := p.collect(r.Context(), true)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Failed to collect cAdvisor metrics")
		}
		serveCollector(w, r, &cadvisorCollector{snap: s})
	})
}

type cadvisorCollector struct {
	snap *snapshot
}

func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		cadvisorCPUUsage, cadvisorMemoryUsage, cadvisorMemoryWorkingSet, cadvisorMemoryRSS, cadvisorMemoryCache,
		cadvisorSpecMemoryLimit, cadvisorStartTime, cadvisorFsUsage, cadvisorFsLimit,
		cadvisorRxBytes, cadvisorTxBytes, cadvisorRxPackets, cadvisorTxPackets,
		cadvisorRxErrors, cadvisorTxErrors, cadvisorRxDropped, cadvisorTxDropped, cadvisorScrapeError,
	} {
		ch <- d
	}
}

// cadvisorEntity is one cgroup (or sandbox, or container) with its
// labels and figures.
type cadvisorEntity struct {
	labels []string // cadvisorLabels order
	start  time.Time
	cpu    *statsapi.CPUStats
	memory *statsapi.MemoryStats
	cg     *cgroupStats
	ifaces []ifaceStats
	netAt  time.Time
	fs     *statsapi.FsStats
	device string
}

func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	failed := 0.0
	if c.snap == nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(cadvisorScrapeError, prometheus.GaugeValue, failed)
	if c.snap == nil {
		return
	}
	sum := c.snap.summary
	node := cadvisorEntity{
		labels: []string{"", "/", "", "", "", ""},
		start:  sum.Node.StartTime.Time,
		cpu:    sum.Node.CPU,
		memory: sum.Node.Memory,
		cg:     c.snap.node.cg,
		ifaces: c.snap.node.ifaces,
		fs:     sum.Node.Fs,
		device: c.snap.node.rootDevice,
	}
	if sum.Node.Network != nil {
		node.netAt = sum.Node.Network.Time.Time
	}
	emitEntity(ch, node)
	for i, pod := range sum.Pods {
		meta := c.snap.pods[i]
		ns, name := pod.PodRef.Namespace, pod.PodRef.Name
		if meta.cgroup != "" {
			emitEntity(ch, cadvisorEntity{
				labels: []string{"", meta.cgroup, "", "", ns, name},
				start:  pod.StartTime.Time,
				cpu:    pod.CPU,
				memory: pod.Memory,
				cg:     meta.cg,
			})
		}
		if pod.Network != nil {
			emitEntity(ch, cadvisorEntity{
				labels: []string{sandboxContainerName, cgroupOrID(meta.cgroup, meta.sandboxID), "", meta.sandboxID, ns, name},
				start:  pod.StartTime.Time,
				ifaces: meta.ifaces,
				netAt:  pod.Network.Time.Time,
			})
		}
		for j, ctr := range pod.Containers {
			cm := meta.containers[j]
			id := cm.cgroup
			if id == "" {
				id = cgroupOrID(meta.cgroup, cm.id)
			}
			emitEntity(ch, cadvisorEntity{
				labels: []string{ctr.Name, id, cm.image, cm.id, ns, name},
				start:  ctr.StartTime.Time,
				cpu:    ctr.CPU,
				memory: ctr.Memory,
				cg:     cm.cg,
				fs:     ctr.Rootfs,
				device: cm.fsDevice,
			})
		}
	}
}

// cgroupOrID is the cgroup a runtime object of a pod lives in: below the
// pod's cgroup, or named by its ID alone when the pod has none.
func cgroupOrID(podCgroup, id string) string {
	if podCgroup == "" {
		return "/" + id
	}
	return podCgroup + "/" + id
}

func emitEntity(ch chan<- prometheus.Metric, e cadvisorEntity) {
	stamped := func(at time.Time, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		m := prometheus.MustNewConstMetric(d, t, v, labels...)
		if !at.IsZero() {
			m = prometheus.NewMetricWithTimestamp(at, m)
		}
		ch <- m
	}
	if !e.start.IsZero() && e.start.Unix() > 0 {
		ch <- prometheus.MustNewConstMetric(cadvisorStartTime, prometheus.GaugeValue,
			float64(e.start.UnixNano())/float64(time.Second), e.labels...)
	}
	if e.cpu != nil && e.cpu.UsageCoreNanoSeconds != nil {
		stamped(e.cpu.Time.Time, cadvisorCPUUsage, prometheus.CounterValue, float64(*e.cpu.UsageCoreNanoSeconds)/float64(time.Second), e.labels...)
	}
	if m := e.memory; m != nil {
		at := m.Time.Time
		if m.WorkingSetBytes != nil {
			stamped(at, cadvisorMemoryWorkingSet, prometheus.GaugeValue, float64(*m.WorkingSetBytes), e.labels...)
		}
		if m.UsageBytes != nil {
			stamped(at, cadvisorMemoryUsage, prometheus.GaugeValue, float64(*m.UsageBytes), e.labels...)
		}
		if m.RSSBytes != nil {
			stamped(at, cadvisorMemoryRSS, prometheus.GaugeValue, float64(*m.RSSBytes), e.labels...)
		}
		if e.cg != nil && e.cg.hasMemory {
			stamped(at, cadvisorMemoryCache, prometheus.GaugeValue, float64(e.cg.cache), e.labels...)
		}
	}
	if e.cg != nil && e.cg.hasMemory {
		// 0 is "no limit", as cAdvisor reports an unlimited cgroup.
		ch <- prometheus.MustNewConstMetric(cadvisorSpecMemoryLimit, prometheus.GaugeValue, float64(e.cg.limit), e.labels...)
	}
	if e.fs != nil && e.fs.UsedBytes != nil {
		labels := append(append([]string(nil), e.labels...), e.device)
		stamped(e.fs.Time.Time, cadvisorFsUsage, prometheus.GaugeValue, float64(*e.fs.UsedBytes), labels...)
		if e.fs.CapacityBytes != nil {
			stamped(e.fs.Time.Time, cadvisorFsLimit, prometheus.GaugeValue, float64(*e.fs.CapacityBytes), labels...)
		}
	}
	for _, it := range e.ifaces {
		labels := append(append([]string(nil), e.labels...), it.name)
		for _, s := range []struct {
			d *prometheus.Desc
			v uint64
		}{
			{cadvisorRxBytes, it.rxBytes}, {cadvisorTxBytes, it.txBytes},
			{cadvisorRxPackets, it.rxPackets}, {cadvisorTxPackets, it.txPackets},
			{cadvisorRxErrors, it.rxErrors}, {cadvisorTxErrors, it.txErrors},
			{cadvisorRxDropped, it.rxDropped}, {cadvisorTxDropped, it.txDropped},
		} {
			stamped(e.netAt, s.d, prometheus.CounterValue, float64(s.v), labels...)
		}
	}
}
