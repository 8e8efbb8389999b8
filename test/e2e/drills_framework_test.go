//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"
)

// The failure drills run heartlet in cluster mode under a fault (heartlet
// killed, containerd or the API server stopped, the root-dir disk full)
// and log what they measure with t.Logf. Their bounds are generous
// correctness bounds ("converged eventually"), never performance asserts.

// drillLabel labels every pod of a drill with the drill's name, so that
// one list or one delete covers them.
const drillLabel = "heartlet-drill"

// drillClient is a client-go clientset for the cluster admin: listing a
// hundred pods every few hundred milliseconds through kubectl would load
// the machine more than the drill itself.
func drillClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// hackScript runs hack/NAME with args from the repository under test and
// fails t when it fails.
func hackScript(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := runHack(name, args...); err != nil {
		t.Fatal(err)
	}
}

func runHack(name string, args ...string) error {
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", name))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// drillPod is a small busybox pod of drill with the given name; kind picks
// its probes: "" none, "exec-ready", "http-ready", "tcp-live", "exec-live".
func drillPod(drill, name, kind string) *v1.Pod {
	grace := int64(1)
	p := &v1.Pod{}
	p.APIVersion, p.Kind = "v1", "Pod"
	p.Name, p.Namespace = name, "default"
	p.Labels = map[string]string{drillLabel: drill}
	p.Spec.TerminationGracePeriodSeconds = &grace
	c := shContainer("main", sleeper)
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("5m"), v1.ResourceMemory: resource.MustParse("8Mi")},
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")},
	}
	slow := func(h v1.ProbeHandler) *v1.Probe {
		return &v1.Probe{ProbeHandler: h, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3, SuccessThreshold: 1}
	}
	switch kind {
	case "exec-ready":
		c.ReadinessProbe = slow(execAction("true"))
	case "exec-live":
		c.LivenessProbe = slow(execAction("true"))
	case "http-ready", "tcp-live":
		c.Command = []string{"sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"}
		c.Ports = []v1.ContainerPort{{ContainerPort: 8080, Protocol: v1.ProtocolTCP}}
		if kind == "http-ready" {
			c.ReadinessProbe = slow(httpAction("/", intstr.FromInt32(8080)))
		} else {
			c.LivenessProbe = slow(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}})
		}
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

// probeKinds cycles through the probe kinds: about half of a drill's pods
// have a probe.
var probeKinds = []string{"", "exec-ready", "", "http-ready", "", "tcp-live", "", "exec-live"}

// drillSet is the pods of one drill: API pods created with kubectl, and
// static pods whose mirror pods (named <name>-<node>) carry the label too.
type drillSet struct {
	drill   string
	h       *heartlet
	api     []string // API pod names
	static  []string // static pod (manifest) names
	created time.Time
}

// mirrorName is the API name of static pod name.
func mirrorName(name string) string { return name + "-" + clusterNode }

// names are the API names of every pod of the set.
func (s *drillSet) names() []string {
	out := slices.Clone(s.api)
	for _, n := range s.static {
		out = append(out, mirrorName(n))
	}
	return out
}

