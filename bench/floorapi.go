package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/heartlet/heartlet/internal/runtime"
)

// podRuntime is what an agent does in the runtime for a pod of the API,
// between the requests nodeWrites makes for it.
//
// Contract: start runs the pod and returns once its container runs; stop
// stops it within the pod's grace period and removes everything of it.
// Both are called from one goroutine per pod and may run for many pods
// at once.
type podRuntime interface {
	start(ctx context.Context, pod *v1.Pod) error
	stop(ctx context.Context, pod *v1.Pod) error
}

// floorRuntime starts and stops pods of the API as floor-setup does its
// own: a few at a time (floorParallel), each set up as any agent sets it
// up (podSetup).
type floorRuntime struct {
	rs     *runtime.Runtime
	ps     *podSetup
	image  string
	logDir string
	turns  chan struct{} // nil: every pod at once

	mu   sync.Mutex
	pods map[types.UID][2]string // sandbox and container IDs
}

func (f *floorRuntime) start(ctx context.Context, pod *v1.Pod) error {
	if f.turns != nil {
		select {
		case f.turns <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-f.turns }()
	}
	sb, c, err := floorStart(ctx, f.rs, pod.Namespace, pod.Name, string(pod.UID), f.image, f.logDir, f.ps)
	f.mu.Lock()
	f.pods[pod.UID] = [2]string{sb, c}
	f.mu.Unlock()
	return err
}

func (f *floorRuntime) stop(ctx context.Context, pod *v1.Pod) error {
	f.mu.Lock()
	ids, ok := f.pods[pod.UID]
	delete(f.pods, pod.UID)
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("pod %s was not started", pod.Name)
	}
	if _, err := floorStop(ctx, f.rs, ids[0], ids[1], string(pod.UID), f.ps, func(int) {}); err != nil {
		return fmt.Errorf("stop pod %s: %w", pod.Name, err)
	}
	return nil
}

// runFloorAPI measures the floor-api agent: the benchmark's pods created
// through the API as for an agent, learnt from a watch of the node's pods,
// each started in the runtime as floor-setup starts its pods and reported
// with the requests of api-writes (its token before the start; its
// events and its status patch to Running after it); once deleted, its
// Killing event, its stop and removal, its status patch and the final
// delete. It is a conforming agent that does nothing but the runtime
// calls and API requests it must, with the Node registered (not kept up
// to date) as an agent registers it; that work (its clients' CPU
// included) is the benchmark's, counted in the machine's CPU.
func runFloorAPI(ctx context.Context, cs kubernetes.Interface, rs *runtime.Runtime, o compareOptions) (*agentResult, error) {
	res := &agentResult{name: agentFloorAPI, byN: map[int]*result{},
		version: "no agent: floor-setup's pods started from a watch of the node's pods, with api-writes' requests"}
	if err := ensureNamespace(ctx, cs, o.namespace); err != nil {
		return nil, err
	}
	if err := registerNode(ctx, cs, o.nodeName); err != nil {
		return nil, err
	}
	defer func() { _ = deleteNode(context.Background(), cs, o.nodeName) }()
	ps, err := newPodSetup()
	if err != nil {
		return nil, err
	}
	defer ps.close()
	logDir, err := os.MkdirTemp("", "heartlet-bench-floor-api-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	w, err := newNodeWrites(o)
	if err != nil {
		return nil, err
	}
	fr := &floorRuntime{rs: rs, ps: ps, image: o.image, logDir: logDir, pods: map[types.UID][2]string{}}
	if o.floorParallel > 0 {
		fr.turns = make(chan struct{}, o.floorParallel)
		res.version += fmt.Sprintf(", %d pods started at a time", o.floorParallel)
	}
	w.rt = fr
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go w.run(wctx, o.namespace)

	ctrdPid := containerdPid(o.containerdPidFile)
	for _, n := range o.counts {
		waitQuiet(os.Stdout, fmt.Sprintf("%s pods=%d", res.name, n))
		r := &result{n: n, cpuStartMs: -1, cpuDeleteMs: -1, sysStartMs: -1, sysDeleteMs: -1,
			allocStartKiB: -1, allocDeleteKiB: -1, gcStart: -1, gcDelete: -1, rssWithPodsMiB: -1, memWithPods: memory{anonMiB: -1, fileMiB: -1}, memSettled: memory{anonMiB: -1, fileMiB: -1},
			apiPerMinWithPods: -1, cpuPerMinPods: -1, apiCallsStart: -1, apiCallsDelete: -1, criCallsStart: -1, criCallsDelete: -1}
		co := clusterOptions{image: o.image, nodeName: o.nodeName, pods: n, namespace: o.namespace, startTimeout: 10 * time.Minute}
		s0 := takeServerRequests(ctx, cs)
		c0 := cpuMsAll(ctrdPid)
		w0 := takeWholeCPU(o.controlPlanePidDir)
		start := time.Now()
		times, err := podStartLatency(ctx, cs, co)
		if err != nil {
			return res, errors.Join(err, w.err())
		}
		r.allRunning = time.Since(start)
		c1 := cpuMsAll(ctrdPid)
		r.controlStartMs, r.machineStartMs, r.busyStart, r.stolenStart = takeWholeCPU(o.controlPlanePidDir).since(w0, n)
		fmt.Printf("compare: %s pods=%d API server requests per pod started (every client): %s\n", res.name, n, formatMethods(takeServerRequests(ctx, cs).since(s0, n)))
		if err := w.waitStarted(ctx, n, time.Minute); err != nil {
			return res, err
		}
		lat := latencies(times)
		r.p50, r.p90, r.p99 = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
		r.runtimeStartMs = (c1 - c0) / float64(n)
		time.Sleep(5 * time.Second)

		s2 := takeServerRequests(ctx, cs)
		c2 := cpuMsAll(ctrdPid)
		w2 := takeWholeCPU(o.controlPlanePidDir)
		if r.allDeleted, r.deleteTrace, err = deleteAll(ctx, cs, o.namespace, n); err != nil {
			return res, errors.Join(err, w.err())
		}
		r.runtimeDeleteMs = (cpuMsAll(ctrdPid) - c2) / float64(n)
		r.controlDeleteMs, r.machineDeleteMs, r.busyDelete, r.stolenDelete = takeWholeCPU(o.controlPlanePidDir).since(w2, n)
		fmt.Printf("compare: %s pods=%d API server requests per pod deleted (every client): %s\n", res.name, n, formatMethods(takeServerRequests(ctx, cs).since(s2, n)))
		if err := w.err(); err != nil {
			return res, err
		}
		w.reset()
		res.byN[n] = r
		fmt.Printf("compare: %s pods=%d p50=%.2fs p90=%.2fs p99=%.2fs all-running=%.2fs all-deleted=%.2fs\n",
			res.name, n, r.p50.Seconds(), r.p90.Seconds(), r.p99.Seconds(), r.allRunning.Seconds(), r.allDeleted.Seconds())
		time.Sleep(5 * time.Second)
	}
	left, err := removeRuntimePods(ctx, rs, o.namespace)
	if err != nil {
		return res, err
	}
	res.leftoverPods = strconv.Itoa(left)
	return res, nil
}

// registerNode creates the Node as an agent registers it: named, with the
// capacity the benchmark's pods fit in. Its status is not kept up to
// date: the node's controllers find it unready after their grace period,
// longer than a burst.
func registerNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("2"),
		v1.ResourceMemory: resource.MustParse("24Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelHostname: name, v1.LabelOSStable: "linux"}},
		Status: v1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	return nil
}
