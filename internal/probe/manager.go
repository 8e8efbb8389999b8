package probe

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/heartlet/heartlet/internal/coalesce"
	"github.com/heartlet/heartlet/internal/podspec"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// updatesBuffer is how many result changes the updates channel holds. When
// it is full, the latest change of each probe waits beside it (coalesced)
// until a later probe round finds room: a worker never blocks on its
// reader and no change is lost.
const updatesBuffer = 128

// updateKey is what a waiting update is coalesced by: one probe of one
// container.
type updateKey struct {
	pod       types.UID
	container string
	kind      Kind
}

// Options are what the manager needs.
type Options struct {
	// Exec runs exec probes; nil makes them error.
	Exec ExecRunner
	// Status gives the pods' current statuses.
	Status StatusGetter
	// Recorder records Unhealthy and ProbeWarning events; nil records none.
	Recorder Recorder
	// Journal records probe failures; nil records none.
	Journal Journal
	// Clock paces the workers; the real clock when nil.
	Clock clock.WithTicker
	// PreviousStatus returns the status the API last had for pod, which a
	// container adopted after a restart of heartlet starts from (see
	// worker.initialFor): for a static pod, its mirror pod's status. nil,
	// or false from it, uses pod.Status.
	PreviousStatus func(pod *v1.Pod) (*v1.PodStatus, bool)
	// AfterRound, when set, is called by a worker after each of its probe
	// rounds, and WorkerExited when the worker has ended (with the
	// manager's lock held: neither may call the Manager). Tests use them to
	// wait for rounds instead of time.
	AfterRound, WorkerExited func(pod types.UID, container string, kind Kind)
	// Rand returns a number in [0, 1) for the workers' initial jitter;
	// math/rand's when nil.
	Rand func() float64
}

// previousStatus is the pod's status as the API last had it.
func (m *Manager) previousStatus(pod *v1.Pod) *v1.PodStatus {
	if m.opts.PreviousStatus != nil {
		if st, ok := m.opts.PreviousStatus(pod); ok && st != nil {
			return st
		}
	}
	return &pod.Status
}

// workerKey names one worker: one probe kind of one container of a pod.
type workerKey struct {
	uid       types.UID
	container string
	kind      Kind
}

// resultKey names one result: one probe kind of one container instance.
type resultKey struct {
	containerID string
	kind        Kind
}

// Manager runs the probes of the pods it is given.
type Manager struct {
	opts    Options
	clock   clock.WithTicker
	prober  *prober
	updates *coalesce.Queue[updateKey, Update]
	// started is when the manager was made: containers running since
	// before it were adopted from an earlier heartlet.
	started time.Time

	mu      sync.Mutex
	ctx     context.Context // set by Run; workers start once it is
	pods    map[types.UID]*v1.Pod
	workers map[workerKey]*worker
	results map[resultKey]Result
	wg      sync.WaitGroup
}

// NewManager returns a manager; no worker runs before Run.
func NewManager(opts Options) *Manager {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	return &Manager{
		opts:    opts,
		clock:   clk,
		prober:  newProber(opts.Exec),
		updates: coalesce.New[updateKey, Update](updatesBuffer),
		started: clk.Now(),
		pods:    map[types.UID]*v1.Pod{},
		workers: map[workerKey]*worker{},
		results: map[resultKey]Result{},
	}
}

// Run starts the workers of the pods added so far and of those added
// later, and stops them all when ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.ctx = ctx
	for _, pod := range m.pods {
		m.syncWorkersLocked(pod)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	for _, w := range m.workers {
		w.stop()
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// Updates delivers the changes of results. Workers never wait for its
// reader: when the reader falls behind, the changes of a probe it has not
// taken yet are coalesced to the latest.
func (m *Manager) Updates() <-chan Update {
	return m.updates.C()
}

// AddPod starts a worker for every probe of the pod's app containers and
// sidecars (init containers with restartPolicy Always) that has none, and
// stops the workers of probes the spec no longer has. It is called again
// with every new version of the pod.
func (m *Manager) AddPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[pod.UID] = pod
	m.syncWorkersLocked(pod)
}

// RemovePod stops every worker of the pod; their results go with them.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, uid)
	for k, w := range m.workers {
		if k.uid == uid {
			w.stop()
			delete(m.workers, k)
		}
	}
}

