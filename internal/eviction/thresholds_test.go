package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    []string // key=value[/grace][+minReclaim]
		wantErr string
	}{
		{
			name: "upstream defaults",
			cfg: Config{Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%",
				"nodefs.inodesFree": "5%", "imagefs.available": "15%"}},
			want: []string{"hard/memory.available=100Mi", "hard/nodefs.available=10%", "hard/nodefs.inodesFree=5%", "hard/imagefs.available=15%"},
		},
		{
			name: "0% and 100% disable",
			cfg:  Config{Hard: map[string]string{"nodefs.available": "0%", "imagefs.available": "100%", "pid.available": "1000"}},
			want: []string{"hard/pid.available=1k"},
		},
		{
			name: "soft with grace and minimum reclaim",
			cfg: Config{
				Hard:            map[string]string{"memory.available": "100Mi"},
				Soft:            map[string]string{"memory.available": "300Mi"},
				SoftGracePeriod: map[string]string{"memory.available": "1m30s"},
				MinimumReclaim:  map[string]string{"memory.available": "50Mi"},
			},
			want: []string{"hard/memory.available=100Mi+50Mi", "soft/memory.available=300Mi/1m30s+50Mi"},
		},
		{
			name:    "soft without grace",
			cfg:     Config{Soft: map[string]string{"nodefs.available": "20%"}},
			wantErr: "needs a grace period",
		},
		{
			name:    "containerfs refused",
			cfg:     Config{Hard: map[string]string{"containerfs.available": "10%"}},
			wantErr: "evictionHard[containerfs.available]: not supported",
		},
		{
			name:    "unknown signal",
			cfg:     Config{Hard: map[string]string{"memory.free": "1Gi"}},
			wantErr: "unknown signal",
		},
		{
			name: "allocatable memory configured",
			cfg:  Config{Hard: map[string]string{"allocatableMemory.available": "1Gi"}},
			want: []string{"hard/allocatableMemory.available=1Gi"},
		},
		{
			name: "pods enforced copy hard memory thresholds to allocatable",
			cfg: Config{
				Hard:            map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
				Soft:            map[string]string{"memory.available": "300Mi"},
				SoftGracePeriod: map[string]string{"memory.available": "1m"},
				MinimumReclaim:  map[string]string{"memory.available": "50Mi"},
				EnforcePods:     true,
			},
			want: []string{"hard/memory.available=100Mi+50Mi", "hard/nodefs.available=10%", "soft/memory.available=300Mi/1m0s+50Mi",
				"hard/allocatableMemory.available=100Mi+50Mi"},
		},
		{
			name: "pods enforced keep a configured allocatable threshold",
			cfg: Config{
				Hard:        map[string]string{"memory.available": "100Mi", "allocatableMemory.available": "200Mi"},
				EnforcePods: true,
			},
			want: []string{"hard/memory.available=100Mi", "hard/allocatableMemory.available=200Mi"},
		},
		{
			name: "pods not enforced add nothing",
			cfg:  Config{Hard: map[string]string{"memory.available": "100Mi"}},
			want: []string{"hard/memory.available=100Mi"},
		},
		{
			name:    "bad value",
			cfg:     Config{Hard: map[string]string{"memory.available": "lots"}},
			wantErr: "must be a quantity",
		},
		{
			name:    "zero quantity",
			cfg:     Config{Hard: map[string]string{"memory.available": "0"}},
			wantErr: "must be greater than 0",
		},
		{
			name:    "bad grace period",
			cfg:     Config{Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "soon"}},
			wantErr: "must be a duration",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, th := range got {
				k := th.key() + "=" + th.Value.String()
				if th.GracePeriod > 0 {
					k += "/" + th.GracePeriod.String()
				}
				if th.MinReclaim != nil {
					k += "+" + th.MinReclaim.String()
				}
				keys = append(keys, k)
			}
			if strings.Join(keys, " ") != strings.Join(tt.want, " ") {
				t.Errorf("thresholds = %v, want %v", keys, tt.want)
			}
		})
	}
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestObserve(t *testing.T) {
	s := &statsapi.Summary{Node: statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{AvailableBytes: u64(3 << 30), WorkingSetBytes: u64(1 << 30)},
		Fs:     &statsapi.FsStats{AvailableBytes: u64(10 << 30), CapacityBytes: u64(100 << 30), InodesFree: u64(900), Inodes: u64(1000)},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{AvailableBytes: u64(5 << 30), CapacityBytes: u64(50 << 30),
			InodesFree: u64(90), Inodes: u64(100)}},
		Rlimit: &statsapi.RlimitStats{MaxPID: i64(4194304), NumOfRunningProcesses: i64(300)},
		SystemContainers: []statsapi.ContainerStats{
			{Name: statsapi.SystemContainerKubelet, Memory: &statsapi.MemoryStats{AvailableBytes: u64(1), WorkingSetBytes: u64(1)}},
			{Name: statsapi.SystemContainerPods, Memory: &statsapi.MemoryStats{AvailableBytes: u64(512 << 20), WorkingSetBytes: u64(1536 << 20)}},
		},
	}}
	obs := Observe(s)
	want := map[Signal][2]int64{
		SignalMemoryAvailable:            {3 << 30, 4 << 30},
		SignalAllocatableMemoryAvailable: {512 << 20, 2 << 30},
		SignalNodeFsAvailable:            {10 << 30, 100 << 30},
		SignalNodeFsInodesFree:           {900, 1000},
		SignalImageFsAvailable:           {5 << 30, 50 << 30},
		SignalImageFsInodesFree:          {90, 100},
		SignalPIDAvailable:               {4194304 - 300, 4194304},
	}
	if len(obs) != len(want) {
		t.Errorf("got %d observations, want %d", len(obs), len(want))
	}
	for sig, w := range want {
		o, ok := obs[sig]
		if !ok {
			t.Errorf("%s: no observation", sig)
			continue
		}
		if o.Available.Value() != w[0] || o.Capacity.Value() != w[1] {
			t.Errorf("%s = %s of %s, want %d of %d", sig, o.Available.String(), o.Capacity.String(), w[0], w[1])
		}
	}
	if got := Observe(&statsapi.Summary{}); len(got) != 0 {
		t.Errorf("empty summary gave %v", got)
	}
	// An unlimited kubepods cgroup has no available memory: no signal.
	unlimited := &statsapi.Summary{Node: statsapi.NodeStats{SystemContainers: []statsapi.ContainerStats{
		{Name: statsapi.SystemContainerPods, Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(1 << 30)}},
	}}}
	if got := Observe(unlimited); len(got) != 0 {
		t.Errorf("unlimited kubepods gave %v", got)
	}
}

