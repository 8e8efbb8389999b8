package eviction

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/heartlet/heartlet/internal/metrics"
)

// storagePod is a pod named name with containers of the given
// ephemeral-storage limits ("" for none) and the given volumes.
func storagePod(name string, limits []string, vols ...v1.Volume) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}, Spec: v1.PodSpec{Volumes: vols}}
	for i, l := range limits {
		c := v1.Container{Name: fmt.Sprintf("c%d", i), Image: "busybox"}
		if l != "" {
			c.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(l)}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	return p
}

func emptyDir(name, limit string, medium v1.StorageMedium) v1.Volume {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if limit != "" {
		q := resource.MustParse(limit)
		ed.SizeLimit = &q
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}}
}

// storageStats are a pod's stats: per container its writable layer and
// logs in MiB, per volume its use in MiB, and the pod's total.
type storageStats struct {
	rootfs, logs []uint64
	vols         map[string]uint64
	total        *uint64
}

func (s storageStats) of(name string) statsapi.PodStats {
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: name, Namespace: "default", UID: name}}
	for i := range s.rootfs {
		ps.Containers = append(ps.Containers, statsapi.ContainerStats{
			Name:   fmt.Sprintf("c%d", i),
			Rootfs: &statsapi.FsStats{UsedBytes: u64(s.rootfs[i] << 20)},
			Logs:   &statsapi.FsStats{UsedBytes: u64(s.logs[i] << 20)},
		})
	}
	for n, u := range s.vols {
		ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: n, FsStats: statsapi.FsStats{UsedBytes: u64(u << 20)}})
	}
	if s.total != nil {
		ps.EphemeralStorage = &statsapi.FsStats{UsedBytes: u64(*s.total << 20)}
	}
	return ps
}

