package podlifecycle

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podworker"
)

func testPod(uid string, static bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
	if static {
		p.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	}
	return p
}

func TestPodCounts(t *testing.T) {
	s1, s2, a1, a2 := testPod("s1", true), testPod("s2", true), testPod("a1", false), testPod("a2", false)
	var k podKinds
	// First pass: everything desired; a2 rejected (not working); an
	// orphan from the runtime is being stopped.
	k.markRuntimeOnly("rt")
	got := k.counts([]*v1.Pod{s1, s2, a1, a2}, []*v1.Pod{s1, s2, a1},
		map[types.UID]podworker.State{"s1": podworker.StateSyncing, "s2": podworker.StateWaiting, "a1": podworker.StateSyncing, "rt": podworker.StateTerminating}, 2)
	want := metrics.PodCounts{
		DesiredStatic: 2, DesiredRegular: 2, ActiveStatic: 2, ActiveRegular: 1, Mirror: 2,
		Working: map[metrics.WorkingPodKey]int{
			{Lifecycle: "sync", Config: "desired", Static: "true"}:                2,
			{Lifecycle: "sync", Config: "desired", Static: ""}:                    1,
			{Lifecycle: "terminating", Config: "runtime_only", Static: "unknown"}: 1,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("first pass:\n got %+v\nwant %+v", got, want)
	}
	// Second pass: s1 and a1 removed from their sources and terminating
	// (orphans, still known as static or not); the runtime orphan is gone.
	got = k.counts([]*v1.Pod{s2, a2}, []*v1.Pod{s2},
		map[types.UID]podworker.State{"s1": podworker.StateTerminating, "s2": podworker.StateSyncing, "a1": podworker.StateTerminated}, 1)
	want = metrics.PodCounts{
		DesiredStatic: 1, DesiredRegular: 1, ActiveStatic: 1, Mirror: 1,
		Working: map[metrics.WorkingPodKey]int{
			{Lifecycle: "terminating", Config: "orphan", Static: "true"}: 1,
			{Lifecycle: "sync", Config: "desired", Static: "true"}:       1,
			{Lifecycle: "terminated", Config: "orphan", Static: ""}:      1,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("second pass:\n got %+v\nwant %+v", got, want)
	}
	// Forgotten pods are forgotten here too.
	k.counts(nil, nil, nil, 0)
	if len(k.static) != 0 || len(k.runtimeOnly) != 0 {
		t.Errorf("kinds kept after the workers forgot the pods: %+v", k)
	}
}
