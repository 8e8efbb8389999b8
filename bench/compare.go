package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/errdefs"
	"github.com/heartlet/heartlet/internal/runtime"
)

// The agents the side-by-side benchmark knows.
const (
	agentHeartlet = "heartlet"
	agentKubelet  = "kubelet"
	agentFloor    = "floor"
	// agentFloorSetup is the floor with the set-up any agent gives the
	// benchmark's pod (podSetup): the runtime's and the kernel's share of
	// a conforming agent's pod, with no agent.
	agentFloorSetup = "floor-setup"
	// agentAPI is no agent: the same pods created and deleted through the
	// API for a node nobody serves, for what the control plane spends on
	// the benchmark's own requests.
	agentAPI = "api"
	// agentAPIWrites is no agent either: the api reference plus, per pod,
	// the requests any agent serving it makes, for what the API side of a
	// pod costs the control plane at least.
	agentAPIWrites = "api-writes"
	// agentFloorAPI is a conforming agent that does nothing but what it
	// must: floor-setup's pods started from a watch of the API's pods,
	// with api-writes' requests around each (runFloorAPI).
	agentFloorAPI = "floor-api"
	// agentBase is a second heartlet build (-heartlet-base), e.g. before a
	// change, measured in the same run for a before/after ratio.
	agentBase = "heartlet-base"
)

// compareOptions are the inputs of the side-by-side benchmark.
type compareOptions struct {
	heartletBin, kubeletBin string
	baseBin                 string
	endpoint, image         string
	adminKubeconfig, nodeKC string
	nodeName                string
	counts                  []int
	agents                  []string
	idle, idleWithPods      time.Duration
	namespace               string
	containerdPidFile       string
	controlPlanePidDir      string
	profileDir              string
	heapProfileRate         int
	profileSeconds          int
	keep                    bool
	// verbosity is the agents' log verbosity (logging.verbosity).
	verbosity int
	// floorParallel is how many pods the floor starts at once; 0 means
	// all of them.
	floorParallel int
	// rounds is how many times every agent runs; with more than one, the
	// medians are printed at the end.
	rounds int
}

// result is what one agent measured for one pod count. CPU figures are
// milliseconds of CPU time; a negative value means not measured.
type result struct {
	n                                int
	p50, p90, p99, allRunning        time.Duration
	allDeleted                       time.Duration
	cpuStartMs, cpuDeleteMs          float64 // agent CPU per pod
	sysStartMs, sysDeleteMs          float64 // of which in the kernel (system time)
	runtimeStartMs, runtimeDeleteMs  float64 // containerd and its children per pod
	controlStartMs, controlDeleteMs  float64 // the control plane's daemons per pod
	machineStartMs, machineDeleteMs  float64 // every process and the kernel, per pod, less the time stolen
	busyStart, busyDelete            float64 // share of all CPUs busy during the burst, 0–1
	stolenStart, stolenDelete        float64 // share of all CPU time the hypervisor took (steal), 0–1
	apiCallsStart, apiCallsDelete    float64 // the agent's API requests per pod
	criCallsStart, criCallsDelete    float64 // the agent's CRI calls per pod
	allocStartKiB, allocDeleteKiB    float64 // the agent's Go heap allocation per pod
	gcStart, gcDelete                float64 // the agent's GC cycles in the burst
	rssWithPodsMiB                   float64
	memWithPods                      memory
	memSettled                       memory    // at the end of the window with the pods running
	trace                            stepTimes // heartlet only
	traceMissing                     int
	deleteTrace                      *steps // offsets from the delete call
	apiPerMinWithPods, cpuPerMinPods float64
}

// agentResult is everything measured for one agent.
type agentResult struct {
	name                   string
	rssIdleMiB             float64
	memIdle                memory
	apiPerMinIdle, cpuIdle float64 // per minute; cpu in ms
	byN                    map[int]*result
	version, leftoverPods  string
}

// runCompare runs heartlet, the upstream kubelet and the in-process CRI
// floor one after the other on the same containerd and control plane with
// the same KubeletConfiguration file and workload, and prints one table.
func runCompare(o compareOptions) error {
	ctx := context.Background()
	if o.endpoint == "" {
		return fmt.Errorf("no CRI endpoint: set -endpoint or HEARTLET_CRI_ENDPOINT")
	}
	rs, err := runtime.New(ctx, o.endpoint, 2*time.Minute)
	if err != nil {
		return err
	}
	defer func() { _ = rs.Close(ctx) }()
	var cs kubernetes.Interface
	if needsCluster(o.agents) {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.adminKubeconfig)
		if err != nil {
			return fmt.Errorf("admin kubeconfig %q: %w", o.adminKubeconfig, err)
		}
		cfg.QPS, cfg.Burst = 200, 400
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "heartlet-bench-compare-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Printf("compare: keeping %s (agent logs, profiles)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	roPort, err := freePort()
	if err != nil {
		return err
	}
	config := filepath.Join(dir, "kubelet-config.yaml")
	if err := os.WriteFile(config, []byte(sharedConfig(o.endpoint, filepath.Join(dir, "logs"), port, roPort, o.profileDir != "", o.verbosity)), 0o644); err != nil {
		return err
	}
	// The image is present before any agent runs: no agent pays for a pull.
	if ref, err := rs.ImageRef(ctx, o.image); err != nil {
		return err
	} else if ref == "" {
		if _, err := rs.PullImage(ctx, o.image, nil, nil); err != nil {
			return fmt.Errorf("pull the benchmark image: %w", err)
		}
	}
	fmt.Printf("compare: containerd %s; one KubeletConfiguration for every agent: %s\n", runtimeVersion(ctx, rs), config)

	var (
		rounds [][]*agentResult
		errs   []error
	)
	for round := range o.rounds {
		if o.rounds > 1 {
			fmt.Printf("compare: round %d of %d\n", round+1, o.rounds)
		}
		byName := map[string]*agentResult{}
		// Each round's agents start from fresh root directories.
		roundDir := dir
		if o.rounds > 1 {
			roundDir = filepath.Join(dir, fmt.Sprintf("round-%d", round+1))
			if err := os.MkdirAll(roundDir, 0o755); err != nil {
				return err
			}
		}
		for _, a := range roundOrder(o.agents, round) {
			settleMachine(os.Stdout, a)
			var r *agentResult
			switch a {
			case agentFloor, agentFloorSetup:
				r, err = runFloor(ctx, rs, o, a == agentFloorSetup)
			case agentAPI:
				r, err = runAPIOnly(ctx, cs, o, nil)
			case agentAPIWrites:
				var w *nodeWrites
				if w, err = newNodeWrites(o); err == nil {
					r, err = runAPIOnly(ctx, cs, o, w)
				}
			case agentFloorAPI:
				r, err = runFloorAPI(ctx, cs, rs, o)
			default:
				r, err = runAgent(ctx, cs, rs, o, a, roundDir, config, roPort, port)
			}
			if r != nil {
				byName[a] = r
			}
			if err != nil {
				// What was measured is still printed; the next agent
				// starts after a clean-up.
				err = fmt.Errorf("%s: %w", a, err)
				fmt.Printf("compare: %v\n", err)
				errs = append(errs, err)
				cleanUp(ctx, cs, rs, o)
			}
		}
		var results []*agentResult
		for _, a := range o.agents {
			if r := byName[a]; r != nil {
				results = append(results, r)
			}
		}
		if o.rounds > 1 {
			fmt.Printf("\nRound %d of %d (agents in the order %s):\n", round+1, o.rounds, strings.Join(roundOrder(o.agents, round), ", "))
		}
		printTable(os.Stdout, results, o.counts)
		rounds = append(rounds, results)
	}
	if o.rounds > 1 {
		printRounds(os.Stdout, rounds, o.counts)
	}
	return errors.Join(errs...)
}