func TestLocalStorageViolations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		stats     *storageStats // nil: the pod has no stats
		dedicated bool
		want      string // "signal: message", or "" for none
	}{{
		name:  "emptyDir over its sizeLimit",
		pod:   storagePod("p", []string{""}, emptyDir("scratch", "10Mi", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 11}, total: u64(12)},
		want:  `emptydirfs.limit: Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `,
	}, {
		name:  "emptyDir at its sizeLimit",
		pod:   storagePod("p", []string{""}, emptyDir("scratch", "10Mi", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 10}, total: u64(11)},
	}, {
		name:  "emptyDir without sizeLimit",
		pod:   storagePod("p", []string{""}, emptyDir("scratch", "", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 5000}, total: u64(5001)},
	}, {
		name:  "zero sizeLimit is no limit",
		pod:   storagePod("p", []string{""}, emptyDir("scratch", "0", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 5}, total: u64(6)},
	}, {
		name:  "a volume of another name is not the emptyDir",
		pod:   storagePod("p", []string{""}, emptyDir("scratch", "10Mi", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"config": 50}, total: u64(51)},
	}, {
		name:  "emptyDir checked before the pod's total",
		pod:   storagePod("p", []string{"20Mi"}, emptyDir("scratch", "10Mi", "")),
		stats: &storageStats{rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 30}, total: u64(31)},
		want:  `emptydirfs.limit: Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `,
	}, {
		name:  "pod over the sum of its containers' limits",
		pod:   storagePod("p", []string{"20Mi", "30Mi"}, emptyDir("scratch", "", "")),
		stats: &storageStats{rootfs: []uint64{1, 1}, logs: []uint64{0, 0}, vols: map[string]uint64{"scratch": 50}, total: u64(52)},
		want:  "ephemeralpodfs.limit: Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. ",
	}, {
		name:  "pod within the sum of its containers' limits",
		pod:   storagePod("p", []string{"20Mi", "30Mi"}),
		stats: &storageStats{rootfs: []uint64{15, 25}, logs: []uint64{1, 1}, total: u64(42)},
	}, {
		name:  "pod without limits is never over",
		pod:   storagePod("p", []string{"", ""}),
		stats: &storageStats{rootfs: []uint64{5000, 5000}, logs: []uint64{0, 0}, total: u64(10000)},
	}, {
		name:  "container writable layer and logs over its limit",
		pod:   storagePod("p", []string{"", "10Mi"}),
		stats: &storageStats{rootfs: []uint64{1, 8}, logs: []uint64{0, 3}},
		want:  `ephemeralcontainerfs.limit: Container c1 exceeded its local ephemeral storage limit "10Mi". `,
	}, {
		name:      "writable layer on a dedicated image filesystem does not count",
		pod:       storagePod("p", []string{"", "10Mi"}),
		stats:     &storageStats{rootfs: []uint64{1, 8}, logs: []uint64{0, 3}},
		dedicated: true,
	}, {
		name:      "logs count on a dedicated image filesystem",
		pod:       storagePod("p", []string{"", "10Mi"}),
		stats:     &storageStats{rootfs: []uint64{1, 8}, logs: []uint64{0, 11}},
		dedicated: true,
		want:      `ephemeralcontainerfs.limit: Container c1 exceeded its local ephemeral storage limit "10Mi". `,
	}, {
		name: "pod without stats is skipped",
		pod:  storagePod("p", []string{"1Ki"}, emptyDir("scratch", "1Ki", "")),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			stats := PodStats{}
			if tc.stats != nil {
				stats[tc.pod.UID] = tc.stats.of(tc.pod.Name)
			}
			vs := LocalStorageViolations([]*v1.Pod{tc.pod}, stats, tc.dedicated)
			got := ""
			switch len(vs) {
			case 0:
			case 1:
				if vs[0].Pod != tc.pod {
					t.Errorf("violation names pod %s", vs[0].Pod.Name)
				}
				got = fmt.Sprintf("%s: %s", vs[0].Signal, vs[0].Message)
			default:
				t.Fatalf("%d violations for one pod: %+v", len(vs), vs)
			}
			if got != tc.want {
				t.Errorf("violation = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDedicatedImageFs(t *testing.T) {
	fs := func(capacity, inodes uint64) *statsapi.FsStats {
		return &statsapi.FsStats{CapacityBytes: u64(capacity), Inodes: u64(inodes)}
	}
	summary := func(node, image *statsapi.FsStats) *statsapi.Summary {
		return &statsapi.Summary{Node: statsapi.NodeStats{Fs: node, Runtime: &statsapi.RuntimeStats{ImageFs: image}}}
	}
	for _, tc := range []struct {
		name string
		s    *statsapi.Summary
		want bool
	}{
		{"no summary", nil, false},
		{"no image filesystem", &statsapi.Summary{Node: statsapi.NodeStats{Fs: fs(1, 1)}}, false},
		{"same filesystem", summary(fs(100<<30, 1000), fs(100<<30, 1000)), false},
		{"other capacity", summary(fs(100<<30, 1000), fs(50<<30, 1000)), true},
		{"other inodes", summary(fs(100<<30, 1000), fs(100<<30, 999)), true},
	} {
		if got := DedicatedImageFs(tc.s); got != tc.want {
			t.Errorf("%s: DedicatedImageFs = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLocalStorageEviction runs passes without any threshold: with
// localStorageCapacityIsolation the pods over their limits are evicted
// at once, reported Failed/Evicted with upstream's message and no
// DisruptionTarget condition, counted under upstream's labels, and a
// critical pod is spared; without it nothing happens.
func TestLocalStorageEviction(t *testing.T) {
	over := storagePod("over", []string{""}, emptyDir("scratch", "10Mi", ""))
	greedy := storagePod("greedy", []string{"5Mi", "100Mi"})
	calm := storagePod("calm", []string{"100Mi"}, emptyDir("scratch", "10Mi", ""))
	crit := storagePod("crit", []string{"1Mi"})
	crit.Spec.Priority = func() *int32 { p := systemCriticalPriority; return &p }()
	summary := &statsapi.Summary{}
	for name, s := range map[string]storageStats{
		"over":   {rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 20}, total: u64(21)},
		"greedy": {rootfs: []uint64{6, 1}, logs: []uint64{0, 0}, total: u64(7)},
		"calm":   {rootfs: []uint64{1}, logs: []uint64{0}, vols: map[string]uint64{"scratch": 9}, total: u64(10)},
		"crit":   {rootfs: []uint64{50}, logs: []uint64{0}, total: u64(50)},
	} {
		summary.Pods = append(summary.Pods, s.of(name))
	}

	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("isolation=%v", enabled), func(t *testing.T) {
			h := newHarness(t, Config{}, time.Minute, over, greedy, calm, crit)
			h.m.opts.LocalStorageCapacityIsolation = enabled
			h.summary.s = summary
			label := func(s Signal) float64 { return testutil.ToFloat64(metrics.Evictions.WithLabelValues(string(s))) }
			emptyBefore, contBefore := label(SignalEmptyDirFsLimit), label(SignalEphemeralContainerFsLimit)
			h.pass()
			if !enabled {
				if got := h.killed(); len(got) != 0 {
					t.Fatalf("kills %v with localStorageCapacityIsolation off", got)
				}
				return
			}
			if got := fmt.Sprint(h.killed()); got != "[over/kill/keep=true/grace=1 greedy/kill/keep=true/grace=1]" {
				t.Fatalf("kills = %s, want over and greedy, grace 1", got)
			}
			for name, msg := range map[string]string{
				"over":   `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi". `,
				"greedy": `Container c0 exceeded its local ephemeral storage limit "5Mi". `,
			} {
				st, _ := h.status.GetPodStatus(types.UID(name))
				if st.Phase != v1.PodFailed || st.Reason != Reason || st.Message != msg || len(st.Conditions) != 0 {
					t.Errorf("%s status = %s %q %q %v, want Failed Evicted %q without conditions", name, st.Phase, st.Reason, st.Message, st.Conditions, msg)
				}
			}
			wantEvents := `[pod/over Warning Evicted: Usage of EmptyDir volume "scratch" exceeds the limit "10Mi".  ` +
				`pod/greedy Warning Evicted: Container c0 exceeded its local ephemeral storage limit "5Mi". ]`
			if got := fmt.Sprint(h.rec.events); got != wantEvents {
				t.Errorf("events = %s\nwant %s", got, wantEvents)
			}
			if d := label(SignalEmptyDirFsLimit) - emptyBefore; d != 1 {
				t.Errorf("kubelet_evictions{emptydirfs.limit} grew by %v, want 1", d)
			}
			if d := label(SignalEphemeralContainerFsLimit) - contBefore; d != 1 {
				t.Errorf("kubelet_evictions{ephemeralcontainerfs.limit} grew by %v, want 1", d)
			}
			// The evicted pods no longer run: nothing more is evicted.
			h.workers.clean("over")
			h.workers.clean("greedy")
			h.clk.Step(time.Minute)
			h.pass()
			if got := len(h.killed()); got != 2 {
				t.Errorf("%d kills after the violators stopped, want 2", got)
			}
		})
	}
}

// TestRunWithoutThresholdsChecksLocalStorage: Run passes even without
// thresholds when localStorageCapacityIsolation is on.
func TestRunWithoutThresholdsChecksLocalStorage(t *testing.T) {
	over := storagePod("over", []string{"1Mi"})
	h := newHarness(t, Config{}, time.Minute, over)
	h.m.opts.LocalStorageCapacityIsolation = true
	cs := &countingSummary{calls: make(chan struct{}, 10)}
	cs.s = &statsapi.Summary{Pods: []statsapi.PodStats{storageStats{rootfs: []uint64{2}, logs: []uint64{0}, total: u64(2)}.of("over")}}
	h.m.opts.Summary = cs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	for !h.clk.HasWaiters() {
		runtime.Gosched()
	}
	h.clk.Step(DefaultInterval)
	select {
	case <-cs.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no pass without thresholds")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.killed()); got != "[over/kill/keep=true/grace=1]" {
		t.Errorf("kills = %s", got)
	}
}

func TestHasLocalStorageLimit(t *testing.T) {
	podLevel := storagePod("pod-level", []string{""})
	podLevel.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}
	initLimited := storagePod("init", []string{""})
	initLimited.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}}}
	cpuOnly := storagePod("cpu", []string{""})
	cpuOnly.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	for _, tt := range []struct {
		pod  *v1.Pod
		want bool
	}{
		{storagePod("plain", []string{"", ""}, emptyDir("scratch", "", "")), false},
		{cpuOnly, false},
		{storagePod("sized", []string{""}, emptyDir("scratch", "10Mi", "")), true},
		{storagePod("memory", []string{""}, emptyDir("scratch", "10Mi", v1.StorageMediumMemory)), true},
		{storagePod("container", []string{"", "5Mi"}), true},
		{podLevel, true},
		{initLimited, true},
	} {
		if got := HasLocalStorageLimit(tt.pod); got != tt.want {
			t.Errorf("HasLocalStorageLimit(%s) = %v, want %v", tt.pod.Name, got, tt.want)
		}
	}
}

