//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The cluster-mode tests run heartlet as node clusterNode of the control
// plane of hack/kube.sh and drive it with kubectl as the cluster admin. They
// skip themselves unless HEARTLET_KUBECONFIG (admin) and
// HEARTLET_NODE_KUBECONFIG (the node identity) are set: source
// /run/heartlet-kube/env after hack/kube.sh start.

const (
	// nodeReadyTimeout is how long a starting heartlet may take to register
	// its Node and report it Ready.
	nodeReadyTimeout = 90 * time.Second
	// kubectlTimeout bounds one kubectl call.
	kubectlTimeout = 60 * time.Second
)

var (
	// clusterNode is the node name the control plane's node certificate is
	// issued for (HEARTLET_NODE_NAME).
	clusterNode = "heartlet-e2e"
	// adminKubeconfig and nodeKubeconfig are the control plane's kubeconfigs.
	adminKubeconfig, nodeKubeconfig string
)

// requireCluster skips t unless a control plane is configured.
func requireCluster(t *testing.T) {
	t.Helper()
	adminKubeconfig = os.Getenv("HEARTLET_KUBECONFIG")
	nodeKubeconfig = os.Getenv("HEARTLET_NODE_KUBECONFIG")
	if adminKubeconfig == "" || nodeKubeconfig == "" {
		t.Skip("HEARTLET_KUBECONFIG or HEARTLET_NODE_KUBECONFIG is not set (run hack/kube.sh start, then source /run/heartlet-kube/env)")
	}
	if n := os.Getenv("HEARTLET_NODE_NAME"); n != "" {
		clusterNode = n
	}
}

// clusterOptions tunes a cluster-mode heartlet.
type clusterOptions struct {
	// config is appended to the KubeletConfiguration.
	config string
	// kubeconfig overrides the node kubeconfig.
	kubeconfig string
	// args are more command-line arguments.
	args []string
}

// startClusterHeartlet starts heartlet in cluster mode with fresh
// directories and waits until its Node is Ready and schedulable. It is
// stopped when the test ends; its log is printed if the test failed.
func startClusterHeartlet(t *testing.T, opts clusterOptions) *heartlet {
	t.Helper()
	requireCluster(t)
	h := newClusterHeartlet(t, opts)
	t.Cleanup(h.cleanup)
	startCluster(t, h, opts)
	waitNodeSchedulable(t, h)
	return h
}

// newClusterHeartlet prepares the directories and config of a cluster-mode
// heartlet without starting it.
func newClusterHeartlet(t *testing.T, opts clusterOptions) *heartlet {
	t.Helper()
	h := newHeartlet(t, opts.config)
	// Runs after heartlet has stopped and before the directory is removed.
	t.Cleanup(func() { unmountLeftovers(t, h.dir) })
	return h
}

// clusterArgs are the command-line arguments of a cluster-mode heartlet.
func clusterArgs(h *heartlet, kubeconfig string) []string {
	return []string{
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", criEndpoint,
		"--kubeconfig", kubeconfig,
		"--hostname-override", clusterNode,
		"--v", "2",
		// The kubelet API trusts client certificates of the cluster CA (the
		// apiserver's kubelet-client identity), as kubeadm configures it.
		"--client-ca-file", clusterCAFile(),
	}
}

// startCluster runs the binary (again, after a stop) in cluster mode and
// waits until it serves its read-only port.
func startCluster(t *testing.T, h *heartlet, opts clusterOptions) {
	t.Helper()
	kubeconfig := opts.kubeconfig
	if kubeconfig == "" {
		kubeconfig = nodeKubeconfig
	}
	h.run("cluster mode", append(clusterArgs(h, kubeconfig), opts.args...)...)
}

// kubectl runs kubectl as the cluster admin and returns its stdout.
func kubectl(args ...string) (string, error) {
	return kubectlIn(nil, args...)
}

