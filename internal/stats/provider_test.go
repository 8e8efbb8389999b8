package stats

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

const testImage = "localhost:5000/busybox:1.35"

// fixture is a node with a fake runtime and fixture cgroup, proc, root
// and log directories:
//
//   - pod "a" (uid uidA): a Burstable pod with a pod cgroup and a
//     container cgroup for "main", a sandbox in its own network namespace,
//     an emptyDir "data" and a log;
//   - pod "b" (uid uidB): container "c" without any cgroup (figures from
//     the runtime);
//   - pod "gone": its sandbox stopped, left out of the summary.
type fixture struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	srv     *fakecri.Server
	rt      *runtime.Runtime
	cgroups string
	proc    string
	rootDir string
	logsDir string
	ctrA    string
	ctrB    string
	sbA     string
}

const (
	uidA    = "aaaa-1111"
	uidB    = "bbbb-2222"
	uidGone = "cccc-3333"
	pidA    = 4242
	podCgA  = "kubepods/burstable/pod" + uidA
	// Sizes the fixture writes, in bytes.
	volumeFileSize = 64 << 10
	logFileSize    = 16 << 10
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clocktesting.NewFakeClock(epoch)}
	f.srv = fakecri.Start(t, fakecri.WithClock(f.clock))
	f.srv.AddImage(testImage)
	rt, err := runtime.New(context.Background(), f.srv.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	f.rt = rt

	f.sbA, f.ctrA = f.runPod("a", uidA, "main", false)
	_, f.ctrB = f.runPod("b", uidB, "c", false)
	sbGone, _ := f.runPod("gone", uidGone, "x", false)
	if err := rt.StopPodSandbox(context.Background(), sbGone); err != nil {
		t.Fatal(err)
	}
	f.srv.SetSandboxPid(f.sbA, pidA)
	f.srv.SetContainerStats(f.ctrA, fakecri.ContainerUsage{CPUUsageNanos: 1, MemoryWorkingSet: 1, WritableLayerBytes: 4096, WritableLayerInodes: 3})
	f.srv.SetContainerStats(f.ctrB, fakecri.ContainerUsage{CPUUsageNanos: 2_000_000_000, MemoryWorkingSet: 3 << 20, WritableLayerBytes: 8192, WritableLayerInodes: 5})

	f.cgroups = t.TempDir()
	writeFiles(t, f.cgroups, map[string]string{
		"cpuacct/cpuacct.usage":                                      "100000000000\n",
		"memory/memory.usage_in_bytes":                               "2000000000\n",
		"memory/memory.stat":                                         "total_inactive_file 500000000\ntotal_rss 700000000\n",
		"cpuacct/kubepods/cpuacct.usage":                             "9000000000\n",
		"memory/kubepods/memory.usage_in_bytes":                      "300000000\n",
		"memory/kubepods/memory.stat":                                "total_inactive_file 100000000\n",
		"cpuacct/" + podCgA + "/cpuacct.usage":                       "5000000000\n",
		"memory/" + podCgA + "/memory.usage_in_bytes":                "80000000\n",
		"memory/" + podCgA + "/memory.stat":                          "total_inactive_file 1000000\ntotal_rss 70000000\ntotal_cache 9000000\ntotal_pgfault 10\n",
		"memory/" + podCgA + "/memory.limit_in_bytes":                "134217728\n",
		"cpuacct/" + podCgA + "/" + f.ctrA + "/cpuacct.usage":        "4000000000\n",
		"memory/" + podCgA + "/" + f.ctrA + "/memory.usage_in_bytes": "70000000\n",
		"memory/" + podCgA + "/" + f.ctrA + "/memory.stat":           "total_inactive_file 2000000\ntotal_rss 67108864\n",
		"memory/" + podCgA + "/" + f.ctrA + "/memory.limit_in_bytes": "134217728\n",
	})

	f.proc = t.TempDir()
	writeFiles(t, f.proc, map[string]string{
		"stat":                          "cpu 1 0 0 0 0 0 0 0 0 0\nbtime 1767000000\n",
		"meminfo":                       "MemTotal: 4000000 kB\nMemFree: 1000000 kB\nInactive(file): 100 kB\n",
		"net/dev":                       netDev,
		"net/route":                     "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\neth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\n",
		"sys/kernel/pid_max":            "4194304\n",
		strconv.Itoa(pidA) + "/net/dev": "Inter-|\n face |\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n  eth0: 1000 10 1 0 0 0 0 0 2000 20 2 0 0 0 0 0\n",
	})
	for pid, ns := range map[string]string{"self": "net:[4026531840]", strconv.Itoa(pidA): "net:[4026532000]"} {
		if err := os.MkdirAll(filepath.Join(f.proc, pid, "ns"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ns, filepath.Join(f.proc, pid, "ns", "net")); err != nil {
			t.Fatal(err)
		}
	}

	f.rootDir = t.TempDir()
	writeFiles(t, f.rootDir, map[string]string{
		"pods/" + uidA + "/volumes/kubernetes.io~empty-dir/data/file": string(make([]byte, volumeFileSize)),
	})
	f.logsDir = t.TempDir()
	writeFiles(t, f.logsDir, map[string]string{
		"default_a_" + uidA + "/main/0.log": string(make([]byte, logFileSize)),
	})
	return f
}

// runPod runs a sandbox and one started container through the runtime.
func (f *fixture) runPod(name, uid, container string, hostNetwork bool) (sandboxID, containerID string) {
	f.t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)}}
	mode := runtimeapi.NamespaceMode_POD
	if hostNetwork {
		mode = runtimeapi.NamespaceMode_NODE
	}
	sb := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels:   runtime.SandboxLabels(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: mode},
		}},
	}
	sandboxID, err := f.rt.RunPodSandbox(ctx, sb, "")
	if err != nil {
		f.t.Fatal(err)
	}
	c := &v1.Container{Name: container, Image: testImage}
	containerID, err = f.rt.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: container},
		Image:       &runtimeapi.ImageSpec{Image: testImage},
		Labels:      runtime.ContainerLabels(pod, container),
		Annotations: runtime.ContainerAnnotations(pod, c, 0, false),
	}, sb)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.rt.StartContainer(ctx, containerID); err != nil {
		f.t.Fatal(err)
	}
	return sandboxID, containerID
}

