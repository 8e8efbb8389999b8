package containergc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/containergc"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
)

// fakePods is the pods' existence as the test sets it.
type fakePods struct {
	mu      sync.Mutex
	ready   bool
	desired map[types.UID]bool
}

func (p *fakePods) SourcesReady() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

func (p *fakePods) Desired(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.desired[uid]
}

func (p *fakePods) Known(types.UID) bool { return false }

func (p *fakePods) set(ready bool, uids ...types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready = ready
	p.desired = map[types.UID]bool{}
	for _, u := range uids {
		p.desired[u] = true
	}
}

type events struct {
	mu      sync.Mutex
	reasons []string
}

func (r *events) Eventf(_ k8sruntime.Object, _, reason, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *events) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reasons)
}

type env struct {
	t       *testing.T
	ctx     context.Context
	srv     *fakecri.Server
	rt      *runtime.Runtime
	logsDir string
	pods    *fakePods
	rec     *events
	clk     *clocktesting.FakeClock
	gc      *containergc.GC
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	srv := fakecri.Start(t)
	rt, err := runtime.New(ctx, srv.Endpoint(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	srv.AddImage("busybox")
	e := &env{t: t, ctx: ctx, srv: srv, rt: rt, logsDir: t.TempDir(), pods: &fakePods{}, rec: &events{},
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	e.gc = containergc.New(rt, e.pods, containergc.Options{Policy: containergc.DefaultPolicy(), LogsDir: e.logsDir, Clock: e.clk,
		Recorder: e.rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n", UID: "n"}})
	return e
}

// sandbox runs a sandbox of pod uid (attempt n) logging below logDir.
func (e *env) sandbox(uid string, n uint32, logDir string) (string, *runtimeapi.PodSandboxConfig) {
	e.t.Helper()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "default", Uid: uid, Attempt: n},
		Labels:       map[string]string{runtime.LabelPodUID: uid, runtime.LabelPodName: uid, runtime.LabelPodNamespace: "default"},
		LogDirectory: logDir,
	}
	id, err := e.rt.RunPodSandbox(e.ctx, cfg, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return id, cfg
}

// dead creates, starts and exits attempt n of container name, with its
// log file and a rotated one written; it returns the ID and the log path.
func (e *env) dead(sb string, cfg *runtimeapi.PodSandboxConfig, name string, n uint32) (string, string) {
	e.t.Helper()
	id, logPath := e.start(sb, cfg, name, n)
	e.srv.SetExit(id, 1, "Error")
	return id, logPath
}

func (e *env) start(sb string, cfg *runtimeapi.PodSandboxConfig, name string, n uint32) (string, string) {
	e.t.Helper()
	rel := filepath.Join(name, string(rune('0'+n))+".log")
	id, err := e.rt.CreateContainer(e.ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: n},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   map[string]string{runtime.LabelPodUID: cfg.Labels[runtime.LabelPodUID], runtime.LabelContainerName: name},
		LogPath:  rel,
	}, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.rt.StartContainer(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
	p := filepath.Join(cfg.LogDirectory, rel)
	for _, f := range []string{p, p + ".20260101-000000.gz"} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("log\n"), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return id, p
}

func (e *env) containers() []string {
	var out []string
	for _, c := range e.srv.Containers() {
		out = append(out, c.ID)
	}
	slices.Sort(out)
	return out
}

func (e *env) sandboxes() []string {
	var out []string
	for _, s := range e.srv.Sandboxes() {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// A crash-looping pod keeps its running instance and its newest dead one;
// the older dead instances go with their log files. Once the pod is
// deleted, everything of it that is not running goes.
func TestGCCrashLoopAndDeletedPod(t *testing.T) {
	e := newEnv(t)
	e.pods.set(true, "web")
	dir := filepath.Join(e.logsDir, "default_web_web")
	sb, cfg := e.sandbox("web", 0, dir)
	_, l0 := e.dead(sb, cfg, "app", 0)
	_, l1 := e.dead(sb, cfg, "app", 1)
	d2, l2 := e.dead(sb, cfg, "app", 2)
	r3, l3 := e.start(sb, cfg, "app", 3)

	res, err := e.gc.GarbageCollect(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Containers != 2 || res.Sandboxes != 0 {
		t.Errorf("result = %+v, want 2 containers", res)
	}
	if got, want := e.containers(), sorted(d2, r3); !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v (the running one and the newest dead)", got, want)
	}
	for _, p := range []string{l0, l1, l0 + ".20260101-000000.gz", l1 + ".20260101-000000.gz"} {
		if exists(p) {
			t.Errorf("log %s of a removed container is still there", p)
		}
	}
	for _, p := range []string{l2, l3} {
		if !exists(p) {
			t.Errorf("log %s of a kept container was removed", p)
		}
	}

	// The pod is deleted and stopped: its containers and sandbox go.
	e.srv.SetExit(r3, 0, "Completed")
	if err := e.rt.StopPodSandbox(e.ctx, sb); err != nil {
		t.Fatal(err)
	}
	e.pods.set(true)
	if _, err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.containers(); len(got) != 0 {
		t.Errorf("containers of the deleted pod = %v, want none", got)
	}
	if got := e.sandboxes(); len(got) != 0 {
		t.Errorf("sandboxes of the deleted pod = %v, want none", got)
	}
	if exists(l2) || exists(l3) {
		t.Error("logs of the deleted pod's containers are still there")
	}
}

// Until every source delivered its pods, a pod no source wants is not
// taken for deleted: its newest dead container stays.
func TestGCWaitsForSources(t *testing.T) {
	e := newEnv(t)
	sb, cfg := e.sandbox("web", 0, filepath.Join(e.logsDir, "p"))
	e.dead(sb, cfg, "app", 0)
	d1, _ := e.dead(sb, cfg, "app", 1)
	e.pods.set(false)
	if _, err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := e.containers(), []string{d1}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if got := e.sandboxes(); len(got) != 1 {
		t.Errorf("sandboxes = %v, want the pod's", got)
	}
}

// A log path the runtime reports outside the pod logs directory is never
// removed, also through "..".
func TestGCRemovesLogsOnlyBelowLogsDir(t *testing.T) {
	e := newEnv(t)
	e.pods.set(true, "web", "dots")
	outside := t.TempDir()
	sb, cfg := e.sandbox("web", 0, outside)
	_, l0 := e.dead(sb, cfg, "app", 0)
	e.dead(sb, cfg, "app", 1)
	sb2, cfg2 := e.sandbox("dots", 0, filepath.Join(e.logsDir, "..", filepath.Base(outside)))
	_, l2 := e.dead(sb2, cfg2, "app", 0)
	e.dead(sb2, cfg2, "app", 1)
	if _, err := e.gc.GarbageCollect(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.containers(); len(got) != 2 {
		t.Errorf("containers = %v, want the two newest dead", got)
	}
	for _, p := range []string{l0, l2} {
		if !exists(p) {
			t.Errorf("%s outside the pod logs directory was removed", p)
		}
	}
}

// A failed pass records ContainerGCFailed on the node; the next succeeds.
func TestGCRunRecordsFailures(t *testing.T) {
	e := newEnv(t)
	e.srv.InjectError("ListPodSandbox", errors.New("runtime down"))
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error)
	go func() { done <- e.gc.Run(ctx) }()
	waitForWaiter(t, e.clk)
	e.clk.Step(containergc.DefaultPeriod)
	err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(e.rec.list(), []string{containergc.ReasonContainerGCFailed}), nil
	})
	if err != nil {
		t.Errorf("events = %v, want one %s", e.rec.list(), containergc.ReasonContainerGCFailed)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// DeleteAllUnusedContainers (node-level reclaim) removes every dead
// container but the newest of each container of an existing pod, and
// empty sandboxes of deleted pods.
func TestDeleteAllUnusedContainers(t *testing.T) {
	e := newEnv(t)
	e.pods.set(true, "web")
	sb, cfg := e.sandbox("web", 0, filepath.Join(e.logsDir, "w"))
	e.dead(sb, cfg, "app", 0)
	d1, _ := e.dead(sb, cfg, "app", 1)
	gsb, _ := e.sandbox("gone", 0, filepath.Join(e.logsDir, "g"))
	if err := e.rt.StopPodSandbox(e.ctx, gsb); err != nil {
		t.Fatal(err)
	}
	res, err := e.gc.DeleteAllUnusedContainers(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Containers != 1 || res.Sandboxes != 1 {
		t.Errorf("result = %+v, want 1 container and 1 sandbox", res)
	}
	if got, want := e.containers(), []string{d1}; !slices.Equal(got, want) {
		t.Errorf("containers = %v, want %v", got, want)
	}
	if got, want := e.sandboxes(), []string{sb}; !slices.Equal(got, want) {
		t.Errorf("sandboxes = %v, want %v", got, want)
	}
}

func waitForWaiter(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	})
	if err != nil {
		t.Fatal("Run never waited on the clock")
	}
}
