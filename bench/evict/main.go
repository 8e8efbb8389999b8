// Command evict measures how fast heartlet evicts: the time from the
// moment a hard eviction threshold is crossed to the moment the API server
// shows the victim pod Failed with reason Evicted. It runs the built
// binary as a node of the control plane of hack/kube.sh against the
// private containerd of hack/env.sh, as the cluster e2e tests do, and for
// each signal repeats a run several times:
//
//   - memory: evictionHard memory.available set 2 GiB below what the node
//     has available, kernelMemcgNotification on, and a BestEffort pod that
//     writes 3 GiB into a memory-backed emptyDir;
//   - disk: the root dir on a 400 MiB ext4 filesystem on a loop device,
//     evictionHard nodefs.available 120Mi, and a pod that writes 300 MiB
//     into an emptyDir.
//
// The crossing is seen from outside heartlet, by reading the signal as
// heartlet computes it (the root memory cgroup on cgroup v1, statfs of the
// root dir) every 5 ms, and the eviction by reading the pod as often.
// It prints each run and the p50 and max per signal, and asserts nothing.
//
//	sudo hack/env.sh start && sudo hack/kube.sh start && . /run/heartlet-kube/env
//	CGO_ENABLED=0 go build -o bin/heartlet ./cmd/heartlet
//	sudo -E go run ./bench/evict -heartlet bin/heartlet -runs 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	namespace = "bench-evict"
	gi        = int64(1) << 30
	mi        = int64(1) << 20
	// pollEvery is how often the signal is read to find the crossing.
	pollEvery = 5 * time.Millisecond
)

type options struct {
	bin, endpoint, image string
	adminKC, nodeKC      string
	nodeName             string
	runs                 int
	signals              []string
	keep                 bool
}

func main() {
	var (
		o       options
		signals string
	)
	flag.StringVar(&o.bin, "heartlet", "bin/heartlet", "heartlet binary")
	flag.StringVar(&o.endpoint, "endpoint", "unix:///run/heartlet-env/containerd.sock", "CRI endpoint")
	flag.StringVar(&o.image, "image", "localhost:5000/busybox:1.35", "image of the pods (present on the node)")
	flag.StringVar(&o.adminKC, "admin-kubeconfig", os.Getenv("KUBECONFIG"), "cluster admin kubeconfig")
	flag.StringVar(&o.nodeKC, "node-kubeconfig", os.Getenv("HEARTLET_NODE_KUBECONFIG"), "the node's kubeconfig")
	flag.StringVar(&o.nodeName, "node-name", os.Getenv("HEARTLET_NODE_NAME"), "the node's name, matching its identity")
	flag.IntVar(&o.runs, "runs", 3, "runs per signal")
	flag.StringVar(&signals, "signals", "memory,disk", "signals to measure: memory, disk")
	flag.BoolVar(&o.keep, "keep", false, "keep heartlet's directories and logs")
	flag.Parse()
	o.signals = strings.Split(signals, ",")
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "evict:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.adminKC == "" || o.nodeKC == "" || o.nodeName == "" {
		return errors.New("need -admin-kubeconfig, -node-kubeconfig and -node-name (source /run/heartlet-kube/env)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.adminKC)
	if err != nil {
		return fmt.Errorf("admin kubeconfig %s: %w", o.adminKC, err)
	}
	// The victim is read every pollEvery.
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := ensureNamespace(ctx, cs); err != nil {
		return err
	}
	defer func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), namespace, metav1.DeleteOptions{})
	}()
	for _, s := range o.signals {
		var lat []time.Duration
		var err error
		switch s {
		case "memory":
			lat, err = benchMemory(ctx, cs, o)
		case "disk":
			lat, err = benchDisk(ctx, cs, o)
		default:
			err = fmt.Errorf("unknown signal %q", s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		fmt.Printf("%s: runs=%d crossed-to-evicted p50=%.2fs max=%.2fs\n", s, len(lat),
			lat[(len(lat)-1)/2].Seconds(), lat[len(lat)-1].Seconds())
	}
	return nil
}

// scenario is one signal's set-up: the config added to heartlet's, the
// victim pod, and a reading of the signal that says whether it is below
// the threshold.
type scenario struct {
	name    string
	config  string
	pod     func(i int) *v1.Pod
	crossed func() (bool, error)
	// pressure is the node condition the signal sets.
	pressure v1.NodeConditionType
}

func benchMemory(ctx context.Context, cs kubernetes.Interface, o options) ([]time.Duration, error) {
	avail, err := memoryAvailable()
	if err != nil {
		return nil, fmt.Errorf("memory.available (cgroup v1 figures): %w", err)
	}
	if avail < 6*gi {
		fmt.Printf("memory: skipped, only %d MiB available (needs 6 GiB)\n", avail/mi)
		return nil, nil
	}
	threshold := (avail - 2*gi) / mi * mi
	sc := scenario{
		name: "memory",
		config: fmt.Sprintf(`evictionHard:
  memory.available: "%dMi"
evictionPressureTransitionPeriod: 5s
kernelMemcgNotification: true
enforceNodeAllocatable: ["none"]
`, threshold/mi),
		pod: func(i int) *v1.Pod {
			p := benchPod(fmt.Sprintf("memhog-%d", i), o, "dd if=/dev/zero of=/mem/fill bs=1M count=3072; sleep 3600")
			p.Spec.Volumes = []v1.Volume{{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "mem", MountPath: "/mem"}}
			return p
		},
		crossed: func() (bool, error) {
			a, err := memoryAvailable()
			return a < threshold, err
		},
		pressure: v1.NodeMemoryPressure,
	}
	fmt.Printf("memory: threshold memory.available<%dMi (%d MiB available at the start)\n", threshold/mi, avail/mi)
	return bench(ctx, cs, o, sc, "")
}

func benchDisk(ctx context.Context, cs kubernetes.Interface, o options) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "heartlet-bench-evict-disk-")
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	img := filepath.Join(dir, "nodefs.img")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(img)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(400 * mi); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4: %w: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, root).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount %s: %w: %s", img, err, out)
	}
	defer func() {
		unmountBelow(root)
		_ = unix.Unmount(root, unix.MNT_DETACH)
		if !o.keep {
			_ = os.RemoveAll(dir)
		}
	}()
	const threshold = 120 * mi
	sc := scenario{
		name: "disk",
		config: `evictionHard:
  nodefs.available: "120Mi"
evictionPressureTransitionPeriod: 5s
`,
		pod: func(i int) *v1.Pod {
			p := benchPod(fmt.Sprintf("diskfill-%d", i), o, "dd if=/dev/zero of=/scratch/fill bs=1M count=300; sleep 3600")
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			return p
		},
		crossed: func() (bool, error) {
			var st unix.Statfs_t
			if err := unix.Statfs(root, &st); err != nil {
				return false, fmt.Errorf("statfs %s: %w", root, err)
			}
			return int64(st.Bavail)*st.Bsize < threshold, nil
		},
		pressure: v1.NodeDiskPressure,
	}
	fmt.Println("disk: threshold nodefs.available<120Mi on a 400 MiB loop-mounted ext4 root dir")
	return bench(ctx, cs, o, sc, root)
}