// A pass without a threshold met reads the node's figures and the stats
// of the pods with a local storage limit only; every pod's only once it
// ranks pods to evict.
func TestPassReadsThePodsItChecks(t *testing.T) {
	limited := storagePod("limited", []string{"100Mi"})
	plain := storagePod("plain", []string{""})
	h := newHarness(t, Config{Hard: map[string]string{"memory.available": "100Mi"}}, 0, limited, plain)
	h.m.opts.LocalStorageCapacityIsolation = true
	var picked []types.UID
	h.m.opts.Summary = pickRecorder{h.summary, &picked}
	h.summary.set(500, map[string]uint64{"limited": 10, "plain": 10})
	h.pass()
	if fmt.Sprint(picked) != "[limited]" || h.summary.full != 0 {
		t.Errorf("without pressure: pods picked %v and %d reads of every pod's stats; want [limited] and 0", picked, h.summary.full)
	}
	h.summary.set(50, map[string]uint64{"limited": 10, "plain": 400})
	h.pass()
	if h.summary.full != 1 {
		t.Errorf("under pressure: %d reads of every pod's stats, want 1", h.summary.full)
	}
	if got := fmt.Sprint(h.killed()); got != "[plain/kill/keep=true/grace=1]" {
		t.Errorf("kills = %s, want plain, ranked by the stats of every pod", got)
	}
}

// pickRecorder records the pods a SummaryOf picks among the summary's.
type pickRecorder struct {
	*fakeSummary
	picked *[]types.UID
}

func (p pickRecorder) SummaryOf(ctx context.Context, pick func(types.UID) bool) (*statsapi.Summary, error) {
	*p.picked = nil
	for _, ps := range p.s.Pods {
		if pick(types.UID(ps.PodRef.UID)) {
			*p.picked = append(*p.picked, types.UID(ps.PodRef.UID))
		}
	}
	return p.fakeSummary.SummaryOf(ctx, pick)
}
