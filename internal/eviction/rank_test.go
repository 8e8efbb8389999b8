package eviction

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// testPod is a pod with one container "c" requesting req of memory and
// ephemeral storage (none when empty) at priority prio.
func testPod(name string, prio int32, req string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if req != "" {
		q := resource.MustParse(req)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q, v1.ResourceEphemeralStorage: q}
	}
	return p
}

// usageStats are stats of pods with memory working set and ephemeral
// storage use of the given bytes.
func usageStats(use map[string]uint64) PodStats {
	out := PodStats{}
	for name, b := range use {
		out[types.UID(name)] = statsapi.PodStats{
			PodRef:           statsapi.PodReference{Name: name, Namespace: "default", UID: name},
			Memory:           &statsapi.MemoryStats{WorkingSetBytes: u64(b)},
			EphemeralStorage: &statsapi.FsStats{UsedBytes: u64(b), InodesUsed: u64(b / 1024)},
			Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(b)},
				Rootfs: &statsapi.FsStats{UsedBytes: u64(b)}}},
		}
	}
	return out
}

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func TestRank(t *testing.T) {
	const mi = 1 << 20
	tests := []struct {
		name   string
		signal Signal
		pods   []*v1.Pod
		use    map[string]uint64
		want   string
	}{
		{
			name:   "memory: over requests before under, whatever the priority",
			signal: SignalMemoryAvailable,
			pods:   []*v1.Pod{testPod("under", 0, "100Mi"), testPod("over-high", 1000, "10Mi")},
			use:    map[string]uint64{"under": 50 * mi, "over-high": 20 * mi},
			want:   "over-high,under",
		},
		{
			name:   "memory: among pods over requests, lower priority first",
			signal: SignalMemoryAvailable,
			pods:   []*v1.Pod{testPod("high", 100, ""), testPod("low", -5, "")},
			use:    map[string]uint64{"high": 500 * mi, "low": 1 * mi},
			want:   "low,high",
		},
		{
			name:   "memory: same priority, larger usage above requests first",
			signal: SignalMemoryAvailable,
			pods:   []*v1.Pod{testPod("small", 0, "100Mi"), testPod("big", 0, ""), testPod("mid", 0, "10Mi")},
			use:    map[string]uint64{"small": 150 * mi, "big": 120 * mi, "mid": 100 * mi},
			want:   "big,mid,small",
		},
		{
			name:   "memory: unknown usage ranks as over requests",
			signal: SignalMemoryAvailable,
			pods:   []*v1.Pod{testPod("under", 0, "1Gi"), testPod("unknown", 0, "1Gi")},
			use:    map[string]uint64{"under": mi},
			want:   "unknown,under",
		},
		{
			name:   "disk: by ephemeral storage above requests",
			signal: SignalNodeFsAvailable,
			pods:   []*v1.Pod{testPod("a", 0, ""), testPod("b", 0, ""), testPod("c", 0, "1Gi")},
			use:    map[string]uint64{"a": 10 * mi, "b": 200 * mi, "c": 500 * mi},
			want:   "b,a,c",
		},
		{
			name:   "inodes: by inodes used",
			signal: SignalNodeFsInodesFree,
			pods:   []*v1.Pod{testPod("few", 0, ""), testPod("many", 0, "")},
			use:    map[string]uint64{"few": 1024, "many": 1024 * 1024},
			want:   "many,few",
		},
		{
			name:   "pids: by priority, order kept otherwise",
			signal: SignalPIDAvailable,
			pods:   []*v1.Pod{testPod("x", 10, ""), testPod("y", 0, ""), testPod("z", 0, "")},
			want:   "y,z,x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.pods)
			got := names(Rank(tt.signal, tt.pods, usageStats(tt.use)))
			if got != tt.want {
				t.Errorf("Rank = %s, want %s", got, tt.want)
			}
			if names(in) != names(tt.pods) {
				t.Errorf("Rank reordered its input")
			}
		})
	}
}

func TestMessage(t *testing.T) {
	th := mustThresholds(t, Config{Hard: map[string]string{"memory.available": "100Mi"}})[0]
	pod := testPod("hog", 0, "10Mi")
	got := Message(th, obsBytes(50<<20, 1<<30), pod, usageStats(map[string]uint64{"hog": 200 << 20}))
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. " +
		"Container c was using 200Mi, request is 10Mi, has larger consumption of memory. "
	if got != want {
		t.Errorf("Message =\n%q, want\n%q", got, want)
	}
	disk := mustThresholds(t, Config{Hard: map[string]string{"nodefs.available": "10%"}})[0]
	got = Message(disk, obsBytes(5<<20, 100<<20), testPod("quiet", 0, "1Gi"), usageStats(map[string]uint64{"quiet": 1 << 20}))
	if want := "The node was low on resource: ephemeral-storage. Threshold quantity: 10Mi, available: 5120Ki. "; got != want {
		t.Errorf("Message =\n%q, want\n%q", got, want)
	}
}

func TestAdmitUnder(t *testing.T) {
	bestEffort := testPod("be", 0, "")
	burstable := testPod("bu", 0, "10Mi")
	tolerating := testPod("tol", 0, "")
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: memoryPressureTaint, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := testPod("crit", systemCriticalPriority, "")
	static := testPod("static", 0, "")
	static.Annotations = map[string]string{podconfig.AnnotationConfigSource: "file"}
	mem := []v1.NodeConditionType{v1.NodeMemoryPressure}
	disk := []v1.NodeConditionType{v1.NodeDiskPressure}
	both := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure}
	pid := []v1.NodeConditionType{v1.NodePIDPressure}
	tests := []struct {
		name  string
		conds []v1.NodeConditionType
		pod   *v1.Pod
		admit bool
		msg   string
	}{
		{"no pressure", nil, bestEffort, true, ""},
		{"memory: best effort refused", mem, bestEffort, false, "The node had condition: [MemoryPressure]. "},
		{"memory: burstable admitted", mem, burstable, true, ""},
		{"memory: tolerating best effort admitted", mem, tolerating, true, ""},
		{"disk: burstable refused", disk, burstable, false, "The node had condition: [DiskPressure]. "},
		{"memory and disk: burstable refused", both, burstable, false, "The node had condition: [MemoryPressure DiskPressure]. "},
		{"pid: refused", pid, burstable, false, "The node had condition: [PIDPressure]. "},
		{"disk: critical admitted", disk, critical, true, ""},
		{"disk: static admitted", disk, static, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := AdmitUnder(tt.conds, tt.pod)
			if r.Admit != tt.admit {
				t.Fatalf("Admit = %v, want %v (%s)", r.Admit, tt.admit, r.Message)
			}
			if !r.Admit && (r.Reason != Reason || r.Message != tt.msg) {
				t.Errorf("refusal = %q %q, want %q %q", r.Reason, r.Message, Reason, tt.msg)
			}
		})
	}
}
