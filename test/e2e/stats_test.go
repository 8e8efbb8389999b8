//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

const (
	// statsPod allocates statsAllocMiB in container "main" and writes
	// statsVolumeMiB into its emptyDir from container "writer".
	statsPod       = "stats-mem"
	statsAllocMiB  = 64
	statsVolumeMiB = 2
	// topTimeout covers metrics-server's start, its first two scrapes (10 s
	// apart) and the aggregator noticing the APIService.
	topTimeout = 2 * time.Minute
)

// TestStats runs a cluster-mode heartlet and a pod that holds 64 MiB, and
// reads its usage through the kubelet API (proxied by the API server, as
// the admin), /metrics/resource and /metrics/cadvisor, and kubectl top
// through a metrics-server that the test runs itself.
func TestStats(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod(statsPod, func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		writer := shContainer("writer", fmt.Sprintf("dd if=/dev/urandom of=/data/blob bs=1M count=%d && sleep 3600", statsVolumeMiB))
		writer.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		p.Spec.Containers = []v1.Container{{
			Name:            "main",
			Image:           testserverImage,
			ImagePullPolicy: v1.PullIfNotPresent,
			Command:         []string{"/testserver", "serve", "-http-port", "0", "-alloc-mib", strconv.Itoa(statsAllocMiB)},
		}, writer}
	}))
	waitAPIPodRunning(t, h, statsPod)

	t.Run("summary", func(t *testing.T) { testStatsSummary(t) })
	t.Run("resource", func(t *testing.T) { testResourceMetrics(t) })
	t.Run("cadvisor", func(t *testing.T) { testCadvisorMetrics(t) })
	t.Run("top", func(t *testing.T) { testKubectlTop(t) })
}

// nodeProxy is the API server's proxy path to a kubelet API path.
func nodeProxy(path string) string {
	return "/api/v1/nodes/" + clusterNode + "/proxy" + path
}

func getSummary(t *testing.T, query string) (*statsapi.Summary, error) {
	t.Helper()
	out, err := kubectl("get", "--raw", nodeProxy("/stats/summary"+query))
	if err != nil {
		return nil, err
	}
	var s statsapi.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return nil, fmt.Errorf("decode summary: %w: %.300s", err, out)
	}
	return &s, nil
}

func summaryPod(s *statsapi.Summary, name string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name && s.Pods[i].PodRef.Namespace == "default" {
			return &s.Pods[i]
		}
	}
	return nil
}

