// Command bench measures heartlet against a real container runtime: the
// time from static pod manifests written to all their containers running,
// for 1 and for N pods, and heartlet's resident memory and CPU use at
// steady state. With -cluster it runs heartlet as a node of a real control
// plane instead and measures the API requests of an idle node and the
// latency from pod creation in the API to Running. It prints numbers; it
// asserts nothing.
//
//	go run ./bench -heartlet bin/heartlet -endpoint unix:///run/heartlet-env/containerd.sock
//	go run ./bench -cluster -heartlet bin/heartlet   (after sourcing hack/env.sh's and hack/kube.sh's env files)
//	go run ./bench -compare -heartlet bin/heartlet -n 30,100   (the same, side by side with the kubelet and the CRI floor)
//
// With -compare it runs heartlet, the upstream kubelet and a minimal
// in-process CRI driver (the floor) one after the other against the same
// containerd and control plane, with one KubeletConfiguration file and one
// workload, and prints a table with the ratios.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/heartlet/heartlet/internal/runtime"
)

func main() {
	var (
		bin      = flag.String("heartlet", "bin/heartlet", "heartlet binary")
		endpoint = flag.String("endpoint", os.Getenv("HEARTLET_CRI_ENDPOINT"), "CRI endpoint of the test runtime")
		image    = flag.String("image", "localhost:5000/busybox:1.35", "image of the benchmark pods")
		counts   = flag.String("pods", "1,30", "comma-separated pod counts to measure")
		steady   = flag.Duration("steady", 30*time.Second, "how long to sample CPU at steady state")

		cluster  = flag.Bool("cluster", false, "benchmark cluster mode against the control plane of hack/kube.sh")
		admin    = flag.String("admin-kubeconfig", os.Getenv("KUBECONFIG"), "cluster admin kubeconfig (-cluster)")
		nodeKC   = flag.String("node-kubeconfig", os.Getenv("HEARTLET_NODE_KUBECONFIG"), "the node's kubeconfig (-cluster)")
		nodeName = flag.String("node-name", os.Getenv("HEARTLET_NODE_NAME"), "the node's name, matching its identity (-cluster)")
		apiPods  = flag.Int("api-pods", 30, "pods created at once through the API (-cluster)")
		idle     = flag.Duration("idle", time.Minute, "idle window for counting API requests (-cluster)")
		keep     = flag.Bool("keep", false, "keep heartlet's directory and log (-cluster, -compare)")
		agentV   = flag.Int("agent-v", 0, "log verbosity of heartlet and the kubelet, with -keep to read their logs (-compare)")

		compare  = flag.Bool("compare", false, "side by side: heartlet, the upstream kubelet and the CRI floor on the control plane of hack/kube.sh")
		kubelet  = flag.String("kubelet", "/var/cache/heartlet/kube/v1.37.2/bin/kubelet", "upstream kubelet binary (-compare)")
		agents   = flag.String("agents", "heartlet,kubelet,floor", "comma-separated agents to run, in order: heartlet, heartlet-base, kubelet, floor, floor-setup (the floor's pods set up as an agent sets them up: pod cgroup, token tmpfs, hosts and termination log mounts, service variables), floor-api (floor-setup's pods started from a watch of the API's pods, with api-writes' requests: a conforming agent that does nothing but what it must), api (no agent: the control plane's CPU for the benchmark's own requests), api-writes (-compare)")
		baseBin  = flag.String("heartlet-base", "", "a second heartlet binary, the agent heartlet-base, e.g. built before a change (-compare)")
		ns       = flag.String("n", "30,100", "comma-separated pod counts (-compare)")
		idleWP   = flag.Duration("idle-with-pods", 30*time.Second, "window for API requests and CPU with the pods running, 0 to skip (-compare)")
		ctrdPid  = flag.String("containerd-pid-file", "/run/heartlet-env/containerd.pid", "pid file of the runtime, for its CPU (-compare)")
		cpPids   = flag.String("control-plane-pid-dir", "/run/heartlet-kube", "directory of the control plane daemons' pid files, for their CPU (-compare)")
		profiles = flag.String("profile-dir", "", "fetch heartlet's CPU, block and mutex profiles of every burst into this directory (-compare)")
		profSecs = flag.Int("profile-seconds", 20, "length of each burst's CPU profile (-profile-dir)")
		heapRate = flag.Int("profile-heap-rate", 8192, "bytes allocated per heap profile sample (GODEBUG memprofilerate), 0 for the runtime's default, which costs less CPU and memory (-profile-dir)")
		floorPar = flag.Int("floor-parallel", max(4, 2*goruntime.NumCPU()), "pods the floor starts at once, 0 for all of them (-compare)")
		rounds   = flag.Int("rounds", 1, "times every agent runs, in the given order and then reversed, with the medians printed at the end (-compare)")
	)
	flag.Parse()
	var err error
	if *compare {
		var o compareOptions
		o, err = parseCompare(*agents, *ns)
		if err == nil && slices.Contains(o.agents, agentBase) && *baseBin == "" {
			err = fmt.Errorf("agent %s needs -heartlet-base", agentBase)
		}
		if err == nil && *rounds < 1 {
			err = fmt.Errorf("-rounds %d: want 1 or more", *rounds)
		}
		if err == nil {
			o.heartletBin, o.kubeletBin, o.baseBin, o.endpoint, o.image = *bin, *kubelet, *baseBin, *endpoint, *image
			o.adminKubeconfig, o.nodeKC, o.nodeName = *admin, *nodeKC, *nodeName
			o.idle, o.idleWithPods, o.namespace = *idle, *idleWP, "heartlet-bench"
			o.containerdPidFile, o.profileDir, o.profileSeconds, o.heapProfileRate, o.keep, o.verbosity = *ctrdPid, *profiles, *profSecs, *heapRate, *keep, *agentV
			o.controlPlanePidDir, o.floorParallel, o.rounds = *cpPids, *floorPar, *rounds
			if o.profileDir != "" {
				err = os.MkdirAll(o.profileDir, 0o755)
			}
		}
		if err == nil {
			err = runCompare(o)
		}
	} else if *cluster {
		err = runCluster(clusterOptions{
			bin: *bin, endpoint: *endpoint, image: *image,
			adminKubeconfig: *admin, nodeKC: *nodeKC, nodeName: *nodeName,
			pods: *apiPods, idle: *idle, namespace: "heartlet-bench",
			readyTimeout: 2 * time.Minute, startTimeout: 5 * time.Minute, keep: *keep,
		})
	} else {
		err = run(*bin, *endpoint, *image, *counts, *steady)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin, endpoint, image, counts string, steady time.Duration) error {
	if endpoint == "" {
		return fmt.Errorf("no CRI endpoint: set -endpoint or HEARTLET_CRI_ENDPOINT")
	}
	ctx := context.Background()
	rs, err := runtime.New(ctx, endpoint, 10*time.Second)
	if err != nil {
		return err
	}
	for _, field := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 {
			return fmt.Errorf("bad pod count %q", field)
		}
		if err := measure(ctx, rs, bin, endpoint, image, n, steady); err != nil {
			return err
		}
	}
	return nil
}