// bench starts heartlet with the scenario's config (rootDir, when set, as
// its root dir), and measures o.runs evictions.
func bench(ctx context.Context, cs kubernetes.Interface, o options, sc scenario, rootDir string) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "heartlet-bench-evict-")
	if err != nil {
		return nil, err
	}
	if rootDir == "" {
		rootDir = filepath.Join(dir, "root")
	}
	if o.keep {
		fmt.Printf("%s: keeping %s (heartlet.log)\n", sc.name, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
readOnlyPort: 0
healthzPort: 0
port: %d
podLogsDir: %s
cgroupDriver: cgroupfs
failSwapOn: false
%s`, port, filepath.Join(dir, "logs"), sc.config)), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "heartlet.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(o.bin, "--config", config, "--root-dir", rootDir,
		"--pod-manifest-path", filepath.Join(dir, "manifests"), "--container-runtime-endpoint", o.endpoint,
		"--kubeconfig", o.nodeKC, "--hostname-override", o.nodeName, "--v", "2")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.bin, err)
	}
	defer func() {
		// The pods go first, so that nothing of them holds the root dir.
		_ = cs.CoreV1().Pods(namespace).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{})
		_ = waitNoPods(context.Background(), cs, 2*time.Minute)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := waitNode(ctx, cs, o.nodeName, 2*time.Minute, func(n *v1.Node) bool { return nodeReady(n) && condition(n, sc.pressure) == v1.ConditionFalse }); err != nil {
		return nil, err
	}
	// The first eviction pass comes one interval (10 s) after the start,
	// and arms the memory notification: runs measure a node in its
	// steady state.
	time.Sleep(12 * time.Second)
	var out []time.Duration
	for i := range o.runs {
		var d time.Duration
		for attempt := 0; ; attempt++ {
			pod := sc.pod(i)
			pod.Name = fmt.Sprintf("%s-%d", pod.Name, attempt)
			var err error
			d, err = once(ctx, cs, sc, pod)
			if err == nil {
				break
			}
			if !errors.Is(err, errRefused) || attempt == 30 {
				return out, fmt.Errorf("run %d: %w", i+1, err)
			}
			// The node still holds the pressure condition of the run
			// before (for the transition period): try again.
			if err := deletePods(ctx, cs); err != nil {
				return out, err
			}
			time.Sleep(2 * time.Second)
		}
		fmt.Printf("%s: run %d crossed-to-evicted=%.2fs\n", sc.name, i+1, d.Seconds())
		out = append(out, d)
		// The evicted pod's usage is gone once it is deleted.
		if err := deletePods(ctx, cs); err != nil {
			return out, err
		}
	}
	return out, nil
}

// errRefused is a victim refused at admission (the node still under
// pressure), not evicted.
var errRefused = errors.New("refused at admission")

func deletePods(ctx context.Context, cs kubernetes.Interface) error {
	if err := cs.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pods: %w", err)
	}
	return waitNoPods(ctx, cs, 2*time.Minute)
}

// once creates the victim and returns the time from the signal's crossing
// to the first read of the pod showing it Failed with reason Evicted (the
// pod is read every pollEvery).
func once(ctx context.Context, cs kubernetes.Interface, sc scenario, pod *v1.Pod) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	crossed := make(chan time.Time, 1)
	pollErr := make(chan error, 1)
	go func() {
		t := time.NewTicker(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				below, err := sc.crossed()
				if err != nil {
					pollErr <- err
					return
				}
				if below {
					crossed <- time.Now()
					return
				}
			}
		}
	}()
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, fmt.Errorf("create %s: %w", pod.Name, err)
	}
	var crossedAt time.Time
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("pod %s not evicted: %w", pod.Name, ctx.Err())
		case err := <-pollErr:
			return 0, err
		case crossedAt = <-crossed:
		case <-tick.C:
			p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodFailed {
				continue
			}
			now := time.Now()
			if p.Status.Reason == "Evicted" && strings.HasPrefix(p.Status.Message, "The node had condition") {
				return 0, fmt.Errorf("pod %s: %w: %s", pod.Name, errRefused, p.Status.Message)
			}
			if p.Status.Reason != "Evicted" || !strings.HasPrefix(p.Status.Message, "The node was low on resource") {
				return 0, fmt.Errorf("pod %s failed with reason %q: %s", pod.Name, p.Status.Reason, p.Status.Message)
			}
			if crossedAt.IsZero() {
				select {
				case crossedAt = <-crossed:
				default:
					return 0, fmt.Errorf("pod %s evicted before the threshold was seen crossed", pod.Name)
				}
			}
			return now.Sub(crossedAt), nil
		}
	}
}

func benchPod(name string, o options, script string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{
			NodeName:                      o.nodeName,
			TerminationGracePeriodSeconds: ptr(int64(1)),
			AutomountServiceAccountToken:  ptr(false),
			RestartPolicy:                 v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name: "fill", Image: o.image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
}

// memoryAvailable is memory.available as heartlet computes it on cgroup
// v1: MemTotal less the root memory cgroup's usage less its
// total_inactive_file.
func memoryAvailable() (int64, error) {
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	total, err := field(string(meminfo), "MemTotal")
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/sys/fs/cgroup/memory/memory.usage_in_bytes")
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile("/sys/fs/cgroup/memory/memory.stat")
	if err != nil {
		return 0, err
	}
	inactive, err := field(string(stat), "total_inactive_file")
	if err != nil {
		return 0, err
	}
	return total*1024 - (usage - inactive), nil
}

func field(text, key string) (int64, error) {
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.TrimSuffix(f[0], ":") == key {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", key)
}

// unmountBelow detaches what heartlet may have left mounted below dir.
func unmountBelow(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	slices.Reverse(mounts)
	for _, m := range mounts {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	for range 120 {
		if _, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s has no default ServiceAccount after 60s", namespace)
}

func waitNoPods(ctx context.Context, cs kubernetes.Interface, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		l, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("pods still in namespace %s after %s", namespace, limit)
}

func waitNode(ctx context.Context, cs kubernetes.Interface, name string, limit time.Duration, ok func(*v1.Node) bool) error {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(n) {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprint(n.Status.Conditions)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node %s not as expected after %s: %s", name, limit, last)
}

func nodeReady(n *v1.Node) bool {
	if condition(n, v1.NodeReady) != v1.ConditionTrue {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
			return false
		}
	}
	return true
}

func condition(n *v1.Node, t v1.NodeConditionType) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return v1.ConditionUnknown
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ptr[T any](v T) *T { return &v }
