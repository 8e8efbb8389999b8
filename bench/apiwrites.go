package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// nodeWrites makes, with the node's credentials, the API requests that
// any agent serving a pod of the benchmark makes, whatever it is built
// like: what upstream's kubelet and heartlet both send for such a pod.
// It learns of the node's pods as an agent does, from a watch of the pods
// bound to the node. For a new pod: a service account token bound to the
// pod (its projected token volume), the container's Pulled, Created and
// Started events, and one status patch to Running. Once it is deleted
// gracefully: the container's Killing event, one status patch with the
// container terminated, and the final delete with grace 0.
type nodeWrites struct {
	cs   kubernetes.Interface
	node string
	// rt, when set, runs each pod in the runtime: after its token and
	// before its events and status (floor-api); nil for api-writes.
	rt podRuntime

	mu       sync.Mutex
	started  map[types.UID]bool // pods whose start requests were made
	deleting map[types.UID]bool // pods whose deletion requests were begun
	finished int                // pods whose start requests are done
	errs     []error
}

func newNodeWrites(o compareOptions) (*nodeWrites, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.nodeKC)
	if err != nil {
		return nil, fmt.Errorf("node kubeconfig %q: %w", o.nodeKC, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	// As the kubelet and heartlet by default (kubeAPIContentType).
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &nodeWrites{cs: cs, node: o.nodeName, started: map[types.UID]bool{}, deleting: map[types.UID]bool{}}, nil
}

// run watches the node's pods in ns until ctx is done and makes the
// requests of each new pod and of each pod marked for deletion, each pod
// in a goroutine of its own.
func (w *nodeWrites) run(ctx context.Context, ns string) {
	rv := ""
	for ctx.Err() == nil {
		wi, err := w.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + w.node, ResourceVersion: rv})
		if err != nil {
			if ctx.Err() == nil {
				w.fail(fmt.Errorf("watch the node's pods: %w", err))
			}
			return
		}
		for ev := range wi.ResultChan() {
			pod, ok := ev.Object.(*v1.Pod)
			if !ok {
				if ev.Type == watch.Error {
					rv = "" // e.g. expired: the next watch starts from the current pods
				}
				continue
			}
			rv = pod.ResourceVersion
			if ev.Type == watch.Deleted {
				continue
			}
			w.mu.Lock()
			start := !w.started[pod.UID] && pod.DeletionTimestamp == nil
			del := !w.deleting[pod.UID] && pod.DeletionTimestamp != nil && w.started[pod.UID]
			if start {
				w.started[pod.UID] = true
			}
			if del {
				w.deleting[pod.UID] = true
			}
			w.mu.Unlock()
			switch {
			case start:
				go func() {
					if err := w.start(ctx, pod); err != nil {
						w.fail(err)
					}
					w.mu.Lock()
					w.finished++
					w.mu.Unlock()
				}()
			case del:
				go func() {
					if err := w.deleteOne(ctx, pod); err != nil {
						w.fail(err)
					}
				}()
			}
		}
		wi.Stop()
	}
}

func (w *nodeWrites) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