// Result returns the result of the kind of probe for the container with
// the given runtime ID (with or without the "<runtime>://" prefix); false
// when no worker has one.
func (m *Manager) Result(containerID string, kind Kind) (Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[resultKey{bareID(containerID), kind}]
	return r, ok
}

// probeOf returns the container's probe of the kind, nil when none.
func probeOf(c *v1.Container, kind Kind) *v1.Probe {
	switch kind {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	}
	return nil
}

func (m *Manager) syncWorkersLocked(pod *v1.Pod) {
	want := map[workerKey]*v1.Container{}
	for _, c := range podspec.RunningContainers(pod) {
		for _, kind := range []Kind{Liveness, Readiness, Startup} {
			if probeOf(c, kind) != nil {
				want[workerKey{pod.UID, c.Name, kind}] = c
			}
		}
	}
	for k, w := range m.workers {
		if k.uid != pod.UID {
			continue
		}
		c, ok := want[k]
		if ok && apiequality.Semantic.DeepEqual(probeOf(c, k.kind), w.spec) && apiequality.Semantic.DeepEqual(c.Ports, w.container.Ports) {
			w.setPod(pod)
			delete(want, k)
			continue
		}
		w.stop()
		delete(m.workers, k)
	}
	if m.ctx == nil {
		return
	}
	for k, c := range want {
		w := newWorker(m, pod, c.DeepCopy(), k.kind)
		// A container adopted after a restart of heartlet keeps the
		// readiness or startup the API last had for it from the start,
		// before the worker first runs: the pod's status, computed as soon
		// as its worker syncs it, must not flip it in between.
		if id, ok := w.adoptedSuccess(pod); ok {
			w.containerID = id
			m.results[resultKey{id, k.kind}] = Success
		}
		m.workers[k] = w
		m.wg.Add(1)
		go w.run(m.ctx)
	}
}

// set records a result and publishes it when it changed.
func (m *Manager) set(ctx context.Context, w *worker, containerID string, r Result) {
	m.mu.Lock()
	key := resultKey{containerID, w.kind}
	old, ok := m.results[key]
	m.results[key] = r
	if w.kind == Startup && r == Success {
		// As upstream: once started, the container's liveness and
		// readiness are probed at once, not a period later.
		for _, kind := range []Kind{Liveness, Readiness} {
			if o, ok := m.workers[workerKey{w.getPod().UID, w.container.Name, kind}]; ok {
				o.triggerProbe()
			}
		}
	}
	m.mu.Unlock()
	if ok && old == r {
		return
	}
	pod := w.getPod()
	klog.FromContext(ctx).V(2).Info("Probe result changed", "pod", klog.KObj(pod), "podUID", pod.UID,
		"container", w.container.Name, "probeType", w.kind, "result", r)
	u := Update{PodUID: pod.UID, ContainerName: w.container.Name, ContainerID: containerID, Kind: w.kind, Result: r}
	m.updates.Send(updateKey{u.PodUID, u.ContainerName, u.Kind}, u)
}

// remove forgets a result.
func (m *Manager) remove(containerID string, kind Kind) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.results, resultKey{containerID, kind})
}

// workerDone unregisters w if it is still the worker of its key.
func (m *Manager) workerDone(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := workerKey{w.getPod().UID, w.container.Name, w.kind}
	if m.workers[k] == w {
		delete(m.workers, k)
	}
	if m.opts.WorkerExited != nil {
		m.opts.WorkerExited(k.uid, k.container, k.kind)
	}
}

// bareID strips the "<runtime>://" prefix of a status container ID.
func bareID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}