func (f *fixture) provider() *Provider {
	return New(Options{
		NodeName:   "node-a",
		Runtime:    f.rt,
		RootDir:    f.rootDir,
		PodLogsDir: f.logsDir,
		CgroupFS:   f.cgroups,
		ProcFS:     f.proc,
		Clock:      f.clock,
	})
}

func (f *fixture) write(rel, content string) {
	f.t.Helper()
	writeFiles(f.t, f.cgroups, map[string]string{rel: content})
}

func u64(p *uint64) any {
	if p == nil {
		return nil
	}
	return *p
}

func i64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// check compares named values and reports every mismatch.
func check(t *testing.T, what string, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func findPod(t *testing.T, s *statsapi.Summary, name string) *statsapi.PodStats {
	t.Helper()
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == name {
			return &s.Pods[i]
		}
	}
	t.Fatalf("pod %s not in the summary (%d pods)", name, len(s.Pods))
	return nil
}

func TestSummary(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	ctx := context.Background()
	s, err := p.Summary(ctx, false)
	if err != nil {
		t.Fatal(err)
	}

	n := s.Node
	check(t, "node name", n.NodeName, "node-a")
	check(t, "node start", n.StartTime.Unix(), int64(1767000000))
	check(t, "node cpu", u64(n.CPU.UsageCoreNanoSeconds), uint64(100000000000))
	check(t, "node cpu time", n.CPU.Time.Time.Equal(epoch), true)
	check(t, "node cpu rate before a second sample", n.CPU.UsageNanoCores == nil, true)
	check(t, "node memory usage", u64(n.Memory.UsageBytes), uint64(2000000000))
	check(t, "node working set", u64(n.Memory.WorkingSetBytes), uint64(1500000000))
	check(t, "node rss", u64(n.Memory.RSSBytes), uint64(700000000))
	check(t, "node available", u64(n.Memory.AvailableBytes), uint64(4000000*1024-1500000000))
	check(t, "node network", n.Network.Name, "eth0")
	check(t, "node eth0 rx", u64(n.Network.RxBytes), uint64(238735394))
	check(t, "node interfaces", len(n.Network.Interfaces), 2)
	if n.Fs == nil || n.Fs.CapacityBytes == nil || *n.Fs.CapacityBytes == 0 || n.Fs.UsedBytes == nil {
		t.Errorf("node fs = %+v, want the root dir's filesystem", n.Fs)
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil {
		t.Fatalf("node runtime = %+v, want the image filesystem", n.Runtime)
	}
	check(t, "image fs used", u64(n.Runtime.ImageFs.UsedBytes), uint64(1<<20))
	check(t, "container fs used", u64(n.Runtime.ContainerFs.UsedBytes), uint64(1<<20))
	check(t, "rlimit maxpid", i64(n.Rlimit.MaxPID), int64(4194304))
	if n.Rlimit.NumOfRunningProcesses == nil || *n.Rlimit.NumOfRunningProcesses <= 0 {
		t.Errorf("rlimit curproc = %v, want > 0", i64(n.Rlimit.NumOfRunningProcesses))
	}
	if len(n.SystemContainers) != 1 || n.SystemContainers[0].Name != statsapi.SystemContainerPods {
		t.Fatalf("system containers = %+v, want pods", n.SystemContainers)
	}
	check(t, "pods cpu", u64(n.SystemContainers[0].CPU.UsageCoreNanoSeconds), uint64(9000000000))
	check(t, "pods working set", u64(n.SystemContainers[0].Memory.WorkingSetBytes), uint64(200000000))

	check(t, "pods", len(s.Pods), 2)
	a := findPod(t, s, "a")
	check(t, "a ref", a.PodRef, statsapi.PodReference{Name: "a", Namespace: "default", UID: uidA})
	check(t, "a cpu", u64(a.CPU.UsageCoreNanoSeconds), uint64(5000000000))
	check(t, "a working set", u64(a.Memory.WorkingSetBytes), uint64(79000000))
	check(t, "a available", u64(a.Memory.AvailableBytes), uint64(134217728-79000000))
	check(t, "a page faults", u64(a.Memory.PageFaults), uint64(10))
	if a.Network == nil {
		t.Fatal("pod a has no network stats")
	}
	check(t, "a network", a.Network.Name, "eth0")
	check(t, "a rx", u64(a.Network.RxBytes), uint64(1000))
	check(t, "a tx errors", u64(a.Network.TxErrors), uint64(2))
	check(t, "a containers", len(a.Containers), 1)
	main := a.Containers[0]
	check(t, "main name", main.Name, "main")
	check(t, "main cpu (cgroup, not runtime)", u64(main.CPU.UsageCoreNanoSeconds), uint64(4000000000))
	check(t, "main working set", u64(main.Memory.WorkingSetBytes), uint64(68000000))
	check(t, "main rss", u64(main.Memory.RSSBytes), uint64(67108864))
	check(t, "main rootfs used", u64(main.Rootfs.UsedBytes), uint64(4096))
	check(t, "main rootfs inodes", u64(main.Rootfs.InodesUsed), uint64(3))
	if main.Logs == nil || main.Logs.UsedBytes == nil || *main.Logs.UsedBytes < logFileSize {
		t.Errorf("main logs = %+v, want at least %d bytes used", main.Logs, logFileSize)
	}
	if len(a.VolumeStats) != 1 || a.VolumeStats[0].Name != "data" || u64(a.VolumeStats[0].UsedBytes).(uint64) < volumeFileSize {
		t.Errorf("a volumes = %+v, want data with at least %d bytes", a.VolumeStats, volumeFileSize)
	}
	if a.EphemeralStorage == nil || a.EphemeralStorage.UsedBytes == nil {
		t.Fatalf("a ephemeral storage = %+v", a.EphemeralStorage)
	}
	want := 4096 + *main.Logs.UsedBytes + *a.VolumeStats[0].UsedBytes
	check(t, "a ephemeral storage", *a.EphemeralStorage.UsedBytes, want)

	b := findPod(t, s, "b")
	check(t, "b containers", len(b.Containers), 1)
	c := b.Containers[0]
	check(t, "c cpu (runtime)", u64(c.CPU.UsageCoreNanoSeconds), uint64(2_000_000_000))
	check(t, "c working set (runtime)", u64(c.Memory.WorkingSetBytes), uint64(3<<20))
	check(t, "c usage not reported by the runtime", c.Memory.UsageBytes == nil, true)
	check(t, "b cpu (sum of containers)", u64(b.CPU.UsageCoreNanoSeconds), uint64(2_000_000_000))
	check(t, "b working set (sum of containers)", u64(b.Memory.WorkingSetBytes), uint64(3<<20))
	check(t, "b network (no sandbox pid)", b.Network == nil, true)
}

func TestSummaryCacheAndRates(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	ctx := context.Background()
	first, err := p.Summary(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	calls := len(f.srv.Calls())

	// Within the cache period: the same collection, no runtime call.
	f.clock.Step(500 * time.Millisecond)
	again, err := p.Summary(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Error("a summary 500ms later was collected again, want the cached one")
	}
	if n := len(f.srv.Calls()); n != calls {
		t.Errorf("runtime calls went from %d to %d within the cache period", calls, n)
	}

	// 2 s later: 1.5 CPU for the node, 0.25 for pod a, 0.5 for container c.
	f.clock.Step(1500 * time.Millisecond)
	f.write("cpuacct/cpuacct.usage", "103000000000\n")
	f.write("cpuacct/"+podCgA+"/cpuacct.usage", "5500000000\n")
	f.srv.SetContainerStats(f.ctrB, fakecri.ContainerUsage{CPUUsageNanos: 3_000_000_000, MemoryWorkingSet: 3 << 20})
	s, err := p.Summary(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if s == first {
		t.Fatal("a summary 2s later is the cached one, want a new collection")
	}
	check(t, "node rate", u64(s.Node.CPU.UsageNanoCores), uint64(1_500_000_000))
	check(t, "node cpu time", s.Node.CPU.Time.Time.Equal(epoch.Add(2*time.Second)), true)
	check(t, "pod a rate", u64(findPod(t, s, "a").CPU.UsageNanoCores), uint64(250_000_000))
	check(t, "container c rate", u64(findPod(t, s, "b").Containers[0].CPU.UsageNanoCores), uint64(500_000_000))

	// CPU and memory only.
	check(t, "node network", s.Node.Network == nil, true)
	check(t, "node fs", s.Node.Fs == nil, true)
	check(t, "node runtime", s.Node.Runtime == nil, true)
	a := findPod(t, s, "a")
	check(t, "pod network", a.Network == nil, true)
	check(t, "pod volumes", a.VolumeStats == nil, true)
	check(t, "container rootfs", a.Containers[0].Rootfs == nil, true)
	check(t, "container memory", a.Containers[0].Memory != nil, true)
}

// SummaryOf has the node's full figures and the stats of the pods picked
// only; with none picked it asks the runtime for no container's stats
// and no image, and it neither uses nor fills the cache.
func TestSummaryOf(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	ctx := context.Background()
	full, err := p.Summary(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	before := len(f.srv.Calls())
	node, err := p.SummaryOf(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Pods) != 0 {
		t.Errorf("SummaryOf(nil) has %d pods, want none", len(node.Pods))
	}
	check(t, "node fs", node.Node.Fs != nil, true)
	check(t, "node runtime", node.Node.Runtime != nil, true)
	check(t, "node memory", u64(node.Node.Memory.WorkingSetBytes), u64(full.Node.Memory.WorkingSetBytes))
	for _, c := range f.srv.Calls()[before:] {
		if strings.Contains(c, "ContainerStats") || strings.Contains(c, "ListImages") {
			t.Errorf("SummaryOf(nil) called %s", c)
		}
	}

	b, err := p.SummaryOf(ctx, func(uid types.UID) bool { return uid == uidB })
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Pods) != 1 || b.Pods[0].PodRef.Name != "b" {
		t.Fatalf("SummaryOf(b) pods = %v, want b only", b.Pods)
	}
	check(t, "pod b container cpu", u64(b.Pods[0].Containers[0].CPU.UsageCoreNanoSeconds), uint64(2_000_000_000))

	again, err := p.Summary(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if again != full {
		t.Error("Summary after SummaryOf within the cache period is not the cached one")
	}
}

func TestSummaryRuntimeFailure(t *testing.T) {
	f := newFixture(t)
	p := f.provider()
	f.srv.InjectError("ListPodSandbox", errInjected)
	if _, err := p.Summary(context.Background(), false); err == nil {
		t.Fatal("Summary succeeded while the runtime failed, want an error")
	}
	// The next call asks again and succeeds.
	s, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "pods", len(s.Pods), 2)
}

func TestSummaryWithoutCgroups(t *testing.T) {
	f := newFixture(t)
	p := New(Options{NodeName: "n", Runtime: f.rt, CgroupFS: filepath.Join(t.TempDir(), "none"), ProcFS: f.proc, Clock: f.clock})
	s, err := p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	// The node from /proc, the containers from the runtime.
	check(t, "node cpu", u64(s.Node.CPU.UsageCoreNanoSeconds), uint64(10*time.Millisecond))
	check(t, "node usage", u64(s.Node.Memory.UsageBytes), uint64(3000000*1024))
	check(t, "main cpu", u64(findPod(t, s, "a").Containers[0].CPU.UsageCoreNanoSeconds), uint64(1))
}

var errInjected = status.Error(codes.Internal, "injected failure")

// With the systemd driver the pods' cgroups are slices and the
// containers' the runtime's scopes (containerd's names).
func TestSummarySystemdDriver(t *testing.T) {
	f := newFixture(t)
	for _, h := range []string{"cpuacct", "memory"} {
		root := filepath.Join(f.cgroups, h)
		for _, mv := range [][2]string{
			{"kubepods", "kubepods.slice"},
			{"kubepods.slice/burstable", "kubepods.slice/kubepods-burstable.slice"},
			{"kubepods.slice/kubepods-burstable.slice/pod" + uidA, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_1111.slice"},
			{"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_1111.slice/" + f.ctrA,
				"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaaaa_1111.slice/cri-containerd-" + f.ctrA + ".scope"},
		} {
			if err := os.Rename(filepath.Join(root, mv[0]), filepath.Join(root, mv[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := f.provider()
	p.opts.CgroupDriver = "systemd"
	s, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Node.SystemContainers) != 1 {
		t.Fatalf("system containers = %+v, want pods (kubepods.slice)", s.Node.SystemContainers)
	}
	check(t, "pods cpu", u64(s.Node.SystemContainers[0].CPU.UsageCoreNanoSeconds), uint64(9000000000))
	a := findPod(t, s, "a")
	check(t, "a cpu (its slice)", u64(a.CPU.UsageCoreNanoSeconds), uint64(5000000000))
	check(t, "a working set (its slice)", u64(a.Memory.WorkingSetBytes), uint64(79000000))
	check(t, "main cpu (its scope)", u64(a.Containers[0].CPU.UsageCoreNanoSeconds), uint64(4000000000))
}