func summaryContainer(p *statsapi.PodStats, name string) *statsapi.ContainerStats {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

func val(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func testStatsSummary(t *testing.T) {
	const mib = 1 << 20
	// The writer's data and main's allocation are there once both run;
	// CPU rates need a second collection.
	var s *statsapi.Summary
	var pod *statsapi.PodStats
	waitFor(t, time.Minute, "the summary to show the pod's memory, volume and CPU rates", func() (bool, string) {
		var err error
		if s, err = getSummary(t, ""); err != nil {
			return false, err.Error()
		}
		if pod = summaryPod(s, statsPod); pod == nil {
			return false, fmt.Sprintf("pod %s not in the summary (%d pods)", statsPod, len(s.Pods))
		}
		main := summaryContainer(pod, "main")
		vol := volumeStat(pod, "data")
		switch {
		case main == nil || main.Memory == nil || val(main.Memory.WorkingSetBytes) < statsAllocMiB*mib:
			return false, fmt.Sprintf("main: %s", describeContainerStats(main))
		case vol == nil || val(vol.UsedBytes) < statsVolumeMiB*mib:
			return false, fmt.Sprintf("volume data: %+v", vol)
		case s.Node.CPU == nil || s.Node.CPU.UsageNanoCores == nil || pod.CPU == nil || pod.CPU.UsageNanoCores == nil:
			return false, "no CPU rates yet"
		}
		return true, ""
	})

	n := s.Node
	if n.NodeName != clusterNode {
		t.Errorf("node name = %q, want %q", n.NodeName, clusterNode)
	}
	if n.CPU == nil || val(n.CPU.UsageCoreNanoSeconds) == 0 || n.CPU.Time.IsZero() {
		t.Errorf("node cpu = %+v, want a stamped non-zero usage", n.CPU)
	}
	if n.Memory == nil || val(n.Memory.WorkingSetBytes) == 0 || val(n.Memory.AvailableBytes) == 0 || val(n.Memory.UsageBytes) < val(n.Memory.WorkingSetBytes) {
		t.Errorf("node memory = %+v, want working set, available bytes and a usage at least the working set", n.Memory)
	}
	if n.Fs == nil || val(n.Fs.CapacityBytes) == 0 || val(n.Fs.UsedBytes) == 0 || val(n.Fs.Inodes) == 0 {
		t.Errorf("node fs = %+v, want the root dir's filesystem", n.Fs)
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil || val(n.Runtime.ImageFs.UsedBytes) == 0 || val(n.Runtime.ImageFs.CapacityBytes) == 0 {
		t.Errorf("node runtime = %+v, want the image filesystem's usage and capacity", n.Runtime)
	}
	if n.Network == nil || len(n.Network.Interfaces) == 0 || val(n.Network.RxBytes) == 0 {
		t.Errorf("node network = %+v, want the host's interfaces", n.Network)
	}
	if n.Rlimit == nil || n.Rlimit.MaxPID == nil || n.Rlimit.NumOfRunningProcesses == nil || *n.Rlimit.NumOfRunningProcesses <= 0 {
		t.Errorf("node rlimit = %+v, want maxpid and curproc", n.Rlimit)
	}

	if pod.PodRef.UID == "" || pod.StartTime.IsZero() {
		t.Errorf("pod ref %+v, start %v: want the UID and the sandbox's start", pod.PodRef, pod.StartTime)
	}
	if val(pod.CPU.UsageCoreNanoSeconds) == 0 {
		t.Errorf("pod cpu = %+v, want a non-zero usage", pod.CPU)
	}
	if pod.Memory == nil || val(pod.Memory.WorkingSetBytes) < statsAllocMiB*mib {
		t.Errorf("pod memory = %+v, want a working set of at least %d MiB", pod.Memory, statsAllocMiB)
	}
	if pod.Network == nil || pod.Network.Name != "eth0" || val(pod.Network.RxBytes) == 0 {
		t.Errorf("pod network = %+v, want the sandbox's eth0", pod.Network)
	}
	if pod.EphemeralStorage == nil || val(pod.EphemeralStorage.UsedBytes) < statsVolumeMiB*mib {
		t.Errorf("pod ephemeral storage = %+v, want at least the %d MiB in the emptyDir", pod.EphemeralStorage, statsVolumeMiB)
	}
	main := summaryContainer(pod, "main")
	// Usage and RSS come from the container's cgroup.
	if val(main.CPU.UsageCoreNanoSeconds) == 0 || val(main.Memory.RSSBytes) < statsAllocMiB*mib || val(main.Memory.UsageBytes) < val(main.Memory.WorkingSetBytes) {
		t.Errorf("main = %s, want CPU time and at least %d MiB RSS", describeContainerStats(main), statsAllocMiB)
	}
	if main.StartTime.IsZero() {
		t.Error("main has no start time")
	}
	if main.Rootfs == nil || main.Rootfs.UsedBytes == nil || val(main.Rootfs.CapacityBytes) == 0 {
		t.Errorf("main rootfs = %+v, want the writable layer's usage on the image filesystem", main.Rootfs)
	}
	if main.Logs == nil || val(main.Logs.UsedBytes) == 0 {
		t.Errorf("main logs = %+v, want its log's usage", main.Logs)
	}
	if w := summaryContainer(pod, "writer"); w == nil || w.Memory == nil || val(w.Memory.WorkingSetBytes) >= statsAllocMiB*mib {
		t.Errorf("writer = %s, want its own, smaller working set", describeContainerStats(w))
	}

	only, err := getSummary(t, "?only_cpu_and_memory=true")
	if err != nil {
		t.Fatal(err)
	}
	op := summaryPod(only, statsPod)
	if op == nil || op.CPU == nil || op.Memory == nil || op.Network != nil || op.VolumeStats != nil || only.Node.Fs != nil || only.Node.Network != nil {
		t.Errorf("only_cpu_and_memory: pod %+v, node fs %+v network %+v; want CPU and memory only", op, only.Node.Fs, only.Node.Network)
	}
}

func volumeStat(p *statsapi.PodStats, name string) *statsapi.VolumeStats {
	for i := range p.VolumeStats {
		if p.VolumeStats[i].Name == name {
			return &p.VolumeStats[i]
		}
	}
	return nil
}

func describeContainerStats(c *statsapi.ContainerStats) string {
	if c == nil {
		return "missing"
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// promSample is one series of the Prometheus text format.
type promSample struct {
	labels    map[string]string
	value     float64
	timestamp int64 // milliseconds; 0 when absent
}

// find returns the series of family name in a text exposition whose
// labels include want.
func find(t *testing.T, text, name string, want map[string]string) (promSample, bool) {
	t.Helper()
	for _, m := range families(t, []byte(text))[name].GetMetric() {
		s := promSample{labels: map[string]string{}, timestamp: m.GetTimestampMs()}
		for _, l := range m.GetLabel() {
			s.labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			s.value = m.GetGauge().GetValue()
		case m.Counter != nil:
			s.value = m.GetCounter().GetValue()
		default:
			s.value = m.GetUntyped().GetValue()
		}
		return s, true
	}
	return promSample{}, false
}

// recent reports whether a millisecond timestamp is within the last
// minute (and not in the future beyond clock skew).
func recent(ms int64) bool {
	d := time.Since(time.UnixMilli(ms))
	return d > -5*time.Second && d < time.Minute
}

func testResourceMetrics(t *testing.T) {
	text := mustKubectl(t, "get", "--raw", nodeProxy("/metrics/resource"))
	ctr := map[string]string{"container": "main", "pod": statsPod, "namespace": "default"}
	pod := map[string]string{"pod": statsPod, "namespace": "default"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
		stamp  bool
	}{
		{"node_cpu_usage_seconds_total", nil, 0, true},
		{"node_memory_working_set_bytes", nil, 0, true},
		{"container_cpu_usage_seconds_total", ctr, 0, true},
		{"container_memory_working_set_bytes", ctr, statsAllocMiB << 20, true},
		{"container_start_time_seconds", ctr, float64(time.Now().Add(-time.Hour).Unix()), false},
		{"pod_cpu_usage_seconds_total", pod, 0, true},
		{"pod_memory_working_set_bytes", pod, statsAllocMiB << 20, true},
	} {
		s, ok := find(t, text, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("/metrics/resource has no %s%v", c.name, c.labels)
		case s.value <= c.min:
			t.Errorf("%s%v = %g, want more than %g", c.name, c.labels, s.value, c.min)
		case c.stamp && !recent(s.timestamp):
			t.Errorf("%s%v has timestamp %d, want the time of the reading", c.name, c.labels, s.timestamp)
		case !c.stamp && s.timestamp != 0:
			t.Errorf("%s%v has a timestamp", c.name, c.labels)
		}
	}
	if s, ok := find(t, text, "resource_scrape_error", nil); !ok || s.value != 0 {
		t.Errorf("resource_scrape_error = %+v (found %v), want 0", s, ok)
	}
	if t.Failed() {
		t.Logf("/metrics/resource:\n%s", text)
	}
}

func testCadvisorMetrics(t *testing.T) {
	text := mustKubectl(t, "get", "--raw", nodeProxy("/metrics/cadvisor"))
	main := map[string]string{"container": "main", "pod": statsPod, "namespace": "default", "image": testserverImage}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"container_cpu_usage_seconds_total", main, 0},
		{"container_memory_working_set_bytes", main, statsAllocMiB << 20},
		{"container_memory_rss", main, statsAllocMiB << 20},
		{"container_memory_usage_bytes", main, statsAllocMiB << 20},
		{"container_fs_usage_bytes", main, -1},
		{"container_fs_limit_bytes", main, 0},
		{"container_network_receive_bytes_total", map[string]string{"pod": statsPod, "interface": "eth0"}, 0},
		{"container_network_transmit_bytes_total", map[string]string{"pod": statsPod, "interface": "eth0"}, -1},
		{"container_cpu_usage_seconds_total", map[string]string{"id": "/"}, 0},
	} {
		s, ok := find(t, text, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("/metrics/cadvisor has no %s%v", c.name, c.labels)
		case s.value <= c.min:
			t.Errorf("%s%v = %g, want more than %g", c.name, c.labels, s.value, c.min)
		}
	}
	// main's series name its cgroup below the pod's and its container ID.
	if s, ok := find(t, text, "container_memory_working_set_bytes", main); ok {
		if !strings.Contains(s.labels["id"], "/kubepods/") || !strings.HasSuffix(s.labels["id"], "/"+s.labels["name"]) || s.labels["name"] == "" {
			t.Errorf("main's labels = %v, want id <pod cgroup>/<container ID> and name the container ID", s.labels)
		}
	}
	if s, ok := find(t, text, "container_spec_memory_limit_bytes", main); !ok || s.timestamp != 0 {
		t.Errorf("container_spec_memory_limit_bytes of main: %+v (found %v), want an unstamped series", s, ok)
	}
	if t.Failed() {
		t.Logf("/metrics/cadvisor:\n%s", text)
	}
}

// metricsServerBin is the cached metrics-server (hack/setup.sh).
func metricsServerBin() string {
	if b := os.Getenv("HEARTLET_METRICS_SERVER_BIN"); b != "" {
		return b
	}
	return "/var/cache/heartlet/metrics-server/v0.8.0/bin/metrics-server"
}

// metricsServerRBAC is what metrics-server needs, as its own manifests
// grant it: read pods and nodes and the nodes' metrics, delegate
// authentication and authorization, read the requestheader CA; and the
// aggregated role that lets viewers read metrics.k8s.io.
const metricsServerRBAC = `apiVersion: v1
kind: ServiceAccount
metadata: {name: heartlet-e2e-metrics-server, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:heartlet-e2e-metrics-server"}
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "system:heartlet-e2e-aggregated-metrics-reader"
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: [metrics.k8s.io]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:heartlet-e2e-metrics-server"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:heartlet-e2e-metrics-server"}
subjects:
- {kind: ServiceAccount, name: heartlet-e2e-metrics-server, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "heartlet-e2e-metrics-server:system:auth-delegator"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects:
- {kind: ServiceAccount, name: heartlet-e2e-metrics-server, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: heartlet-e2e-metrics-server-auth-reader, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects:
- {kind: ServiceAccount, name: heartlet-e2e-metrics-server, namespace: kube-system}
`

// metricsServerAPI registers metrics.k8s.io with the aggregator: an
// APIService on a Service whose backend is metrics-server on the node's
// address. Without --enable-aggregator-routing the aggregator dials a
// ClusterIP Service's cluster IP, which nothing routes here, so the Service
// is then an ExternalName naming the node address; with it, a selectorless
// ClusterIP Service with an EndpointSlice.
func metricsServerAPI(hostIP string, port int, routing bool) string {
	svc := fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: heartlet-e2e-metrics-server, namespace: kube-system}
spec:
  type: ExternalName
  externalName: %q
  ports: [{name: https, port: %d, protocol: TCP}]
`, hostIP, port)
	if routing {
		svc = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: heartlet-e2e-metrics-server, namespace: kube-system}
spec:
  ports: [{name: https, port: %[2]d, targetPort: %[2]d, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: heartlet-e2e-metrics-server
  namespace: kube-system
  labels: {kubernetes.io/service-name: heartlet-e2e-metrics-server}
addressType: IPv4
endpoints: [{addresses: [%[1]q], conditions: {ready: true}}]
ports: [{name: https, port: %[2]d, protocol: TCP}]
`, hostIP, port)
	}
	return svc + fmt.Sprintf(`---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io}
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  insecureSkipTLSVerify: true
  service: {name: heartlet-e2e-metrics-server, namespace: kube-system, port: %d}
`, port)
}