// err returns the failures so far; none for a nil w.
func (w *nodeWrites) err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// waitStarted waits until the start requests of n pods are done, or a
// request failed, or limit passed.
func (w *nodeWrites) waitStarted(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		w.mu.Lock()
		done, failed := w.finished >= n, len(w.errs) > 0
		w.mu.Unlock()
		switch {
		case failed:
			return w.err()
		case done:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("the start requests of %d pods not done after %s", n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reset forgets the pods seen, for the next burst.
func (w *nodeWrites) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.started, w.deleting, w.finished = map[types.UID]bool{}, map[types.UID]bool{}, 0
}

// tokenSeconds is the lifetime the kubelet asks for a projected service
// account token by default (an hour, plus its jitter allowance).
const tokenSeconds = 3607

// start makes the requests of pod's start.
func (w *nodeWrites) start(ctx context.Context, pod *v1.Pod) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(tokenSeconds)
	err := retryUntilKnown(ctx, func() error {
		_, err := w.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: &exp,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("token for pod %s: %w", pod.Name, err)
	}
	if w.rt != nil {
		if err := w.rt.start(ctx, pod); err != nil {
			return fmt.Errorf("start pod %s: %w", pod.Name, err)
		}
	}
	c := pod.Spec.Containers[0]
	for _, e := range [][2]string{
		{"Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image)},
		{"Created", "Container created"},
		{"Started", "Container started"},
	} {
		if err := w.event(ctx, pod, e[0], e[1]); err != nil {
			return err
		}
	}
	now := metav1.Now()
	return w.patchStatus(ctx, pod, v1.PodRunning, true, v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}, now)
}

func (w *nodeWrites) deleteOne(ctx context.Context, pod *v1.Pod) error {
	c := pod.Spec.Containers[0]
	if err := w.event(ctx, pod, "Killing", fmt.Sprintf("Stopping container %s", c.Name)); err != nil {
		return err
	}
	if w.rt != nil {
		if err := w.rt.stop(ctx, pod); err != nil {
			return err
		}
	}
	now := metav1.Now()
	state := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: now, FinishedAt: now}}
	if err := w.patchStatus(ctx, pod, v1.PodRunning, false, state, now); err != nil {
		return err
	}
	uid := pod.UID
	err := w.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		return fmt.Errorf("final delete of pod %s: %w", pod.Name, err)
	}
	return nil
}

// retryUntilKnown calls f until it does not fail with NotFound or
// Forbidden (the pod not yet known), for up to 10 s: the node authorizer and admission check a pod
// against their own caches, which may lag behind the watch that showed
// the pod (so an agent meets this too, and retries on its next sync).
func retryUntilKnown(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if !(apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// event posts one event of the pod's container, as an agent reports it.
func (w *nodeWrites) event(ctx context.Context, pod *v1.Pod, reason, message string) error {
	now := metav1.Now()
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name + "." + hex.EncodeToString(suffix), Namespace: pod.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, FieldPath: "spec.containers{" + pod.Spec.Containers[0].Name + "}"},
		Reason: reason, Message: message, Type: v1.EventTypeNormal,
		Source:         v1.EventSource{Component: "kubelet", Host: w.node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "kubelet", ReportingInstance: w.node,
	}
	if _, err := w.cs.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("event %s of pod %s: %w", reason, pod.Name, err)
	}
	return nil
}

// patchStatus writes the pod's status as an agent does: one strategic
// merge patch of the status subresource with the pod's conditions and
// its one container's state.
func (w *nodeWrites) patchStatus(ctx context.Context, pod *v1.Pod, phase v1.PodPhase, ready bool, state v1.ContainerState, now metav1.Time) error {
	readyCond := v1.ConditionFalse
	if ready {
		readyCond = v1.ConditionTrue
	}
	c := pod.Spec.Containers[0]
	started := ready
	status := v1.PodStatus{
		Phase: phase,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: readyCond, LastTransitionTime: now},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: readyCond, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: readyCond, LastTransitionTime: now},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		},
		HostIP:    "127.0.0.1",
		HostIPs:   []v1.HostIP{{IP: "127.0.0.1"}},
		PodIP:     "10.88.0.2",
		PodIPs:    []v1.PodIP{{IP: "10.88.0.2"}},
		StartTime: &now,
		QOSClass:  v1.PodQOSBestEffort,
		ContainerStatuses: []v1.ContainerStatus{{
			Name: c.Name, State: state, Ready: ready, Started: &started, Image: c.Image,
			ImageID:     "sha256:" + fmt.Sprintf("%064x", 0),
			ContainerID: "containerd://" + fmt.Sprintf("%064x", time.Now().UnixNano()),
		}},
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return err
	}
	err = retryUntilKnown(ctx, func() error {
		_, err := w.cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil {
		return fmt.Errorf("status of pod %s: %w", pod.Name, err)
	}
	return nil
}