// roundOrder is the order the agents run in a round: as given in even
// rounds, reversed in odd ones, so that a drift of the machine over the
// run (another tenant, the page cache) weighs on each agent alike.
func roundOrder(agents []string, round int) []string {
	order := slices.Clone(agents)
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// cleanUp removes, best effort, whatever a failed agent left: the
// benchmark's pods in the API (at once) and in the runtime, and the Node.
func cleanUp(ctx context.Context, cs kubernetes.Interface, rs *runtime.Runtime, o compareOptions) {
	if cs != nil {
		_ = cs.CoreV1().Pods(o.namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = deleteNode(ctx, cs, o.nodeName)
	}
	for _, ns := range []string{o.namespace, o.namespace + "-floor"} {
		if _, err := removeRuntimePods(ctx, rs, ns); err != nil {
			fmt.Printf("compare: clean-up of namespace %s in the runtime: %v\n", ns, err)
		}
	}
}

func needsCluster(agents []string) bool {
	for _, a := range agents {
		if a != agentFloor && a != agentFloorSetup {
			return true
		}
	}
	return false
}

// sharedConfig is the one KubeletConfiguration both agents read. Only
// fields both honour: the kubelet 1.35+ refuses cgroup v1 unless
// failCgroupV1 is false; image garbage collection is off so the test image
// stays; the HTTPS server listens on loopback and answers anyone, as it
// serves only the profiles the benchmark reads. Contention (block and
// mutex) profiling, which costs CPU, is on only when profiles are asked for.
// verbosity is the log verbosity of both agents.
func sharedConfig(endpoint, logs string, port, roPort int, contention bool, verbosity int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %s
address: 127.0.0.1
port: %d
readOnlyPort: %d
healthzPort: 0
podLogsDir: %s
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enableProfilingHandler: true
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
enableContentionProfiling: %t
logging: {verbosity: %d}
`, endpoint, port, roPort, logs, contention, verbosity)
}

func runtimeVersion(ctx context.Context, rs *runtime.Runtime) string {
	v, err := rs.Version(ctx)
	if err != nil {
		return "unknown"
	}
	return v.RuntimeName + " " + v.RuntimeVersion
}

// runAgent starts one agent (heartlet or the kubelet) as the node, measures
// it idle and for every pod count, stops it and leaves neither its pods nor
// its Node behind.
func runAgent(ctx context.Context, cs kubernetes.Interface, rs *runtime.Runtime, o compareOptions, name, dir, config string, roPort, port int) (*agentResult, error) {
	bin := o.heartletBin
	switch name {
	case agentKubelet:
		bin = o.kubeletBin
	case agentBase:
		bin = o.baseBin
	}
	res := &agentResult{name: name, byN: map[int]*result{}}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err == nil {
		res.version, _, _ = strings.Cut(strings.TrimSpace(string(out)), "\n")
	}
	// Each agent registers the Node afresh, with its own root directory
	// (and so its own self-signed serving certificate).
	if err := deleteNode(ctx, cs, o.nodeName); err != nil {
		return res, err
	}
	root := filepath.Join(dir, name+"-root")
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return res, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config", config, "--root-dir", root,
		"--kubeconfig", o.nodeKC, "--hostname-override", o.nodeName)
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.profileDir != "" && name != agentKubelet && o.heapProfileRate > 0 {
		// A heap profile samples one allocation per 512 KiB by default,
		// too coarse to tell what each of 100 pods holds.
		cmd.Env = append(os.Environ(), fmt.Sprintf("GODEBUG=memprofilerate=%d", o.heapProfileRate))
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start %s: %w", bin, err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		// The kubelet bind-mounts its root directory onto itself and
		// leaves the mount; heartlet's is no mount point (EINVAL).
		_ = syscall.Unmount(root, syscall.MNT_DETACH)
	}
	defer stop()
	pid := cmd.Process.Pid
	fmt.Printf("compare: %s (%s) started, pid %d, log %s\n", name, res.version, pid, logf.Name())

	if err := waitNodeSchedulable(ctx, cs, o.nodeName, 2*time.Minute); err != nil {
		return res, err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", roPort)
	// heartlet's profiles and MemStats.
	debugBase := fmt.Sprintf("https://127.0.0.1:%d", port)
	time.Sleep(10 * time.Second) // let registration and the first syncs settle
	if rss, err := rssKiB(pid); err == nil {
		res.rssIdleMiB = float64(rss) / 1024
	}
	res.memIdle = memorySnapshot(pid, name, o.profileDir, debugBase, filepath.Join(o.profileDir, name+"-idle"))
	if o.idle > 0 {
		res.apiPerMinIdle, res.cpuIdle, err = idleWindow(pid, metricsURL, o.idle)
		if err != nil {
			return res, err
		}
	}
	fmt.Printf("compare: %s idle rss=%.1fMiB api=%.1f/min cpu=%.0fms/min\n", name, res.rssIdleMiB, res.apiPerMinIdle, res.cpuIdle)

	if err := ensureNamespace(ctx, cs, o.namespace); err != nil {
		return res, err
	}
	ctrdPid := containerdPid(o.containerdPidFile)
	for _, n := range o.counts {
		waitQuiet(os.Stdout, fmt.Sprintf("%s pods=%d", name, n))
		r := &result{n: n, memSettled: memory{anonMiB: -1, fileMiB: -1}}
		co := clusterOptions{image: o.image, nodeName: o.nodeName, pods: n, namespace: o.namespace, startTimeout: 10 * time.Minute}
		var prof *profiler
		if (name == agentHeartlet || name == agentBase) && o.profileDir != "" {
			prof = startProfiles(debugBase, o.profileSeconds, filepath.Join(o.profileDir, fmt.Sprintf("%s-%d", name, n)))
		}
		// The API server's counters are read outside the CPU windows:
		// its metrics page costs it CPU of its own.
		// So are the agent's: a scrape costs it CPU too.
		s0 := takeServerRequests(ctx, cs)
		k0 := takeCounters(name, metricsURL, debugBase)
		a0, y0 := agentCPUMs(pid)
		c0 := cpuMsAll(ctrdPid)
		w0 := takeWholeCPU(o.controlPlanePidDir)
		start := time.Now()
		times, err := podStartLatency(ctx, cs, co)
		if err != nil {
			return res, err
		}
		lat := latencies(times)
		r.allRunning = time.Since(start)
		a1, y1 := agentCPUMs(pid)
		c1 := cpuMsAll(ctrdPid)
		r.sysStartMs = (y1 - y0) / float64(n)
		r.controlStartMs, r.machineStartMs, r.busyStart, r.stolenStart = takeWholeCPU(o.controlPlanePidDir).since(w0, n)
		k1 := takeCounters(name, metricsURL, debugBase)
		var byMethod map[string]float64
		r.apiCallsStart, r.criCallsStart, byMethod = k1.since(k0, n)
		r.allocStartKiB, r.gcStart = k1.heap.since(k0.heap, n)
		fmt.Printf("compare: %s pods=%d CRI calls per pod started: %s\n", name, n, formatMethods(byMethod))
		fmt.Printf("compare: %s pods=%d pod syncs per pod started: %s\n", name, n, formatMethods(perPod(k0.syncs, k1.syncs, n)))
		fmt.Printf("compare: %s pods=%d API server requests per pod started (every client): %s\n", name, n, formatMethods(takeServerRequests(ctx, cs).since(s0, n)))
		prof.wait()
		r.p50, r.p90, r.p99 = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
		r.cpuStartMs = (a1 - a0) / float64(n)
		r.runtimeStartMs = (c1 - c0) / float64(n)
		time.Sleep(5 * time.Second)
		if rss, err := rssKiB(pid); err == nil {
			r.rssWithPodsMiB = float64(rss) / 1024
		}
		r.memWithPods = memorySnapshot(pid, name, o.profileDir, debugBase, filepath.Join(o.profileDir, fmt.Sprintf("%s-%d-running", name, n)))
		if o.idleWithPods > 0 {
			r.apiPerMinWithPods, r.cpuPerMinPods, err = idleWindow(pid, metricsURL, o.idleWithPods)
			if err != nil {
				return res, err
			}
			r.memSettled = memorySnapshot(pid, name, o.profileDir, debugBase, filepath.Join(o.profileDir, fmt.Sprintf("%s-%d-settled", name, n)))
		}
		if name == agentHeartlet || name == agentBase {
			r.trace, r.traceMissing = traceStarts(fmt.Sprintf("http://127.0.0.1:%d", roPort), o.namespace, times)
		}

		if (name == agentHeartlet || name == agentBase) && o.profileDir != "" {
			prof = startProfiles(debugBase, o.profileSeconds, filepath.Join(o.profileDir, fmt.Sprintf("%s-%d-delete", name, n)))
		}
		s2 := takeServerRequests(ctx, cs)
		k2 := takeCounters(name, metricsURL, debugBase)
		a2, y2 := agentCPUMs(pid)
		c2 := cpuMsAll(ctrdPid)
		w2 := takeWholeCPU(o.controlPlanePidDir)
		if r.allDeleted, r.deleteTrace, err = deleteAll(ctx, cs, o.namespace, n); err != nil {
			return res, err
		}
		a3, y3 := agentCPUMs(pid)
		c3 := cpuMsAll(ctrdPid)
		r.sysDeleteMs = (y3 - y2) / float64(n)
		r.controlDeleteMs, r.machineDeleteMs, r.busyDelete, r.stolenDelete = takeWholeCPU(o.controlPlanePidDir).since(w2, n)
		k3 := takeCounters(name, metricsURL, debugBase)
		r.apiCallsDelete, r.criCallsDelete, byMethod = k3.since(k2, n)
		r.allocDeleteKiB, r.gcDelete = k3.heap.since(k2.heap, n)
		fmt.Printf("compare: %s pods=%d CRI calls per pod deleted: %s\n", name, n, formatMethods(byMethod))
		fmt.Printf("compare: %s pods=%d pod syncs per pod deleted: %s\n", name, n, formatMethods(perPod(k2.syncs, k3.syncs, n)))
		fmt.Printf("compare: %s pods=%d API server requests per pod deleted (every client): %s\n", name, n, formatMethods(takeServerRequests(ctx, cs).since(s2, n)))
		prof.wait()
		if err := waitNoPods(ctx, cs, o.namespace, time.Minute); err != nil {
			return res, err
		}
		r.cpuDeleteMs = (a3 - a2) / float64(n)
		r.runtimeDeleteMs = (c3 - c2) / float64(n)
		res.byN[n] = r
		fmt.Printf("compare: %s pods=%d p50=%.2fs p90=%.2fs p99=%.2fs all-running=%.2fs all-deleted=%.2fs cpu/pod start=%.0fms delete=%.0fms rss=%.1fMiB\n",
			name, n, r.p50.Seconds(), r.p90.Seconds(), r.p99.Seconds(), r.allRunning.Seconds(), r.allDeleted.Seconds(), r.cpuStartMs, r.cpuDeleteMs, r.rssWithPodsMiB)
		time.Sleep(5 * time.Second)
	}
	stop()
	// Whatever the agent left in the runtime (e.g. exited sandboxes its
	// garbage collection had not removed yet) goes before the next agent.
	left, err := removeRuntimePods(ctx, rs, o.namespace)
	if err != nil {
		return res, err
	}
	res.leftoverPods = strconv.Itoa(left)
	if err := deleteNode(ctx, cs, o.nodeName); err != nil {
		return res, err
	}
	return res, nil
}

// deleteAll deletes the benchmark's pods (with their own grace period) and
// waits until n are gone, on a watch rather than a list every 200 ms:
// lists of up to n pods while the agent works would cost the API server
// CPU that the control plane's figure would count. It returns the time
// from the delete call and the deletion steps seen.
func deleteAll(ctx context.Context, cs kubernetes.Interface, ns string, n int) (time.Duration, *steps, error) {
	dw, err := watchDeletion(ctx, cs, ns)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	dw.begin()
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return 0, nil, fmt.Errorf("delete bench pods: %w", err)
	}
	if err := dw.waitRemoved(ctx, n, 10*time.Minute); err != nil {
		return 0, nil, err
	}
	return time.Since(start), dw.result(), nil
}

// idleWindow returns the agent's API requests and CPU milliseconds per
// minute over d. Its metrics are read outside the CPU window: a scrape
// costs the agent CPU.
func idleWindow(pid int, metricsURL string, d time.Duration) (apiPerMin, cpuPerMin float64, err error) {
	r0, err := restRequests(metricsURL)
	if err != nil {
		return 0, 0, err
	}
	c0, t0 := cpuMs(pid), time.Now()
	time.Sleep(d)
	c1, mins := cpuMs(pid), time.Since(t0).Minutes()
	r1, err := restRequests(metricsURL)
	if err != nil {
		return 0, 0, err
	}
	return (r1 - r0) / mins, (c1 - c0) / mins, nil
}

// deleteNode removes the Node and its Lease so that the next agent
// registers from nothing.
func deleteNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %s: %w", name, err)
	}
	if err := cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete lease of node %s: %w", name, err)
	}
	return nil
}

// removeRuntimePods stops and removes every sandbox of namespace in the
// runtime and returns how many there were.
func removeRuntimePods(ctx context.Context, rs *runtime.Runtime, namespace string) (int, error) {
	pods, err := rs.ListPods(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if p.Namespace != namespace {
			continue
		}
		for _, s := range p.Sandboxes {
			n++
			if err := rs.StopPodSandbox(ctx, s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return n, err
			}
			if err := rs.RemovePodSandbox(ctx, s.ID); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
				return n, err
			}
		}
	}
	return n, nil
}

// floorStopTimeout is the time the floor gives a container between SIGTERM
// and SIGKILL: the pods' grace period is 1 s, but the kubelet, and heartlet
// as it, give a container at least 2 s (upstream's minimum grace period), so
// the floor waits as long as the agents must.
const floorStopTimeout = 2 * time.Second

// apiSettle is how long after the last create (or the last pod gone) the
// API-only reference keeps counting the control plane's CPU: the watchers
// and controllers that react to the pods work after the calls return.
const apiSettle = 5 * time.Second

// runAPIOnly creates the benchmark's pods through the API for a node no
// agent serves, waits apiSettle, deletes them at once (grace 0: nobody
// would confirm a graceful deletion) and waits apiSettle again; the
// control plane's CPU in each window, less what it spends idle in as long
// a window, is what the benchmark's own requests cost it per pod.
//
// With w, the pods are bound to the benchmark's node and w, watching
// them as an agent does, makes for each the requests an agent serving it
// makes once it runs and once it is deleted (gracefully, as for the
// agents); the windows then measure those requests and the watch too.
func runAPIOnly(ctx context.Context, cs kubernetes.Interface, o compareOptions, w *nodeWrites) (*agentResult, error) {
	res := &agentResult{name: agentAPI, byN: map[int]*result{}, version: "no agent"}
	if err := ensureNamespace(ctx, cs, o.namespace); err != nil {
		return nil, err
	}
	co := clusterOptions{image: o.image, nodeName: o.nodeName + "-nobody", namespace: o.namespace}
	var deleteOpts metav1.DeleteOptions
	if w == nil {
		deleteOpts.GracePeriodSeconds = new(int64)
	} else {
		res.name, res.version = agentAPIWrites, "no agent; the node's requests per pod made by the benchmark"
		co.nodeName = o.nodeName
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go w.run(wctx, o.namespace)
	}
	idle := func() float64 {
		w0 := takeWholeCPU(o.controlPlanePidDir)
		time.Sleep(apiSettle)
		return takeWholeCPU(o.controlPlanePidDir).control - w0.control
	}
	for _, n := range o.counts {
		waitQuiet(os.Stdout, fmt.Sprintf("%s pods=%d", res.name, n))
		r := &result{n: n, p50: -1, p90: -1, p99: -1, allRunning: -1, allDeleted: -1, cpuStartMs: -1, cpuDeleteMs: -1, sysStartMs: -1, sysDeleteMs: -1,
			runtimeStartMs: -1, runtimeDeleteMs: -1, machineStartMs: -1, machineDeleteMs: -1, busyStart: -1, busyDelete: -1, stolenStart: -1, stolenDelete: -1,
			allocStartKiB: -1, allocDeleteKiB: -1, gcStart: -1, gcDelete: -1,
			apiCallsStart: -1, apiCallsDelete: -1, criCallsStart: -1, criCallsDelete: -1}
		base := idle()
		s0 := takeServerRequests(ctx, cs) // outside the CPU windows, as in runAgent
		w0 := takeWholeCPU(o.controlPlanePidDir)
		start := time.Now()
		errc := make(chan error, n)
		for i := range n {
			pod := benchPod(co, fmt.Sprintf("bench-%d", i))
			go func() {
				_, err := cs.CoreV1().Pods(o.namespace).Create(ctx, pod, metav1.CreateOptions{})
				errc <- err
			}()
		}
		var errs []error
		for range n {
			errs = append(errs, <-errc)
		}
		if err := errors.Join(errs...); err != nil {
			return res, fmt.Errorf("create pods: %w", err)
		}
		if w != nil {
			if err := w.waitStarted(ctx, n, 2*time.Minute); err != nil {
				return res, err
			}
		}
		time.Sleep(apiSettle)
		created := time.Since(start)
		w1 := takeWholeCPU(o.controlPlanePidDir)
		s1 := takeServerRequests(ctx, cs)
		fmt.Printf("compare: %s pods=%d API server requests per pod created (every client): %s\n", res.name, n, formatMethods(s1.since(s0, n)))
		r.controlStartMs = (w1.control - w0.control - base*created.Seconds()/apiSettle.Seconds()) / float64(n)
		w1 = takeWholeCPU(o.controlPlanePidDir) // the deletion's window starts after the read of s1

		start = time.Now()
		if err := cs.CoreV1().Pods(o.namespace).DeleteCollection(ctx, deleteOpts, metav1.ListOptions{}); err != nil {
			return res, fmt.Errorf("delete pods: %w", err)
		}
		if err := waitNoPods(ctx, cs, o.namespace, 2*time.Minute); err != nil {
			return res, errors.Join(err, w.err())
		}
		if w != nil {
			if err := w.err(); err != nil {
				return res, err
			}
			w.reset()
		}
		time.Sleep(apiSettle)
		deleted := time.Since(start)
		w2 := takeWholeCPU(o.controlPlanePidDir)
		fmt.Printf("compare: %s pods=%d API server requests per pod deleted (every client): %s\n", res.name, n, formatMethods(takeServerRequests(ctx, cs).since(s1, n)))
		r.controlDeleteMs = (w2.control - w1.control - base*deleted.Seconds()/apiSettle.Seconds()) / float64(n)
		res.byN[n] = r
		fmt.Printf("compare: %s pods=%d control plane CPU per pod created=%.0fms deleted=%.0fms (idle %.0fms per %s subtracted)\n",
			res.name, n, r.controlStartMs, r.controlDeleteMs, base, apiSettle)
	}
	return res, nil
}

// runFloor creates the same pods with nothing but CRI calls:
// RunPodSandbox, CreateContainer, StartContainer per pod, o.floorParallel
// pods at a time (all at once if 0; every pod's latency counts from the
// start of the burst, its wait for a turn included); then stops them all
// at once with floorStopTimeout and removes them. It is the time the
// runtime alone needs. Starting every pod of a burst at once is not the
// runtime's fastest way on a small machine: the pods share the CPUs and all
// finish late (at 100 pods on 2 CPUs, all at once, the p50 was twice that
// of 4 at a time, for the same time until every pod ran).
//
// With setup (the floor-setup agent) each pod also gets what any agent sets
// up for it (podSetup).
func runFloor(ctx context.Context, rs *runtime.Runtime, o compareOptions, setup bool) (*agentResult, error) {
	ns := o.namespace + "-floor"
	name := agentFloor
	res := &agentResult{name: name, byN: map[int]*result{}, version: "in-process CRI client, all pods at once"}
	if o.floorParallel > 0 {
		res.version = fmt.Sprintf("in-process CRI client, %d pods at a time", o.floorParallel)
	}
	var ps *podSetup
	if setup {
		name = agentFloorSetup
		res.name = name
		res.version += ", pods set up as an agent sets them up"
		var err error
		if ps, err = newPodSetup(); err != nil {
			return nil, err
		}
		defer ps.close()
	}
	ctrdPid := containerdPid(o.containerdPidFile)
	logDir, err := os.MkdirTemp("", "heartlet-bench-floor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	for _, n := range o.counts {
		waitQuiet(os.Stdout, fmt.Sprintf("%s pods=%d", name, n))
		r := &result{n: n, cpuStartMs: -1, cpuDeleteMs: -1, sysStartMs: -1, sysDeleteMs: -1, apiCallsStart: -1, apiCallsDelete: -1, criCallsStart: -1, criCallsDelete: -1}
		type pod struct {
			uid, sandbox, container string
			lat                     time.Duration
			err                     error
		}
		pods := make([]pod, n)
		c0 := cpuMsAll(ctrdPid)
		w0 := takeWholeCPU(o.controlPlanePidDir)
		start := time.Now()
		var wg sync.WaitGroup
		turns := make(chan struct{}, n)
		if o.floorParallel > 0 {
			turns = make(chan struct{}, o.floorParallel)
		}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				turns <- struct{}{}
				defer func() { <-turns }()
				p := &pods[i]
				p.uid = string(uuid.NewUUID())
				p.sandbox, p.container, p.err = floorStart(ctx, rs, ns, fmt.Sprintf("bench-%d", i), p.uid, o.image, logDir, ps)
				p.lat = time.Since(start)
			}()
		}
		wg.Wait()
		r.allRunning = time.Since(start)
		c1 := cpuMsAll(ctrdPid)
		r.controlStartMs, r.machineStartMs, r.busyStart, r.stolenStart = takeWholeCPU(o.controlPlanePidDir).since(w0, n)
		lat := make([]time.Duration, 0, n)
		var errs []error
		for _, p := range pods {
			if p.err != nil {
				errs = append(errs, p.err)
			}
			lat = append(lat, p.lat)
		}
		if err := errors.Join(errs...); err != nil {
			_, _ = removeRuntimePods(ctx, rs, ns)
			return nil, err
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		r.p50, r.p90, r.p99 = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
		r.runtimeStartMs = (c1 - c0) / float64(n)
		time.Sleep(5 * time.Second)

		c2 := cpuMsAll(ctrdPid)
		w2 := takeWholeCPU(o.controlPlanePidDir)
		start = time.Now()
		errc := make(chan error, n)
		var retried atomic.Int32
		var (
			stepsMu sync.Mutex
			trace   = newSteps(floorDeleteSteps)
		)
		step := func(i int) {
			stepsMu.Lock()
			trace.add(i, time.Since(start))
			stepsMu.Unlock()
		}
		for _, p := range pods {
			go func() {
				k, err := floorStop(ctx, rs, p.sandbox, p.container, p.uid, ps, step)
				retried.Add(int32(k))
				errc <- err
			}()
		}
		for range n {
			errs = append(errs, <-errc)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		r.allDeleted = time.Since(start)
		trace.sort()
		r.deleteTrace = trace
		r.runtimeDeleteMs = (cpuMsAll(ctrdPid) - c2) / float64(n)
		r.controlDeleteMs, r.machineDeleteMs, r.busyDelete, r.stolenDelete = takeWholeCPU(o.controlPlanePidDir).since(w2, n)
		if k := retried.Load(); k > 0 {
			fmt.Printf("compare: %s pods=%d: %d container stops failed once and were retried\n", name, n, k)
		}
		res.byN[n] = r
		fmt.Printf("compare: %s pods=%d p50=%.2fs p90=%.2fs p99=%.2fs all-running=%.2fs all-deleted=%.2fs\n",
			name, n, r.p50.Seconds(), r.p90.Seconds(), r.p99.Seconds(), r.allRunning.Seconds(), r.allDeleted.Seconds())
		time.Sleep(5 * time.Second)
	}
	left, err := removeRuntimePods(ctx, rs, ns)
	if err != nil {
		return nil, err
	}
	res.leftoverPods = strconv.Itoa(left)
	return res, nil
}

// floorStopTries is how many times the floor asks the runtime to stop a
// container before it gives up.
const floorStopTries = 3

// floorStop stops and removes one pod of the floor: its container (a
// failed stop retried up to floorStopTries times: containerd 1.6 under
// load may lose the shim's connection while it kills, "ttrpc: closed";
// both agents retry a failed stop, so does the floor), its sandbox, and
// with ps its set-up. step is told of each step done: 0 the container
// stopped, 1 the sandbox stopped, 2 everything removed. It returns the
// stops retried.
func floorStop(ctx context.Context, rs *runtime.Runtime, sandbox, container, uid string, ps *podSetup, step func(int)) (retried int, err error) {
	err = rs.StopContainer(ctx, container, floorStopTimeout)
	for try := 1; err != nil && try < floorStopTries; try++ {
		retried++
		err = rs.StopContainer(ctx, container, floorStopTimeout)
	}
	if err == nil {
		step(0)
		err = rs.StopPodSandbox(ctx, sandbox)
	}
	if err == nil {
		step(1)
		err = rs.RemovePodSandbox(ctx, sandbox)
	}
	if err == nil && ps != nil {
		err = ps.teardown(uid)
	}
	if err == nil {
		step(2)
	}
	return retried, err
}

// floorStart runs one pod's sandbox and container and starts it; with ps,
// set up as an agent sets it up.
func floorStart(ctx context.Context, rs *runtime.Runtime, ns, name, uid, image, logDir string, ps *podSetup) (sandbox, container string, err error) {
	var files *podFiles
	if ps != nil {
		if files, err = ps.prepare(uid, ns, name); err != nil {
			return "", "", err
		}
	}
	labels := map[string]string{runtime.LabelPodName: name, runtime.LabelPodNamespace: ns, runtime.LabelPodUID: uid}
	// The pod's namespaces as both agents ask for them: the container has
	// its own PID namespace, so `sleep` is its PID 1, ignores SIGTERM and
	// is killed when the stop timeout ends, as the agents' pods are. (A
	// container config without them shares the pause container's PID
	// namespace, where SIGTERM ends `sleep` at once.)
	namespaces := func() *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	}
	sb := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join(logDir, uid),
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaces()},
		},
	}
	if ps != nil {
		ps.sandbox(sb, uid)
	}
	if sandbox, err = rs.RunPodSandbox(ctx, sb, ""); err != nil {
		return "", "", err
	}
	cl := map[string]string{runtime.LabelPodName: name, runtime.LabelPodNamespace: ns, runtime.LabelPodUID: uid, runtime.LabelContainerName: "c"}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  []string{"sleep", "3600"},
		LogPath:  "c/0.log",
		Labels:   cl,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaces()},
		},
	}
	if ps != nil {
		ps.container(cfg, files)
	}
	if container, err = rs.CreateContainer(ctx, sandbox, cfg, sb); err != nil {
		return sandbox, "", err
	}
	return sandbox, container, rs.StartContainer(ctx, container)
}

// containerdPid reads the runtime's pid file; 0 when there is none.
func containerdPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

const msPerTick = 10 // USER_HZ is 100 on Linux

// agentCPUMs is pid's own CPU time and its part in the kernel (system
// time) in milliseconds, from one read; 0, 0 when unreadable.
func agentCPUMs(pid int) (total, sys float64) {
	user, sysTicks, err := cpuTicksSplit(pid)
	if err != nil {
		return 0, 0
	}
	return float64((user + sysTicks) * msPerTick), float64(sysTicks * msPerTick)
}

// cpuMs is pid's own CPU time in milliseconds (0 when unreadable).
func cpuMs(pid int) float64 {
	t, err := cpuTicks(pid)
	if err != nil {
		return 0
	}
	return float64(t * msPerTick)
}

// cpuMsAll is pid's CPU time plus that of its reaped children in
// milliseconds: for containerd, its own work plus the CNI plugins and shim
// launchers it ran (0 when unreadable or pid is 0).
func cpuMsAll(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0
	}
	var sum int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		sum += v
	}
	return float64(sum * msPerTick)
}

// profiler fetches a CPU and a block profile of heartlet during a burst.
type profiler struct{ wg sync.WaitGroup }

// startProfiles fetches, concurrently, a CPU profile of the next seconds,
// and block and mutex profiles at the end of it, from base's
// /debug/pprof/ into prefix-*.
func startProfiles(base string, seconds int, prefix string) *profiler {
	p := &profiler{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		fetch(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), prefix+"-cpu.pprof")
		fetch(base+"/debug/pprof/block", prefix+"-block.pprof")
		fetch(base+"/debug/pprof/mutex", prefix+"-mutex.pprof")
		fetch(base+"/debug/pprof/goroutine", prefix+"-goroutine.pprof")
		fetch(base+"/debug/pprof/heap", prefix+"-heap.pprof")
	}()
	return p
}

func (p *profiler) wait() {
	if p != nil {
		p.wg.Wait()
	}
}

// fetch writes url's body to file; failures are printed, not fatal.
func fetch(url, file string) {
	c := &http.Client{Transport: insecureTransport(), Timeout: 10 * time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Printf("compare: profile %s: %v\n", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		fmt.Printf("compare: profile %s: %v\n", file, err)
		return
	}
	defer f.Close()
	if _, err := f.ReadFrom(resp.Body); err != nil {
		fmt.Printf("compare: profile %s: %v\n", url, err)
	}
}

// insecureTransport trusts any certificate: the agents' serving
// certificates are self-signed and the profiles come from loopback.
func insecureTransport() *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback, self-signed
}

// tableRow is one measure of the side-by-side table: its value for each
// agent by name, negative when not measured.
type tableRow struct {
	label, unit string
	val         map[string]float64
	// ratio, when set, gives the ratio a/b and a note to print after it
	// instead of the ratio of the values.
	ratio func(a, b string) (float64, string)
}

// ratioColumns are the ratio columns a table has for the agents in it.
func ratioColumns(names []string) [][2]string {
	has := func(n string) bool { return slices.Contains(names, n) }
	var cols [][2]string
	for _, c := range [][2]string{{agentHeartlet, agentBase}, {agentHeartlet, agentKubelet}, {agentHeartlet, agentFloor}, {agentHeartlet, agentFloorSetup},
		{agentHeartlet, agentFloorAPI}, {agentFloorAPI, agentKubelet}} {
		if has(c[0]) && has(c[1]) {
			cols = append(cols, c)
		}
	}
	return cols
}

// ratioOf is row's a/b, or -1 when either is not measured.
func (r tableRow) ratioOf(a, b string) float64 {
	va, okA := r.val[a]
	vb, okB := r.val[b]
	if !okA || !okB || va < 0 || vb <= 0 {
		return -1
	}
	return va / vb
}

// writeTable prints rows for the agents names, then a column per ratio.
func writeTable(w io.Writer, names []string, rows []tableRow) {
	header := "| |"
	sep := "|---|"
	for _, n := range names {
		header += " " + n + " |"
		sep += "---|"
	}
	cols := ratioColumns(names)
	for _, c := range cols {
		header += " " + c[0] + "/" + c[1] + " |"
		sep += "---|"
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, sep)
	for _, r := range rows {
		line := "| " + r.label + " |"
		for _, n := range names {
			v, ok := r.val[n]
			if !ok || v < 0 {
				line += " – |"
				continue
			}
			line += " " + strconv.FormatFloat(v, 'f', precision(r.unit), 64) + r.unit + " |"
		}
		for _, c := range cols {
			q, note := r.ratioOf(c[0], c[1]), ""
			if r.ratio != nil {
				q, note = r.ratio(c[0], c[1])
			}
			if q < 0 {
				line += " – |"
				continue
			}
			line += fmt.Sprintf(" %.2f%s |", q, note)
		}
		fmt.Fprintln(w, line)
	}
}

// tableRows are the measures of results, in the table's order.
func tableRows(results []*agentResult, counts []int) []tableRow {
	var rows []tableRow
	row := func(label, unit string, get func(*agentResult) float64) {
		r := tableRow{label: label, unit: unit, val: map[string]float64{}}
		for _, a := range results {
			r.val[a.name] = get(a)
		}
		rows = append(rows, r)
	}
	na := func(r *agentResult, v float64) float64 {
		if r.name == agentFloor || r.name == agentFloorSetup || r.name == agentAPI || r.name == agentAPIWrites || r.name == agentFloorAPI {
			return -1
		}
		return v
	}
	// missing stands for a pod count an agent did not finish: "–" in
	// every row.
	missing := &result{p50: -1, p90: -1, p99: -1, allRunning: -1, allDeleted: -1, cpuStartMs: -1, cpuDeleteMs: -1, sysStartMs: -1, sysDeleteMs: -1,
		runtimeStartMs: -1, runtimeDeleteMs: -1, rssWithPodsMiB: -1, apiPerMinWithPods: -1, cpuPerMinPods: -1,
		controlStartMs: -1, controlDeleteMs: -1, machineStartMs: -1, machineDeleteMs: -1, busyStart: -1, busyDelete: -1, stolenStart: -1, stolenDelete: -1,
		allocStartKiB: -1, allocDeleteKiB: -1, gcStart: -1, gcDelete: -1,
		apiCallsStart: -1, apiCallsDelete: -1, criCallsStart: -1, criCallsDelete: -1,
		memWithPods: memory{anonMiB: -1, fileMiB: -1}, memSettled: memory{anonMiB: -1, fileMiB: -1}}
	for _, n := range counts {
		get := func(r *agentResult) *result {
			if x := r.byN[n]; x != nil {
				return x
			}
			return missing
		}
		p := fmt.Sprintf("%d pods: ", n)
		row(p+"create→Running p50", " s", func(r *agentResult) float64 { return get(r).p50.Seconds() })
		row(p+"create→Running p90", " s", func(r *agentResult) float64 { return get(r).p90.Seconds() })
		row(p+"create→Running p99", " s", func(r *agentResult) float64 { return get(r).p99.Seconds() })
		row(p+"all Running", " s", func(r *agentResult) float64 { return get(r).allRunning.Seconds() })
		row(p+"all deleted", " s", func(r *agentResult) float64 { return get(r).allDeleted.Seconds() })
		row(p+"agent CPU per pod started", " ms", func(r *agentResult) float64 { return na(r, get(r).cpuStartMs) })
		row(p+"agent CPU per pod deleted", " ms", func(r *agentResult) float64 { return na(r, get(r).cpuDeleteMs) })
		row(p+"agent CPU per pod started: in the kernel", " ms", func(r *agentResult) float64 { return na(r, get(r).sysStartMs) })
		row(p+"agent CPU per pod deleted: in the kernel", " ms", func(r *agentResult) float64 { return na(r, get(r).sysDeleteMs) })
		row(p+"containerd CPU per pod started", " ms", func(r *agentResult) float64 { return get(r).runtimeStartMs })
		row(p+"containerd CPU per pod deleted", " ms", func(r *agentResult) float64 { return get(r).runtimeDeleteMs })
		row(p+"agent API requests per pod started", " calls", func(r *agentResult) float64 { return get(r).apiCallsStart })
		row(p+"agent API requests per pod deleted", " calls", func(r *agentResult) float64 { return get(r).apiCallsDelete })
		row(p+"agent CRI calls per pod started", " calls", func(r *agentResult) float64 { return get(r).criCallsStart })
		row(p+"agent CRI calls per pod deleted", " calls", func(r *agentResult) float64 { return get(r).criCallsDelete })
		row(p+"control plane CPU per pod started", " ms", func(r *agentResult) float64 { return get(r).controlStartMs })
		row(p+"control plane CPU per pod deleted", " ms", func(r *agentResult) float64 { return get(r).controlDeleteMs })
		row(p+"machine CPU per pod started", " ms", func(r *agentResult) float64 { return get(r).machineStartMs })
		row(p+"machine CPU per pod deleted", " ms", func(r *agentResult) float64 { return get(r).machineDeleteMs })
		row(p+"CPUs busy while starting", " %", func(r *agentResult) float64 { return pct(get(r).busyStart) })
		row(p+"CPUs busy while deleting", " %", func(r *agentResult) float64 { return pct(get(r).busyDelete) })
		row(p+"agent heap allocated per pod started", " KiB", func(r *agentResult) float64 { return na(r, get(r).allocStartKiB) })
		row(p+"agent heap allocated per pod deleted", " KiB", func(r *agentResult) float64 { return na(r, get(r).allocDeleteKiB) })
		row(p+"agent GC cycles while starting", "", func(r *agentResult) float64 { return na(r, get(r).gcStart) })
		row(p+"agent GC cycles while deleting", "", func(r *agentResult) float64 { return na(r, get(r).gcDelete) })
		row(p+"CPU time stolen by the hypervisor while starting", " %", func(r *agentResult) float64 { return pct(get(r).stolenStart) })
		row(p+"CPU time stolen by the hypervisor while deleting", " %", func(r *agentResult) float64 { return pct(get(r).stolenDelete) })
		row(p+"RSS with the pods", " MiB", func(r *agentResult) float64 { return na(r, get(r).rssWithPodsMiB) })
		row(p+"RSS with the pods: anonymous", " MiB", func(r *agentResult) float64 { return na(r, get(r).memWithPods.anonMiB) })
		row(p+"RSS with the pods: file-backed", " MiB", func(r *agentResult) float64 { return na(r, get(r).memWithPods.fileMiB) })
		row(p+"RSS with the pods, after the window with them running", " MiB", func(r *agentResult) float64 { return na(r, get(r).memSettled.total()) })
		row(p+"RSS with the pods, after the window: anonymous", " MiB", func(r *agentResult) float64 { return na(r, get(r).memSettled.anonMiB) })
		row(p+"RSS with the pods, after the window: file-backed", " MiB", func(r *agentResult) float64 { return na(r, get(r).memSettled.fileMiB) })
		row(p+"API requests per minute, pods running", "", func(r *agentResult) float64 { return na(r, get(r).apiPerMinWithPods) })
		row(p+"agent CPU per minute, pods running", " ms", func(r *agentResult) float64 { return na(r, get(r).cpuPerMinPods) })
	}
	row("RSS idle", " MiB", func(r *agentResult) float64 { return na(r, r.rssIdleMiB) })
	row("RSS idle: anonymous", " MiB", func(r *agentResult) float64 { return na(r, r.memIdle.anonMiB) })
	row("RSS idle: file-backed", " MiB", func(r *agentResult) float64 { return na(r, r.memIdle.fileMiB) })
	row("API requests per minute, idle", "", func(r *agentResult) float64 { return na(r, r.apiPerMinIdle) })
	row("agent CPU per minute, idle", " ms", func(r *agentResult) float64 { return na(r, r.cpuIdle) })
	return rows
}

// printTable prints one row per measure and one column per agent, then the
// ratios heartlet/kubelet and heartlet/floor.
func printTable(w io.Writer, results []*agentResult, counts []int) {
	names := make([]string, 0, len(results))
	for _, r := range results {
		names = append(names, r.name)
	}
	writeTable(w, names, tableRows(results, counts))
	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "%s: %s; runtime pods left after it stopped: %s\n", r.name, r.version, r.leftoverPods)
	}
	for _, a := range results {
		if a.name != agentBase && a.name != agentHeartlet {
			continue
		}
		for _, n := range counts {
			if r := a.byN[n]; r != nil && r.trace != nil {
				printTrace(w, a.name, n, r.trace, r.traceMissing)
			}
		}
	}
	for _, a := range results {
		for _, n := range counts {
			if r := a.byN[n]; r != nil && r.deleteTrace != nil {
				r.deleteTrace.print(w, fmt.Sprintf("%s, %d pods: deletion steps, offset from the delete call", a.name, n))
			}
		}
	}
}

// printRounds prints, for several rounds of the same agents, the median of
// every measure per agent, and for each ratio the median of its values in
// the rounds (each round compares agents that ran minutes apart; the
// medians of two agents' values may come from different rounds), with the
// lowest and highest.
func printRounds(w io.Writer, rounds [][]*agentResult, counts []int) {
	if len(rounds) == 0 {
		return
	}
	var names []string
	for _, r := range rounds[0] {
		names = append(names, r.name)
	}
	perRound := make([][]tableRow, len(rounds))
	for i, rs := range rounds {
		perRound[i] = tableRows(rs, counts)
	}
	medians := make([]tableRow, len(perRound[0]))
	for i, r := range perRound[0] {
		m := tableRow{label: r.label, unit: r.unit, val: map[string]float64{}}
		for _, n := range names {
			var vs []float64
			for _, rows := range perRound {
				if v, ok := rows[i].val[n]; ok && v >= 0 {
					vs = append(vs, v)
				}
			}
			m.val[n] = median(vs)
		}
		m.ratio = func(a, b string) (float64, string) {
			var qs []float64
			for _, rows := range perRound {
				if q := rows[i].ratioOf(a, b); q >= 0 {
					qs = append(qs, q)
				}
			}
			if len(qs) < 2 {
				return median(qs), ""
			}
			return median(qs), fmt.Sprintf(" (%.2f–%.2f)", slices.Min(qs), slices.Max(qs))
		}
		medians[i] = m
	}
	fmt.Fprintf(w, "\nMedians of %d rounds; each ratio is the median of the rounds' ratios, with the lowest and highest:\n", len(rounds))
	writeTable(w, names, medians)
}

// median is the median of vs, -1 when empty.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return -1
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m]
	}
	return (vs[m-1] + vs[m]) / 2
}

func precision(unit string) int {
	switch unit {
	case " s":
		return 2
	case " MiB", " calls":
		return 1
	}
	return 0
}

// parseCompare reads the -agents and -n flags.
func parseCompare(agents, counts string) (compareOptions, error) {
	var o compareOptions
	for _, a := range strings.Split(agents, ",") {
		a = strings.TrimSpace(a)
		switch a {
		case agentHeartlet, agentKubelet, agentFloor, agentFloorSetup, agentBase, agentAPI, agentAPIWrites, agentFloorAPI:
			o.agents = append(o.agents, a)
		default:
			return o, fmt.Errorf("unknown agent %q (want heartlet, heartlet-base, kubelet, floor, floor-setup, floor-api, api or api-writes)", a)
		}
	}
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("bad pod count %q", f)
		}
		o.counts = append(o.counts, n)
	}
	return o, nil
}

// memory is an agent's resident set split as the kernel counts it: anonymous
// pages (heap, stacks, the Go runtime's own structures) and file-backed pages
// (mostly the mapped binary's text and read-only data), in MiB; -1 when not
// read.
type memory struct{ anonMiB, fileMiB float64 }

// total is the resident set, -1 when a part was not read.
func (m memory) total() float64 {
	if m.anonMiB < 0 || m.fileMiB < 0 {
		return -1
	}
	return m.anonMiB + m.fileMiB
}

// memorySnapshot reads pid's RssAnon and RssFile (RssShmem counted as
// anonymous). With a profile directory it also keeps, for the heartlet
// agents, /proc/<pid>/smaps and the heap profile in text form (its tail is
// the Go runtime's MemStats) and as a profile, as prefix-smaps.txt,
// prefix-heap.txt and prefix-heap.pprof, after reading the resident set.
func memorySnapshot(pid int, agent, profileDir, debugBase, prefix string) memory {
	m := memory{anonMiB: -1, fileMiB: -1}
	if kib, err := statusKiB(pid, "RssAnon:", "RssShmem:"); err == nil {
		m.anonMiB = float64(kib) / 1024
	}
	if kib, err := statusKiB(pid, "RssFile:"); err == nil {
		m.fileMiB = float64(kib) / 1024
	}
	if profileDir == "" || (agent != agentHeartlet && agent != agentBase) {
		return m
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid)); err == nil {
		if err := os.WriteFile(prefix+"-smaps.txt", b, 0o644); err != nil {
			fmt.Printf("compare: %v\n", err)
		}
	}
	fetch(debugBase+"/debug/pprof/heap?debug=1", prefix+"-heap.txt")
	fetch(debugBase+"/debug/pprof/heap", prefix+"-heap.pprof")
	return m
}

// statusKiB sums the named fields (e.g. "RssAnon:") of /proc/<pid>/status,
// in KiB.
func statusKiB(pid int, fields ...string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	var sum int64
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		for _, name := range fields {
			if v, ok := strings.CutPrefix(line, name); ok {
				f := strings.Fields(v)
				if len(f) == 0 {
					continue
				}
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s in /proc/%d/status: %w", name, pid, err)
				}
				sum += n
				found++
			}
		}
	}
	if found != len(fields) {
		return 0, fmt.Errorf("no %v in /proc/%d/status", fields, pid)
	}
	return sum, nil
}

// wholeCPU is a reading of the machine's CPU time (/proc/stat) and of the
// control plane daemons' (the pid files of hack/kube.sh), in milliseconds.
// stolen is the time a hypervisor ran something else while a CPU of this
// machine had work (part of busy): on a shared host it makes every figure
// of a burst slower.
type wholeCPU struct {
	busy, total, stolen, control float64
}

// takeWholeCPU reads the machine's busy and total CPU time and the CPU
// time of every daemon with a pid file in pidDir; a part it cannot read is
// 0.
func takeWholeCPU(pidDir string) wholeCPU {
	var w wholeCPU
	w.busy, w.total, w.stolen = machineCPUms()
	if pidDir != "" {
		files, _ := filepath.Glob(filepath.Join(pidDir, "*.pid"))
		for _, f := range files {
			w.control += cpuMs(containerdPid(f))
		}
	}
	return w
}

// since returns, between before and w, the control plane's and the whole
// machine's CPU per pod of n, the share of all CPUs that was busy and the
// share the hypervisor took. The machine's CPU is the work done: busy
// time less the time stolen, which /proc/stat counts as busy.
func (w wholeCPU) since(before wholeCPU, n int) (controlMs, machineMs, busy, stolen float64) {
	controlMs = (w.control - before.control) / float64(n)
	machineMs = (w.busy - before.busy - (w.stolen - before.stolen)) / float64(n)
	if t := w.total - before.total; t > 0 {
		busy = (w.busy - before.busy) / t
		stolen = (w.stolen - before.stolen) / t
	}
	return controlMs, machineMs, busy, stolen
}

// machineCPUms reads the first line of /proc/stat: the time every CPU
// spent busy (all but idle and iowait), in total, and stolen by the
// hypervisor, in milliseconds.
func machineCPUms() (busy, total, stolen float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	return parseProcStatCPU(string(b))
}

// parseProcStatCPU sums the "cpu" line of /proc/stat (user nice system
// idle iowait irq softirq steal; guest time is already in user) into busy
// and total milliseconds, and returns steal alone as stolen.
func parseProcStatCPU(stat string) (busy, total, stolen float64) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, 0
	}
	var idle, steal, sum int64
	for i, v := range f[1:] {
		if i >= 8 {
			break
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, 0
		}
		sum += x
		switch i {
		case 3, 4:
			idle += x
		case 7:
			steal = x
		}
	}
	return float64((sum - idle) * msPerTick), float64(sum * msPerTick), float64(steal * msPerTick)
}

// pct is a share as a percentage, negative (not measured) unchanged.
func pct(v float64) float64 {
	if v < 0 {
		return v
	}
	return 100 * v
}

// heapReading is heartlet's Go heap allocation total and GC count
// (runtime.MemStats TotalAlloc and NumGC); negative when not read.
type heapReading struct{ totalAlloc, numGC float64 }

// takeHeap reads the MemStats that a heap profile in text form ends with,
// from heartlet's /debug/pprof/heap: for a heartlet build that does not
// serve the Go runtime's series on /metrics. Unlike the agent's CPU time,
// these counts do not depend on what else runs on the machine (or the
// host, on a VM).
func takeHeap(agent, debugBase string) heapReading {
	h := heapReading{-1, -1}
	if agent != agentHeartlet && agent != agentBase {
		return h
	}
	c := &http.Client{Transport: insecureTransport(), Timeout: time.Minute}
	resp, err := c.Get(debugBase + "/debug/pprof/heap?debug=1")
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return h
	}
	return parseMemStats(string(b))
}

// parseMemStats finds "# TotalAlloc = N" and "# NumGC = N" in a heap
// profile in text form.
func parseMemStats(text string) heapReading {
	h := heapReading{-1, -1}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "# "), " = ")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch k {
		case "TotalAlloc":
			h.totalAlloc = x
		case "NumGC":
			h.numGC = x
		}
	}
	return h
}

// since returns the KiB allocated per pod of n and the GC cycles between
// before and h; -1 where either was not read.
func (h heapReading) since(before heapReading, n int) (allocKiB, gcs float64) {
	allocKiB, gcs = -1, -1
	if h.totalAlloc >= 0 && before.totalAlloc >= 0 {
		allocKiB = (h.totalAlloc - before.totalAlloc) / 1024 / float64(n)
	}
	if h.numGC >= 0 && before.numGC >= 0 {
		gcs = h.numGC - before.numGC
	}
	return allocKiB, gcs
}

// calls is a reading of an agent's counters: API requests
// (rest_client_requests_total), CRI calls by method
// (kubelet_runtime_operations_total) and its Go heap
// (go_memstats_alloc_bytes_total, go_gc_cycles_total_gc_cycles_total,
// which the kubelet serves as every Kubernetes component does); api
// negative, cri nil and heap negative when unreadable.
type calls struct {
	api  float64
	cri  map[string]float64
	heap heapReading
	// syncs is the pod workers' syncs by operation type (the sample
	// count of kubelet_pod_worker_duration_seconds), nil when unreadable.
	syncs map[string]float64
}

// takeCounters is takeCalls, with the heap read from heartlet's heap
// profile where /metrics does not have it.
func takeCounters(agent, metricsURL, debugBase string) calls {
	c := takeCalls(metricsURL)
	if c.heap.totalAlloc < 0 {
		c.heap = takeHeap(agent, debugBase)
	}
	return c
}

func takeCalls(metricsURL string) calls {
	c := calls{api: -1, heap: heapReading{-1, -1}}
	resp, err := http.Get(metricsURL)
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return c
	}
	return countersOf(families)
}

// countersOf reads a calls from parsed metric families.
func countersOf(families map[string]*dto.MetricFamily) calls {
	c := calls{api: -1, heap: heapReading{-1, -1}}
	if f := families["go_memstats_alloc_bytes_total"]; f != nil && len(f.GetMetric()) == 1 {
		c.heap.totalAlloc = f.GetMetric()[0].GetCounter().GetValue()
	}
	if f := families["go_gc_cycles_total_gc_cycles_total"]; f != nil && len(f.GetMetric()) == 1 {
		c.heap.numGC = f.GetMetric()[0].GetCounter().GetValue()
	}
	if f := families["rest_client_requests_total"]; f != nil {
		c.api = 0
		for _, m := range f.GetMetric() {
			c.api += m.GetCounter().GetValue()
		}
	}
	if f := families["kubelet_runtime_operations_total"]; f != nil {
		c.cri = byOperation(f, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
	}
	// A vector shows no series before its first observation: no family
	// in a page read is no sync yet.
	c.syncs = map[string]float64{}
	if f := families["kubelet_pod_worker_duration_seconds"]; f != nil {
		c.syncs = byOperation(f, func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) })
	}
	return c
}

// byOperation sums value over f's series by their operation_type label.
func byOperation(f *dto.MetricFamily, value func(*dto.Metric) float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation_type" {
				out[l.GetValue()] += value(m)
			}
		}
	}
	return out
}

// perPod is the per-pod increase of each key from before to after, keys
// that did not grow left out; nil when either is nil.
func perPod(before, after map[string]float64, n int) map[string]float64 {
	if before == nil || after == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d > 0 {
			out[k] = d
		}
	}
	return out
}

// since returns the API requests and CRI calls per pod of n between
// before and c, negative where either reading failed, and the CRI calls
// per pod by method.
func (c calls) since(before calls, n int) (api, cri float64, byMethod map[string]float64) {
	api, cri = -1, -1
	if c.api >= 0 && before.api >= 0 {
		api = (c.api - before.api) / float64(n)
	}
	if byMethod = perPod(before.cri, c.cri, n); byMethod != nil {
		cri = 0
		for _, d := range byMethod {
			cri += d
		}
	}
	return api, cri, byMethod
}

// formatMethods is "Method=calls" per method, most calls first.
func formatMethods(byMethod map[string]float64) string {
	names := slices.Collect(maps.Keys(byMethod))
	sort.Slice(names, func(i, j int) bool {
		if byMethod[names[i]] != byMethod[names[j]] {
			return byMethod[names[i]] > byMethod[names[j]]
		}
		return names[i] < names[j]
	})
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%.2f", n, byMethod[n]))
	}
	return strings.Join(parts, " ")
}