// aggregatorRouting reports whether the control plane's kube-apiserver
// runs with --enable-aggregator-routing.
func aggregatorRouting(t *testing.T) bool {
	run := os.Getenv("HEARTLET_KUBE_RUN")
	if run == "" {
		run = "/run/heartlet-kube"
	}
	pid, err := os.ReadFile(filepath.Join(run, "kube-apiserver.pid"))
	if err != nil {
		t.Logf("kube-apiserver pid: %v; assuming no aggregator routing", err)
		return false
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "cmdline"))
	if err != nil {
		t.Logf("kube-apiserver command line: %v; assuming no aggregator routing", err)
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	for i, a := range args {
		switch {
		case a == "--enable-aggregator-routing=true":
			return true
		case a == "--enable-aggregator-routing" && (i+1 == len(args) || args[i+1] != "false"):
			return true
		}
	}
	return false
}

// startMetricsServer runs metrics-server as the test's own process,
// registered as metrics.k8s.io; everything is removed when the test ends,
// the APIService first so that the API's discovery never points at a
// stopped server.
func startMetricsServer(t *testing.T, hostIP string) {
	t.Helper()
	bin := metricsServerBin()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("metrics-server: %v (hack/setup.sh builds it)", err)
	}
	if _, err := kubectlIn([]byte(metricsServerRBAC), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectlIn([]byte(metricsServerRBAC), "delete", "--ignore-not-found", "-f", "-"); err != nil {
			t.Errorf("remove metrics-server RBAC: %v", err)
		}
	})
	token := strings.TrimSpace(mustKubectl(t, "create", "token", "-n", "kube-system", "heartlet-e2e-metrics-server", "--duration", "1h"))
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeTokenKubeconfig(t, kubeconfig, token)

	port := freePort(t)
	logPath := filepath.Join(dir, "metrics-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		"--bind-address", hostIP,
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--kubelet-insecure-tls",
		"--kubelet-preferred-address-types", "InternalIP",
		"--kubelet-use-node-status-port",
		"--metric-resolution", "10s",
		// It must be below the resolution.
		"--kubelet-request-timeout", "5s",
		"--v", "2",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start metrics-server: %v", err)
	}
	done := make(chan struct{})
	go func() { msErr = cmd.Wait(); logFile.Close(); close(done) }()
	msDone = done
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("metrics-server log:\n%s", tail(string(b), 60))
			}
		}
	})

	routing := aggregatorRouting(t)
	t.Logf("metrics-server on %s:%d; aggregator routing %v (service %s)", hostIP, port, routing, map[bool]string{true: "ClusterIP with an EndpointSlice", false: "ExternalName"}[routing])
	api := metricsServerAPI(hostIP, port, routing)
	if _, err := kubectlIn([]byte(api), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectlIn([]byte(api), "delete", "--ignore-not-found", "--wait=true", "-f", "-"); err != nil {
			t.Errorf("remove the metrics.k8s.io APIService: %v", err)
		}
	})
}