// createDrillPods creates nAPI API pods and nStatic static pods for drill
// (with probes as probeKinds) and registers one cleanup that removes them
// all and waits until the runtime has none left.
func createDrillPods(t *testing.T, h *heartlet, drill string, nAPI, nStatic int) *drillSet {
	t.Helper()
	s := &drillSet{drill: drill, h: h, created: time.Now()}
	t.Cleanup(func() { cleanupDrill(t, s) })
	var docs []string
	for i := range nAPI {
		name := fmt.Sprintf("%s-api-%d", drill, i)
		b, err := yaml.Marshal(drillPod(drill, name, probeKinds[i%len(probeKinds)]))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
		s.api = append(s.api, name)
	}
	for i := range nStatic {
		name := fmt.Sprintf("%s-static-%d", drill, i)
		p := drillPod(drill, name, probeKinds[(i+1)%len(probeKinds)])
		p.Namespace = ""
		b, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		h.writeManifest(t, name+".yaml", string(b))
		s.static = append(s.static, name)
	}
	if len(docs) > 0 {
		if _, err := kubectlIn([]byte(strings.Join(docs, "---\n")), "create", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// addAPIPods creates more API pods of the set (used by drills that create
// pods in the middle).
func (s *drillSet) addAPIPods(t *testing.T, pods ...*v1.Pod) {
	t.Helper()
	var docs []string
	for _, p := range pods {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[drillLabel] = s.drill
		b, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
		s.api = append(s.api, p.Name)
	}
	if _, err := kubectlIn([]byte(strings.Join(docs, "---\n")), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// cleanupDrill removes the set's manifests and API pods and waits until
// the runtime holds nothing of them; leftovers are removed through CRI.
func cleanupDrill(t *testing.T, s *drillSet) {
	t.Helper()
	start := time.Now()
	for _, n := range s.static {
		s.h.removeManifest(t, n+".yaml")
	}
	// kubectl's own run is bounded by kubectlTimeout, less than 100 pods
	// take to go on a loaded machine: wait for them here instead.
	gone := false
	if _, err := kubectl("delete", "pods", "-n", "default", "-l", drillLabel+"="+s.drill,
		"--grace-period=1", "--wait=false"); err != nil {
		t.Errorf("delete the drill's pods: %v", err)
	} else {
		cs := drillClient(t)
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			pods, err := listDrill(ctx, cs, s.drill)
			cancel()
			if err == nil && len(pods) == 0 {
				gone = true
				break
			}
		}
	}
	if !gone {
		t.Errorf("the drill's pods are still in the API 3 minutes after their deletion; forcing")
		_, _ = kubectl("delete", "pods", "-n", "default", "-l", drillLabel+"="+s.drill, "--grace-period=0", "--force")
	}
	c := newCRI(t)
	prefix := s.drill + "-"
	left := func() []*runtimeapi.PodSandbox {
		sbs, err := c.sandboxes(map[string]string{labelPodNamespace: "default"})
		if err != nil {
			return nil
		}
		return slices.DeleteFunc(sbs, func(sb *runtimeapi.PodSandbox) bool {
			return !strings.HasPrefix(sb.GetMetadata().GetName(), prefix)
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for s.h.running() && time.Now().Before(deadline) && len(left()) > 0 {
		time.Sleep(time.Second)
	}
	if sbs := left(); len(sbs) > 0 {
		if s.h.running() {
			t.Errorf("%d sandboxes of drill %s left 2 minutes after the pods were deleted; removing them", len(sbs), s.drill)
		}
		seen := map[string]bool{}
		for _, sb := range sbs {
			if n := sb.GetMetadata().GetName(); !seen[n] {
				seen[n] = true
				c.forceRemovePod(t, n)
			}
		}
	}
	t.Logf("drill %s: cleanup took %v", s.drill, time.Since(start).Round(100*time.Millisecond))
}

// listDrill lists the set's pods in the API by name.
func listDrill(ctx context.Context, cs kubernetes.Interface, drill string) (map[string]*v1.Pod, error) {
	list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: drillLabel + "=" + drill})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// waitDrillRunning waits until every pod of the set is Running and Ready
// in the API and returns them, with how long that took since creation.
func waitDrillRunning(t *testing.T, cs kubernetes.Interface, s *drillSet, timeout time.Duration) (map[string]*v1.Pod, time.Duration) {
	t.Helper()
	var pods map[string]*v1.Pod
	names := s.names()
	waitFor(t, timeout, fmt.Sprintf("the %d pods of drill %s to be Running and Ready", len(names), s.drill), func() (bool, string) {
		if !s.h.running() {
			t.Fatalf("heartlet exited: %v", s.h.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := listDrill(ctx, cs, s.drill)
		if err != nil {
			return false, err.Error()
		}
		pods = got
		var notReady []string
		for _, n := range names {
			if p := got[n]; p == nil || !podRunningReady(p) {
				notReady = append(notReady, n)
			}
		}
		return len(notReady) == 0, fmt.Sprintf("%d of %d not Running and Ready, e.g. %v", len(notReady), len(names), notReady[:min(5, len(notReady))])
	})
	return pods, time.Since(s.created)
}

// podFingerprint is what must not change about a running pod across a
// fault: its UID (a mirror pod recreated counts), its containers' IDs and
// restart counts, and that it is Running and Ready.
func podFingerprint(p *v1.Pod) string {
	return fmt.Sprintf("uid=%s running-ready=%v %s", p.UID, podRunningReady(p), containerSummary(p))
}

// convergence watches the set's pods in the API and compares each with
// the fingerprint it had before a fault.
type convergence struct {
	mu     sync.Mutex
	before map[string]string
	// deviated counts the pods whose fingerprint differed at least once.
	deviated map[string]bool
	// lastOK is when every pod last matched after a deviation.
	lastBad, firstAllOK time.Time
	samples             int
}

// watchConvergence polls the API every 250 ms from now until stop is
// closed, recording deviations from before.
func watchConvergence(ctx context.Context, cs kubernetes.Interface, drill string, before map[string]*v1.Pod) (*convergence, func() *convergence) {
	cv := &convergence{before: map[string]string{}, deviated: map[string]bool{}}
	for n, p := range before {
		cv.before[n] = podFingerprint(p)
	}
	mu := &cv.mu
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
			pods, err := listDrill(lctx, cs, drill)
			lcancel()
			now := time.Now()
			if err == nil {
				mu.Lock()
				cv.samples++
				bad := false
				for n, fp := range cv.before {
					if p := pods[n]; p == nil || podFingerprint(p) != fp {
						cv.deviated[n] = true
						bad = true
					}
				}
				if bad {
					cv.lastBad = now
					cv.firstAllOK = time.Time{}
				} else if cv.firstAllOK.IsZero() {
					cv.firstAllOK = now
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return cv, func() *convergence {
		cancel()
		<-done
		return cv
	}
}

// ignore stops watching the named pods: from the next sample on, the
// others alone decide convergence.
func (cv *convergence) ignore(names []string) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	for _, n := range names {
		delete(cv.before, n)
		delete(cv.deviated, n)
	}
}

// readySandboxes returns the pod name of every ready sandbox of the
// namespace, by sandbox ID.
func readySandboxes(t *testing.T, c *cri) map[string]string {
	t.Helper()
	sbs, err := c.sandboxes(map[string]string{labelPodNamespace: "default"})
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	out := map[string]string{}
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			out[sb.Id] = sb.GetLabels()[labelPodName]
		}
	}
	return out
}

// snapshotAll describes every sandbox and container of the given pods as
// CRI sees them, by pod name (a mirror pod's runtime objects carry the
// static pod's UID, and its name).
func snapshotAll(t *testing.T, c *cri, names []string) map[string]string {
	t.Helper()
	sbs, err := c.sandboxes(map[string]string{labelPodNamespace: "default"})
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	ctrs, err := c.containers(map[string]string{labelPodNamespace: "default"})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	parts := map[string][]string{}
	for _, sb := range sbs {
		n := sb.GetLabels()[labelPodName]
		parts[n] = append(parts[n], fmt.Sprintf("sandbox %s %v", sb.Id, sb.State))
	}
	for _, ctr := range ctrs {
		n := ctr.GetLabels()[labelPodName]
		parts[n] = append(parts[n], fmt.Sprintf("container %s %s attempt=%d %v", ctr.GetLabels()[labelContainerName], ctr.Id, ctr.GetMetadata().GetAttempt(), ctr.State))
	}
	out := map[string]string{}
	for _, n := range names {
		slices.Sort(parts[n])
		out[n] = strings.Join(parts[n], "; ")
	}
	return out
}

// diffSnapshots lists the pods whose runtime objects differ.
func diffSnapshots(before, after map[string]string) []string {
	var out []string
	for n, b := range before {
		if after[n] != b {
			out = append(out, fmt.Sprintf("%s:\n  before %s\n  after  %s", n, b, after[n]))
		}
	}
	slices.Sort(out)
	return out
}

// healthzRecorder polls /healthz?verbose every 250 ms and records each
// change of its answer with the time.
type healthzRecorder struct {
	mu      sync.Mutex
	changes []healthzChange
	stop    func()
}

type healthzChange struct {
	at     time.Time
	ok     bool
	detail string // the failing checks, or the error
}

func recordHealthz(url string) *healthzRecorder {
	r := &healthzRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.stop = func() { cancel(); <-done }
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			body, status, err := httpGet(url + "?verbose")
			ok := err == nil && status == http.StatusOK
			detail := ""
			switch {
			case err != nil:
				detail = err.Error()
			case !ok:
				var failing []string
				for _, l := range strings.Split(string(body), "\n") {
					if strings.HasPrefix(l, "[-]") {
						failing = append(failing, l)
					}
				}
				detail = strings.Join(failing, "; ")
			}
			r.mu.Lock()
			if n := len(r.changes); n == 0 || r.changes[n-1].ok != ok || r.changes[n-1].detail != detail {
				r.changes = append(r.changes, healthzChange{at: time.Now(), ok: ok, detail: detail})
			}
			r.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return r
}

// history returns the recorded changes.
func (r *healthzRecorder) history() []healthzChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

// ms rounds d for logs.
func ms(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// writeUntilFull writes zeros to path until the filesystem refuses
// (ENOSPC) and returns how many bytes it wrote.
func writeUntilFull(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("fill %s: %v", path, err)
			}
			return n
		}
	}
}
