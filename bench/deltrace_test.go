package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestDeletionWatchSteps(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	marked := metav1.NewTime(t0)
	pod := func(name string, deleting bool, phase v1.PodPhase, states ...v1.ContainerState) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &marked
		}
		for _, s := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{State: s})
		}
		return p
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	terminated := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137}}

	events := []struct {
		typ watch.EventType
		pod *v1.Pod
		ms  int
	}{
		// a: marked, one of two containers stopped, both, then gone.
		{watch.Modified, pod("a", true, v1.PodRunning, running, running), 100},
		{watch.Modified, pod("a", true, v1.PodRunning, terminated, running), 1500},
		{watch.Modified, pod("a", true, v1.PodRunning, terminated, terminated), 2500},
		{watch.Modified, pod("a", true, v1.PodRunning, terminated, terminated), 2600}, // repeat: first time counts
		{watch.Deleted, pod("a", true, v1.PodRunning, terminated, terminated), 2700},
		// b: its phase says finished before the container statuses do.
		{watch.Modified, pod("b", true, v1.PodFailed), 300},
		{watch.Deleted, pod("b", true, v1.PodFailed), 400},
		// c: an update before the deletion, then removed with no
		// terminal status seen (a force delete).
		{watch.Modified, pod("c", false, v1.PodRunning, running), 50},
		{watch.Deleted, pod("c", true, v1.PodRunning, running), 900},
	}
	d := &deletionWatch{w: watch.NewFake(), done: make(chan struct{}), seen: map[string][]time.Time{}, start: t0}
	for _, e := range events {
		d.observe(e.typ, e.pod, at(e.ms))
	}
	d.observe(watch.Deleted, pod("c", true, v1.PodRunning, running), at(950)) // a repeated deletion counts once
	if err := d.waitRemoved(t.Context(), 3, time.Minute); err != nil {
		t.Errorf("waitRemoved(3): %v", err)
	}
	close(d.done)
	if err := d.waitRemoved(t.Context(), 4, time.Minute); err == nil || !strings.Contains(err.Error(), "3 of 4 removed") {
		t.Errorf("waitRemoved(4) once the watch ended = %v, want an error with 3 of 4 removed", err)
	}
	s := d.result()
	ms := func(v ...int) []time.Duration {
		out := []time.Duration{}
		for _, m := range v {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	want := stepTimes{ms(100, 300, 900), ms(300, 2500), ms(400, 900, 2700)}
	if !reflect.DeepEqual(s.times, want) {
		t.Errorf("steps = %v, want %v", s.times, want)
	}

	var buf bytes.Buffer
	s.print(&buf, "title")
	for _, line := range []string{
		"| marked for deletion (watch) | 3 | 0.30 s | 0.90 s | 0.90 s | 0.30 s |",
		"| containers terminated (status seen) | 2 | 0.30 s | 2.50 s | 2.50 s | 0.00 s |",
		"| removed (watch) | 3 | 0.90 s | 2.70 s | 2.70 s | 0.60 s |",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, buf.String())
		}
	}
}