// writeTokenKubeconfig writes a kubeconfig for the control plane that
// authenticates with a bearer token.
func writeTokenKubeconfig(t *testing.T, path, token string) {
	t.Helper()
	server := "https://127.0.0.1:6443"
	if out, err := kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"); err == nil && out != "" {
		server = out
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority: %q}
users:
- name: metrics-server
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: metrics-server}
current-context: c
`, server, clusterCAFile(), token)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// nodeInternalIP is the node's InternalIP address.
func nodeInternalIP(t *testing.T) string {
	t.Helper()
	n, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && net.ParseIP(a.Address).To4() != nil {
			return a.Address
		}
	}
	t.Fatalf("node %s has no IPv4 InternalIP: %+v", clusterNode, n.Status.Addresses)
	return ""
}

// topRow runs kubectl top and returns the columns of the row named name.
func topRow(args ...string) ([]string, string, error) {
	out, err := kubectl(append([]string{"top"}, args...)...)
	if err != nil {
		return nil, out, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == clusterNode || f[0] == statsPod) {
			return f, out, nil
		}
	}
	return nil, out, fmt.Errorf("no row in %q", out)
}

// parseMi reads a kubectl top memory column ("66Mi").
func parseMi(s string) (int, bool) {
	v, ok := strings.CutSuffix(s, "Mi")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// msDone is closed when the metrics-server of the running test has
// exited, with msErr its exit error.
var (
	msDone chan struct{}
	msErr  error
)

// metricsServerExited fails t if metrics-server is no longer running.
func metricsServerExited(t *testing.T) {
	t.Helper()
	select {
	case <-msDone:
		t.Fatalf("metrics-server exited: %v", msErr)
	default:
	}
}

func testKubectlTop(t *testing.T) {
	startMetricsServer(t, nodeInternalIP(t))

	var node []string
	waitFor(t, topTimeout, "kubectl top node to show the node", func() (bool, string) {
		metricsServerExited(t)
		row, out, err := topRow("node", clusterNode)
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		node = row
		return len(row) >= 5, out
	})
	// NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%)
	t.Logf("kubectl top node: %v", node)
	if !strings.HasSuffix(node[1], "m") || node[1] == "0m" {
		t.Errorf("kubectl top node: CPU %q, want a non-zero millicore figure", node[1])
	}
	if mi, ok := parseMi(node[3]); !ok || mi < statsAllocMiB {
		t.Errorf("kubectl top node: memory %q, want at least %d Mi (the pod alone holds that)", node[3], statsAllocMiB)
	}

	var pod []string
	waitFor(t, topTimeout, "kubectl top pod to show the pod", func() (bool, string) {
		metricsServerExited(t)
		row, out, err := topRow("pod", "-n", "default", statsPod)
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		pod = row
		return len(row) >= 3, out
	})
	// NAME CPU(cores) MEMORY(bytes)
	t.Logf("kubectl top pod: %v", pod)
	if !strings.HasSuffix(pod[1], "m") {
		t.Errorf("kubectl top pod: CPU %q, want millicores", pod[1])
	}
	if mi, ok := parseMi(pod[2]); !ok || mi < statsAllocMiB {
		t.Errorf("kubectl top pod: memory %q, want at least %d Mi", pod[2], statsAllocMiB)
	}
	out := mustKubectl(t, "top", "pod", "-n", "default", statsPod, "--containers")
	if !strings.Contains(out, "main") || !strings.Contains(out, "writer") {
		t.Errorf("kubectl top pod --containers:\n%s\nwant main and writer", out)
	}
}