func measure(ctx context.Context, rs *runtime.Runtime, bin, endpoint, image string, n int, steady time.Duration) error {
	dir, err := os.MkdirTemp("", "heartlet-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
containerRuntimeEndpoint: %s
podLogsDir: %s
healthzPort: 0
readOnlyPort: 0
failSwapOn: false
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
`, manifests, endpoint, filepath.Join(dir, "logs"))), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "heartlet.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", cfg, "--root-dir", filepath.Join(dir, "root"), "--hostname-override", "bench")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	time.Sleep(2 * time.Second) // let it connect and see the empty directory

	start := time.Now()
	for i := range n {
		m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: bench-%d
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, i, image)
		if err := os.WriteFile(filepath.Join(manifests, fmt.Sprintf("bench-%d.yaml", i)), []byte(m), 0o644); err != nil {
			return err
		}
	}
	if err := waitRunning(ctx, rs, n, 5*time.Minute); err != nil {
		return err
	}
	startup := time.Since(start)
	fmt.Printf("pods=%d manifests-to-running=%.2fs per-pod=%.3fs\n", n, startup.Seconds(), startup.Seconds()/float64(n))

	time.Sleep(5 * time.Second) // let the start-up work settle
	cpu0, err := cpuTicks(cmd.Process.Pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(steady)
	cpu1, err := cpuTicks(cmd.Process.Pid)
	if err != nil {
		return err
	}
	rss, err := rssKiB(cmd.Process.Pid)
	if err != nil {
		return err
	}
	const ticksPerSecond = 100
	cpuPct := float64(cpu1-cpu0) / ticksPerSecond / time.Since(t0).Seconds() * 100
	fmt.Printf("pods=%d steady-rss=%.1fMiB steady-cpu=%.2f%% (over %s)\n", n, float64(rss)/1024, cpuPct, steady)

	entries, _ := os.ReadDir(manifests)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(manifests, e.Name()))
	}
	stopStart := time.Now()
	if err := waitGone(ctx, rs, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("pods=%d manifests-removed-to-gone=%.2fs\n", n, time.Since(stopStart).Seconds())
	return nil
}

// benchPods returns the runtime's pods that the benchmark created.
func benchPods(ctx context.Context, rs *runtime.Runtime) ([]*runtime.PodStatus, error) {
	pods, err := rs.ListPods(ctx)
	if err != nil {
		return nil, err
	}
	var out []*runtime.PodStatus
	for _, p := range pods {
		if strings.HasPrefix(p.Name, "bench-") {
			out = append(out, p)
		}
	}
	return out, nil
}

func waitRunning(ctx context.Context, rs *runtime.Runtime, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		pods, err := benchPods(ctx, rs)
		if err == nil {
			running := 0
			for _, p := range pods {
				for _, c := range p.Containers {
					if c.State == runtime.ContainerRunning {
						running++
					}
				}
			}
			if running >= n {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%d pods not running after %s", n, limit)
}

func waitGone(ctx context.Context, rs *runtime.Runtime, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if pods, err := benchPods(ctx, rs); err == nil && len(pods) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("bench pods still present after %s", limit)
}

// cpuTicks returns utime+stime of pid in clock ticks.
func cpuTicks(pid int) (int64, error) {
	u, st, err := cpuTicksSplit(pid)
	return u + st, err
}

// cpuTicksSplit returns pid's user and system (in the kernel) CPU time in
// clock ticks.
func cpuTicksSplit(pid int) (user, sys int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	user, _ = strconv.ParseInt(fields[11], 10, 64)
	sys, _ = strconv.ParseInt(fields[12], 10, 64)
	return user, sys, nil
}

// rssKiB returns VmRSS of pid in KiB.
func rssKiB(pid int) (int64, error) {
	return statusKiB(pid, "VmRSS:")
}
