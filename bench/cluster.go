package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterOptions are the inputs of the cluster-mode benchmark.
type clusterOptions struct {
	bin, endpoint, image       string
	adminKubeconfig, nodeKC    string
	nodeName                   string
	pods                       int
	idle                       time.Duration
	namespace                  string
	readyTimeout, startTimeout time.Duration
	keep                       bool
}

// runCluster measures heartlet as a node of the control plane of
// hack/kube.sh: the API requests per minute of an idle node (client-side,
// from heartlet's rest_client_requests_total), then the latency from pod
// creation in the API to phase Running seen through a watch, for N pods
// created at once and already bound to the node (the scheduler's part is
// not heartlet's), with the image present.
func runCluster(o clusterOptions) error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", o.adminKubeconfig)
	if err != nil {
		return fmt.Errorf("admin kubeconfig %s: %w", o.adminKubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "heartlet-bench-cluster-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Printf("cluster: keeping %s (heartlet.log)\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
readOnlyPort: %d
healthzPort: 0
podLogsDir: %s
cgroupDriver: cgroupfs
failSwapOn: false
`, port, filepath.Join(dir, "logs"))), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "heartlet.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(o.bin, "--config", config, "--root-dir", filepath.Join(dir, "root"),
		"--pod-manifest-path", manifests, "--container-runtime-endpoint", o.endpoint,
		"--kubeconfig", o.nodeKC, "--hostname-override", o.nodeName)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", o.bin, err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	if err := waitNodeSchedulable(ctx, cs, o.nodeName, o.readyTimeout); err != nil {
		return err
	}
	fmt.Printf("cluster: node %s Ready and schedulable\n", o.nodeName)

	// Idle: nothing to run; only the node status, the Lease and the
	// watches talk to the API server.
	time.Sleep(10 * time.Second)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	r0, err := restRequests(metricsURL)
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(o.idle)
	r1, err := restRequests(metricsURL)
	if err != nil {
		return err
	}
	perMin := (r1 - r0) / time.Since(t0).Minutes()
	fmt.Printf("cluster: idle-api-requests=%.0f over %s (%.1f per minute)\n", r1-r0, o.idle, perMin)

	if err := ensureNamespace(ctx, cs, o.namespace); err != nil {
		return err
	}
	defer func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), o.namespace, metav1.DeleteOptions{})
	}()
	times, err := podStartLatency(ctx, cs, o)
	if err != nil {
		return err
	}
	lat := latencies(times)
	fmt.Printf("cluster: pods=%d create-to-running p50=%.2fs p90=%.2fs p99=%.2fs max=%.2fs\n", len(lat),
		percentile(lat, 50).Seconds(), percentile(lat, 90).Seconds(), percentile(lat, 99).Seconds(), lat[len(lat)-1].Seconds())

	// A graceful delete: the pods disappear once heartlet has stopped them
	// and deleted their objects.
	start := time.Now()
	if err := cs.CoreV1().Pods(o.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete bench pods: %w", err)
	}
	if err := waitNoPods(ctx, cs, o.namespace, o.startTimeout); err != nil {
		return err
	}
	fmt.Printf("cluster: pods=%d delete-to-gone=%.2fs\n", len(lat), time.Since(start).Seconds())
	return nil
}

// podTimes are when a pod's create call was made and when the watch showed
// it Running.
type podTimes struct{ created, running time.Time }

// latencies returns the create→Running latencies of times, sorted.
func latencies(times map[string]podTimes) []time.Duration {
	out := make([]time.Duration, 0, len(times))
	for _, t := range times {
		out = append(out, t.running.Sub(t.created))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// podStartLatency creates o.pods pods at once and returns, per pod name,
// the time just before its create call and the time of the watch event
// showing it Running.
func podStartLatency(ctx context.Context, cs kubernetes.Interface, o clusterOptions) (map[string]podTimes, error) {
	l, err := cs.CoreV1().Pods(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	rv := l.ResourceVersion
	w, err := cs.CoreV1().Pods(o.namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	defer func() { w.Stop() }()

	var mu sync.Mutex
	created := map[string]time.Time{}
	errc := make(chan error, o.pods)
	for i := range o.pods {
		name := fmt.Sprintf("bench-%d", i)
		pod := benchPod(o, name)
		go func() {
			mu.Lock()
			created[name] = time.Now()
			mu.Unlock()
			_, err := cs.CoreV1().Pods(o.namespace).Create(ctx, pod, metav1.CreateOptions{})
			errc <- err
		}()
	}
	for range o.pods {
		if err := <-errc; err != nil {
			return nil, fmt.Errorf("create pod: %w", err)
		}
	}

	running := map[string]podTimes{}
	rewatches := 0
	deadline := time.After(o.startTimeout)
	for len(running) < o.pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server may close a watch (a timeout, or a
				// watcher it found too slow during the burst): watch
				// again from the last version seen.
				if rewatches++; rewatches > maxRewatches {
					return nil, fmt.Errorf("pod watch closed %d times with %d of %d pods running", rewatches, len(running), o.pods)
				}
				if w, err = rewatch(ctx, cs, o.namespace, rv, running); err != nil {
					return nil, err
				}
				continue
			}
			if ev.Type == watch.Error {
				// The watch cache may lag behind etcd ("Too large
				// resource version") or the version may be gone:
				// watch again.
				err := apierrors.FromObject(ev.Object)
				if !apierrors.IsTimeout(err) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) && !strings.Contains(err.Error(), "Too large resource version") {
					return nil, fmt.Errorf("pod watch: %w", err)
				}
				if rewatches++; rewatches > maxRewatches {
					return nil, fmt.Errorf("pod watch failed %d times with %d of %d pods running: %w", rewatches, len(running), o.pods, err)
				}
				w.Stop()
				time.Sleep(200 * time.Millisecond)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					rv = ""
				}
				if w, err = rewatch(ctx, cs, o.namespace, rv, running); err != nil {
					return nil, err
				}
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if p.Status.Phase != v1.PodRunning {
				continue
			}
			if _, seen := running[p.Name]; seen {
				continue
			}
			mu.Lock()
			c := created[p.Name]
			mu.Unlock()
			running[p.Name] = podTimes{created: c, running: time.Now()}
		case <-deadline:
			return nil, fmt.Errorf("%d of %d pods Running after %s", len(running), o.pods, o.startTimeout)
		}
	}
	for name, t := range running {
		if t.created.IsZero() { // found by a list after a rewatch
			t.created = created[name]
			running[name] = t
		}
	}
	return running, nil
}

// benchPod is one of the benchmark's pods: bound to the node, a busybox
// sleep, grace period 1 s.
func benchPod(o clusterOptions, name string) *v1.Pod {
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.namespace},
		Spec: v1.PodSpec{
			NodeName:                      o.nodeName,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "c", Image: o.image, ImagePullPolicy: v1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
}

// maxRewatches bounds how often podStartLatency watches again.
const maxRewatches = 20

// rewatch watches the namespace's pods again from rv. With no rv (it
// expired) it lists them first and records pods already Running, at the
// time of the list, in running (those not seen before; their created time
// is filled in by the caller's map), then watches from the list.
func rewatch(ctx context.Context, cs kubernetes.Interface, ns, rv string, running map[string]podTimes) (watch.Interface, error) {
	if rv == "" {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		now := time.Now()
		for _, p := range l.Items {
			if _, seen := running[p.Name]; !seen && p.Status.Phase == v1.PodRunning {
				running[p.Name] = podTimes{running: now}
			}
		}
		rv = l.ResourceVersion
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		return nil, fmt.Errorf("watch pods again: %w", err)
	}
	return w, nil
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func waitNodeSchedulable(ctx context.Context, cs kubernetes.Interface, name string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && nodeReady(n) && !hasNotReadyTaint(n) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("node %s not Ready and schedulable after %s", name, limit)
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func hasNotReadyTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == v1.TaintNodeNotReady || t.Key == v1.TaintNodeUnreachable {
			return true
		}
	}
	return false
}

// ensureNamespace creates ns and waits for its default ServiceAccount,
// without which the API server refuses pods.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	for range 120 {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s has no default ServiceAccount after 60s", ns)
}

func waitNoPods(ctx context.Context, cs kubernetes.Interface, ns string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("bench pods still in namespace %s after %s", ns, limit)
}

// restRequests sums rest_client_requests_total from a Prometheus text
// exposition.
func restRequests(url string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, fmt.Errorf("read heartlet metrics: %w", err)
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, "rest_client_requests_total")
}

func sumMetric(r io.Reader, name string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no %s in the exposition", name)
	}
	return sum, sc.Err()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
