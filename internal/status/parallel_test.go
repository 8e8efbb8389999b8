package status

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// gatedKube holds every status patch until gate is open, counting the
// patches in flight, so that a test sees how many run at once. The fake
// clientset serializes its reactors, so the gate sits in front of it.
type gatedKube struct {
	kubeapi.Interface
	mu               sync.Mutex
	inFlight, most   int
	full             chan struct{} // closed when want patches are in flight
	opened           bool
	want             int
	timeout          time.Duration
	gateTimedOutOnce bool
}

func (g *gatedKube) CoreV1() kubeapi.CoreV1Interface {
	return gatedCore{g.Interface.CoreV1(), g}
}

type gatedCore struct {
	kubeapi.CoreV1Interface
	g *gatedKube
}

func (c gatedCore) Pods(ns string) kubeapi.PodInterface {
	return gatedPods{c.CoreV1Interface.Pods(ns), c.g}
}

type gatedPods struct {
	kubeapi.PodInterface
	g *gatedKube
}

func (p gatedPods) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*v1.Pod, error) {
	g := p.g
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	if g.inFlight == g.want && !g.opened {
		g.opened = true
		close(g.full)
	}
	g.mu.Unlock()
	// Wait until want patches are in flight together; a syncer that
	// writes one pod at a time never gets there, and after the timeout
	// every patch goes on.
	select {
	case <-g.full:
	case <-time.After(g.timeout):
		g.mu.Lock()
		g.gateTimedOutOnce = true
		if !g.opened { // the later patches need not wait too
			g.opened = true
			close(g.full)
		}
		g.mu.Unlock()
	}
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	return p.PodInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// One round writes many pods at once, never more than maxParallelWrites,
// and every pod's status lands.
func TestSyncerWritesPodsInParallel(t *testing.T) {
	const n = 3 * maxParallelWrites
	var pods []*v1.Pod
	for i := range n {
		pods = append(pods, boundPod("default", fmt.Sprintf("p%02d", i), fmt.Sprintf("uid-%02d", i)))
	}
	e := newSyncerEnv(t, SyncerOptions{GetPod: func(ns, name string) (*v1.Pod, bool) {
		for _, p := range pods {
			if p.Namespace == ns && p.Name == name {
				return p, true
			}
		}
		return nil, false
	}})
	for _, p := range pods {
		if _, err := e.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g := &gatedKube{Interface: kubeapifake.Wrap(e.kube), full: make(chan struct{}), want: maxParallelWrites, timeout: 10 * time.Second}
	e.s.kube = g
	for _, p := range pods {
		e.m.SetPodStatus(p, runningStatus(t0))
	}
	if retry := e.s.syncRound(context.Background(), false); !retry.IsZero() {
		t.Errorf("round asks for a retry at %v, want none", retry)
	}
	if g.gateTimedOutOnce {
		t.Errorf("%d patches were never in flight together", maxParallelWrites)
	}
	if g.most > maxParallelWrites {
		t.Errorf("at most %d patches in flight, want at most %d", g.most, maxParallelWrites)
	}
	for _, p := range pods {
		if got := e.apiPod(t, p.Namespace, p.Name); got.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s in the API: phase %q, want Running", p.Name, got.Status.Phase)
		}
	}
	if n := countVerb(e.kube.Actions(), "patch/status"); n != len(pods) {
		t.Errorf("patches = %d, want one per pod (%d)", n, len(pods))
	}
}

// Many terminated pods are deleted in one round; their records and
// Manager entries go, and a later round does nothing.
func TestSyncerDeletesManyPodsInOneRound(t *testing.T) {
	const n = 2*maxParallelWrites + 3
	deleted := metav1.NewTime(t0)
	e := newSyncerEnv(t, SyncerOptions{CanDelete: func(types.UID) bool { return true }})
	for i := range n {
		p := boundPod("default", fmt.Sprintf("p%02d", i), fmt.Sprintf("uid-%02d", i))
		p.DeletionTimestamp = &deleted
		if _, err := e.kube.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.m.SetPodStatus(p, terminatedStatus(v1.PodSucceeded, 0))
	}
	acts := e.round(t, false)
	if got := countVerb(acts, "delete"); got != n {
		t.Errorf("deletes = %d, want %d (actions %v)", got, n, verbs(acts))
	}
	if len(e.s.records) != 0 || len(e.m.Pods()) != 0 {
		t.Errorf("after the round: %d records, %d pods in the Manager; want none", len(e.s.records), len(e.m.Pods()))
	}
	if acts := e.round(t, false); len(acts) != 0 {
		t.Errorf("a later round made %v", verbs(acts))
	}
}
