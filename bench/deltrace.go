package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// The steps of a pod's deletion as any agent shows them through the API:
// the pod marked for deletion, a status with every container terminated
// (the agent stopped them and wrote it), and the pod gone.
var agentDeleteSteps = []string{
	"marked for deletion (watch)",
	"containers terminated (status seen)",
	"removed (watch)",
}

// The steps of the floor's deletion of one pod.
var floorDeleteSteps = []string{
	"container stopped",
	"sandbox stopped",
	"sandbox removed",
}

// steps is, per step of a list, the offsets from the start of the burst
// of every pod that reached it.
type steps struct {
	names []string
	times stepTimes
}

func newSteps(names []string) *steps {
	return &steps{names: names, times: make(stepTimes, len(names))}
}

func (s *steps) add(step int, d time.Duration) { s.times[step] = append(s.times[step], d) }

func (s *steps) sort() {
	for _, d := range s.times {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
}

// print prints the p50, p90 and p99 offset of each step and the p50 of
// the step's own share (the difference of the p50s).
func (s *steps) print(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n\n", title)
	fmt.Fprintln(w, "| step | pods | p50 | p90 | p99 | p50 − previous p50 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	prev := time.Duration(0)
	for i, d := range s.times {
		if len(d) == 0 {
			fmt.Fprintf(w, "| %s | 0 | – | – | – | – |\n", s.names[i])
			continue
		}
		p50 := percentile(d, 50)
		fmt.Fprintf(w, "| %s | %d | %.2f s | %.2f s | %.2f s | %.2f s |\n", s.names[i], len(d), p50.Seconds(), percentile(d, 90).Seconds(), percentile(d, 99).Seconds(), (p50 - prev).Seconds())
		prev = p50
	}
}

// deletionWatch records, from a watch of the namespace's pods started
// before the delete call, when each pod reached each of agentDeleteSteps.
type deletionWatch struct {
	w    watch.Interface
	done chan struct{}

	mu      sync.Mutex
	start   time.Time
	seen    map[string][]time.Time // by pod name, per step; zero: not yet
	removed int                    // pods seen deleted
}

// waitRemoved waits until the watch has seen n pods deleted, or limit
// passed, or the watch ended. Unlike listing the namespace again and
// again, it costs the API server nothing more while an agent works.
func (d *deletionWatch) waitRemoved(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		d.mu.Lock()
		removed := d.removed
		d.mu.Unlock()
		if removed >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods removed after %s", removed, n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.done:
			return fmt.Errorf("the watch of the pods ended with %d of %d removed", removed, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// watchDeletion starts watching ns's pods from their current list.
// Call begin just before the delete call and result when every pod is
// gone.
func watchDeletion(ctx context.Context, cs kubernetes.Interface, ns string) (*deletionWatch, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	d := &deletionWatch{w: w, done: make(chan struct{}), seen: map[string][]time.Time{}}
	go func() {
		defer close(d.done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*v1.Pod); ok {
				d.observe(ev.Type, p, time.Now())
			}
		}
	}()
	return d, nil
}

func (d *deletionWatch) begin() {
	d.mu.Lock()
	d.start = time.Now()
	d.mu.Unlock()
}

// observe records the steps one watch event shows.
func (d *deletionWatch) observe(typ watch.EventType, p *v1.Pod, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.seen[p.Name]
	if t == nil {
		t = make([]time.Time, len(agentDeleteSteps))
		d.seen[p.Name] = t
	}
	mark := func(i int) {
		if t[i].IsZero() {
			t[i] = now
		}
	}
	if p.DeletionTimestamp != nil {
		mark(0)
	}
	if allTerminated(p) {
		mark(1)
	}
	if typ == watch.Deleted {
		if t[2].IsZero() {
			d.removed++
		}
		mark(2)
	}
}

// allTerminated tells whether the pod's status shows every container
// terminated, or the pod finished.
func allTerminated(p *v1.Pod) bool {
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return true
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Terminated == nil {
			return false
		}
	}
	return true
}

// result stops the watch and returns the steps' offsets from begin.
func (d *deletionWatch) result() *steps {
	d.w.Stop()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	s := newSteps(agentDeleteSteps)
	for _, t := range d.seen {
		for i, at := range t {
			if !at.IsZero() {
				s.add(i, at.Sub(d.start))
			}
		}
	}
	s.sort()
	return s
}