func obsBytes(avail, capacity int64) Observation {
	return Observation{Available: *resource.NewQuantity(avail, resource.BinarySI), Capacity: *resource.NewQuantity(capacity, resource.BinarySI)}
}

func mustThresholds(t *testing.T, c Config) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(c)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestThresholdsMet(t *testing.T) {
	ts := mustThresholds(t, Config{
		Hard:           map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		MinimumReclaim: map[string]string{"memory.available": "50Mi"},
	})
	tests := []struct {
		name    string
		obs     Observations
		reclaim bool
		want    []Signal
	}{
		{"nothing observed", Observations{}, false, nil},
		{"above both", Observations{SignalMemoryAvailable: obsBytes(200<<20, 1<<30), SignalNodeFsAvailable: obsBytes(20, 100)}, false, nil},
		{"memory below", Observations{SignalMemoryAvailable: obsBytes(99<<20, 1<<30)}, false, []Signal{SignalMemoryAvailable}},
		{"exactly at the threshold is not met", Observations{SignalMemoryAvailable: obsBytes(100<<20, 1<<30)}, false, nil},
		{"percentage of capacity", Observations{SignalNodeFsAvailable: obsBytes(9, 100)}, false, []Signal{SignalNodeFsAvailable}},
		{"within the minimum reclaim", Observations{SignalMemoryAvailable: obsBytes(120<<20, 1<<30)}, true, []Signal{SignalMemoryAvailable}},
		{"past the minimum reclaim", Observations{SignalMemoryAvailable: obsBytes(151<<20, 1<<30)}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Signal
			for _, th := range ThresholdsMet(ts, tt.obs, tt.reclaim) {
				got = append(got, th.Signal)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("met = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGracePeriodAndConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	soft := Threshold{Signal: SignalMemoryAvailable, GracePeriod: time.Minute}
	hard := Threshold{Signal: SignalNodeFsAvailable, Hard: true}
	first := FirstObserved([]Threshold{soft, hard}, nil, t0)
	if got := PastGracePeriod([]Threshold{soft, hard}, first, t0); len(got) != 1 || got[0].Signal != SignalNodeFsAvailable {
		t.Errorf("at first sight: %v, want only the hard threshold", got)
	}
	first = FirstObserved([]Threshold{soft}, first, t0.Add(59*time.Second))
	if got := PastGracePeriod([]Threshold{soft}, first, t0.Add(59*time.Second)); len(got) != 0 {
		t.Errorf("within the grace period: %v", got)
	}
	first = FirstObserved([]Threshold{soft}, first, t0.Add(time.Minute))
	if got := PastGracePeriod([]Threshold{soft}, first, t0.Add(time.Minute)); len(got) != 1 {
		t.Errorf("after the grace period: %v", got)
	}
	// An interruption restarts the grace period.
	first = FirstObserved(nil, first, t0.Add(61*time.Second))
	first = FirstObserved([]Threshold{soft}, first, t0.Add(62*time.Second))
	if got := PastGracePeriod([]Threshold{soft}, first, t0.Add(62*time.Second)); len(got) != 0 {
		t.Errorf("after an interruption: %v", got)
	}

	conds := Conditions([]Threshold{soft, hard}, nil, 5*time.Minute, t0)
	if len(conds) != 2 {
		t.Fatalf("conditions = %v, want memory and disk pressure", conds)
	}
	conds = Conditions([]Threshold{hard}, conds, 5*time.Minute, t0.Add(4*time.Minute))
	if _, ok := conds[v1.NodeMemoryPressure]; !ok {
		t.Errorf("memory pressure dropped within the transition period")
	}
	conds = Conditions([]Threshold{hard}, conds, 5*time.Minute, t0.Add(5*time.Minute))
	if _, ok := conds[v1.NodeMemoryPressure]; ok {
		t.Errorf("memory pressure kept past the transition period")
	}
	if _, ok := conds[v1.NodeDiskPressure]; !ok {
		t.Errorf("disk pressure dropped while its threshold is met")
	}
	if ConditionOf(SignalPIDAvailable) != v1.NodePIDPressure || ConditionOf(SignalImageFsInodesFree) != v1.NodeDiskPressure {
		t.Errorf("ConditionOf maps wrongly")
	}
}