// kubectlIn runs kubectl with stdin.
func kubectlIn(stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", adminKubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustKubectl runs kubectl and fails t on error.
func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isNotFound reports whether a kubectl error is the API's NotFound.
func isNotFound(err error) bool {
	return err != nil && strings.Contains(err.Error(), "NotFound")
}

// getJSON fetches one object with kubectl get -o json into obj.
func getJSON(obj any, args ...string) error {
	out, err := kubectl(append([]string{"get", "-o", "json"}, args...)...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), obj); err != nil {
		return fmt.Errorf("decode kubectl get %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func getNode() (*v1.Node, error) {
	var n v1.Node
	if err := getJSON(&n, "node", clusterNode); err != nil {
		return nil, err
	}
	return &n, nil
}

func getLease() (*coordinationv1.Lease, error) {
	var l coordinationv1.Lease
	if err := getJSON(&l, "lease", "-n", "kube-node-lease", clusterNode); err != nil {
		return nil, err
	}
	return &l, nil
}

// getAPIPod returns pod default/name, or nil when it does not exist.
func getAPIPod(name string) (*v1.Pod, error) {
	var p v1.Pod
	err := getJSON(&p, "pod", "-n", "default", name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func nodeCondition(n *v1.Node, ct v1.NodeConditionType) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return ""
}

// waitNodeReady waits until the Node reports Ready=want.
func waitNodeReady(t *testing.T, h *heartlet, want v1.ConditionStatus, timeout time.Duration) *v1.Node {
	t.Helper()
	var node *v1.Node
	waitFor(t, timeout, fmt.Sprintf("node %s to be Ready=%s", clusterNode, want), func() (bool, string) {
		if want == v1.ConditionTrue && h != nil && !h.running() {
			t.Fatalf("heartlet exited: %v", h.err)
		}
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		node = n
		return nodeCondition(n, v1.NodeReady) == want, "conditions: " + describeConditions(n)
	})
	return node
}

// waitNodeSchedulable waits until the Node is Ready and the node lifecycle
// controller has removed its NoSchedule/NoExecute taints, so that the
// scheduler places new pods on it.
func waitNodeSchedulable(t *testing.T, h *heartlet) {
	t.Helper()
	waitNodeReady(t, h, v1.ConditionTrue, nodeReadyTimeout)
	waitFor(t, time.Minute, fmt.Sprintf("node %s to lose its not-ready/unreachable taints", clusterNode), func() (bool, string) {
		n, err := getNode()
		if err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if strings.HasPrefix(taint.Key, "node.kubernetes.io/") {
				return false, fmt.Sprintf("taints: %v", n.Spec.Taints)
			}
		}
		return !n.Spec.Unschedulable, fmt.Sprintf("unschedulable=%v", n.Spec.Unschedulable)
	})
}

func describeConditions(n *v1.Node) string {
	var parts []string
	for _, c := range n.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

// apiPod builds a pod in namespace default running a busybox container with
// a short grace period; mutate adjusts it.
func apiPod(name string, mutate func(*v1.Pod)) *v1.Pod {
	grace := int64(5)
	p := &v1.Pod{}
	p.APIVersion = "v1"
	p.Kind = "Pod"
	p.Name = name
	p.Namespace = "default"
	p.Labels = map[string]string{"app": "heartlet-e2e", "test-pod": name}
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers = []v1.Container{shContainer("main", sleeper)}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// createObject creates obj with kubectl create and registers its deletion.
func createObject(t *testing.T, obj any, kind, name string) {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("render %s %s: %v", kind, name, err)
	}
	if _, err := kubectlIn(b, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := kubectl("delete", kind, "-n", "default", name, "--ignore-not-found", "--wait=true"); err != nil {
			t.Errorf("clean up %s %s: %v", kind, name, err)
		}
	})
}

// createPod creates pod with kubectl and registers a cleanup that deletes it
// and waits until it is gone from the API and from the runtime. Cleanups run
// before the heartlet started earlier in the test is stopped.
func createPod(t *testing.T, pod *v1.Pod) {
	t.Helper()
	b, err := yaml.Marshal(pod)
	if err != nil {
		t.Fatalf("render pod %s: %v", pod.Name, err)
	}
	if _, err := kubectlIn(b, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePodAndWait(t, pod.Name) })
}

// deletePodAndWait deletes pod default/name gracefully and waits for it to
// disappear; if that fails it force-deletes it and removes its sandboxes
// through CRI so that later tests start clean.
func deletePodAndWait(t *testing.T, name string) {
	t.Helper()
	_, err := kubectl("delete", "pod", "-n", "default", name, "--ignore-not-found", "--wait=true", "--timeout=50s")
	if err != nil {
		t.Errorf("delete pod %s: %v; forcing", name, err)
		_, _ = kubectl("delete", "pod", "-n", "default", name, "--ignore-not-found", "--grace-period=0", "--force")
	}
	c := newCRI(t)
	deadline := time.Now().Add(podRemoveTimeout)
	for {
		n, err := c.countPodObjects(name)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pod %s still has %d sandboxes/containers (err %v); removing them", name, n, err)
			c.forceRemovePod(t, name)
			return
		}
		time.Sleep(pollInterval)
	}
}

// waitAPIPod polls the API until pod default/name satisfies cond.
func waitAPIPod(t *testing.T, h *heartlet, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var found *v1.Pod
	waitFor(t, timeout, fmt.Sprintf("pod %s %s", name, what), func() (bool, string) {
		if h != nil && !h.running() {
			t.Fatalf("heartlet exited: %v", h.err)
		}
		p, err := getAPIPod(name)
		if err != nil {
			return false, err.Error()
		}
		if p == nil {
			return false, "not found"
		}
		found = p
		return cond(p), "last status: " + describeStatus(p)
	})
	return found
}

// podRunningReady reports whether the pod is Running, Ready and has an IP.
func podRunningReady(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" && podCondition(p, v1.PodReady) == v1.ConditionTrue
}

// waitAPIPodRunning waits until the pod is Running and Ready with an IP.
func waitAPIPodRunning(t *testing.T, h *heartlet, name string) *v1.Pod {
	t.Helper()
	return waitAPIPod(t, h, name, podStartTimeout, "to be Running and Ready", podRunningReady)
}

// podEvents lists the events about pod default/name with the given reason.
func podEvents(name, reason string) ([]v1.Event, error) {
	var list v1.EventList
	sel := "involvedObject.kind=Pod,involvedObject.name=" + name
	if reason != "" {
		sel += ",reason=" + reason
	}
	if err := getJSON(&list, "events", "-n", "default", "--field-selector", sel); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitingReason is the waiting reason of the pod's container name, or "".
func waitingReason(p *v1.Pod, name string) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason
		}
	}
	return ""
}

// unmountLeftovers fails the test if volumes are still mounted under dir
// once every pod has been deleted and heartlet has stopped, and unmounts
// them so that the directory can be removed.
func unmountLeftovers(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Logf("read mountinfo: %v", err)
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := strings.ReplaceAll(f[4], "\\040", " ")
		if strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	if len(mounts) == 0 {
		return
	}
	t.Errorf("volumes still mounted after every pod was deleted: %v", mounts)
	// Deepest first.
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", mp, err)
		}
	}
}
