package eviction

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestReclaimableMemory(t *testing.T) {
	const mi = 1 << 20
	calm := &PSI{Some: PSILine{Avg10: 2}}
	stalled := &PSI{Some: PSILine{Avg10: 10}}
	for _, tc := range []struct {
		name      string
		avail     int64 // of 1024 Mi, working-set signal
		r         Reclaimable
		wantAvail int64
	}{
		{"active page cache counts as available", 100, Reclaimable{ActiveFile: 600 * mi, InactiveFile: 200 * mi}, 700},
		{"without PSI the page cache counts", 100, Reclaimable{ActiveFile: 600 * mi, PSI: nil}, 700},
		{"calm pressure keeps it", 100, Reclaimable{ActiveFile: 600 * mi, PSI: calm}, 700},
		{"stalls at the bound: working set", 100, Reclaimable{ActiveFile: 600 * mi, PSI: stalled}, 100},
		{"no page cache: anonymous memory stays used", 50, Reclaimable{}, 50},
		{"never above the capacity", 900, Reclaimable{ActiveFile: 4096 * mi}, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReclaimableMemory(obsBytes(tc.avail*mi, 1024*mi), tc.r, DefaultPSIBound)
			if got.Available.Value() != tc.wantAvail*mi || got.Capacity.Value() != 1024*mi {
				t.Errorf("available %d of %d Mi, want %d of 1024", got.Available.Value()/mi, got.Capacity.Value()/mi, tc.wantAvail)
			}
		})
	}
}

type fakeReclaimable struct {
	r   Reclaimable
	err error
	// pods are the pods' active page cache by name; a pod missing is
	// unreadable.
	pods map[string]uint64
}

func (f fakeReclaimable) Read(context.Context) (Reclaimable, error) { return f.r, f.err }

func (f fakeReclaimable) PodActiveFile(_ context.Context, pod *v1.Pod) (uint64, error) {
	if a, ok := f.pods[pod.Name]; ok {
		return a, nil
	}
	return 0, errors.New("no such cgroup")
}

// TestReclaimableSignalRanksByMemoryUsed: when a pod allocating memory
// pushes the reclaimable signal past its threshold, it is evicted before a
// pod whose working set is larger but mostly page cache; under the
// default signal the ranking is upstream's, by working set.
func TestReclaimableSignalRanksByMemoryUsed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reader ReclaimableReader
		want   string
	}{
		{"working set (default)", nil, "reader"},
		{"reclaimable", fakeReclaimable{pods: map[string]uint64{"reader": 600 << 20, "hog": 1 << 20}}, "hog"},
		{"reclaimable, more cache than working set", fakeReclaimable{pods: map[string]uint64{"reader": 900 << 20, "hog": 0}}, "hog"},
		{"reclaimable, pod cgroups unreadable", fakeReclaimable{}, "reader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader, hog := testPod("reader", 0, ""), testPod("hog", 0, "")
			h := newHarness(t, Config{Hard: map[string]string{"memory.available": "200Mi"}}, time.Minute, reader, hog)
			h.m.opts.Reclaimable = tc.reader
			h.summary.set(100, map[string]uint64{"reader": 700 << 20, "hog": 300 << 20})
			h.pass()
			got := h.killed()
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.want+"/") {
				t.Errorf("evicted %v, want %s", got, tc.want)
			}
		})
	}
}

// TestReclaimableSignalDecidesEviction: the same node (100 Mi available
// by working set, 600 Mi of it active page cache) is evicted under the
// default signal, not under the reclaimable one, and is again once the
// kernel stalls on memory or the reading fails.
func TestReclaimableSignalDecidesEviction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reader ReclaimableReader
		evict  bool
	}{
		{"working set (default)", nil, true},
		{"reclaimable, page cache", fakeReclaimable{r: Reclaimable{ActiveFile: 600 << 20}}, false},
		{"reclaimable, anonymous memory", fakeReclaimable{r: Reclaimable{ActiveFile: 10 << 20}}, true},
		{"reclaimable, stalling", fakeReclaimable{r: Reclaimable{ActiveFile: 600 << 20, PSI: &PSI{Some: PSILine{Avg10: 40}}}}, true},
		{"reclaimable, unreadable", fakeReclaimable{err: errors.New("boom")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := testPod("reader", 0, "")
			h := newHarness(t, Config{Hard: map[string]string{"memory.available": "200Mi"}}, time.Minute, reader)
			h.m.opts.Reclaimable = tc.reader
			h.summary.set(100, map[string]uint64{"reader": 700 << 20})
			h.pass()
			if got := len(h.killed()) == 1; got != tc.evict || h.m.MemoryPressure() != tc.evict {
				t.Errorf("evicted %v, memory pressure %v; want %v", h.killed(), h.m.MemoryPressure(), tc.evict)
			}
		})
	}
}

func TestHostReclaimable(t *testing.T) {
	write := func(t *testing.T, path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const pressure = "some avg10=3.50 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1\n"
	for _, tc := range []struct {
		name             string
		files            map[string]string
		active, inactive uint64
		psi              float64 // -1: none
		wantErr          bool
	}{{
		name: "cgroup v1",
		files: map[string]string{
			"cg/memory/memory.stat": "cache 5\nactive_file 1\ninactive_file 2\ntotal_active_file 300\ntotal_inactive_file 400\n",
			"pressure":              pressure,
		},
		active: 300, inactive: 400, psi: 3.5,
	}, {
		name:   "cgroup v2, no PSI",
		files:  map[string]string{"cg/memory.stat": "anon 9\nactive_file 30\ninactive_file 40\n"},
		active: 30, inactive: 40, psi: -1,
	}, {
		name:    "no memory.stat",
		files:   map[string]string{"pressure": pressure},
		wantErr: true,
	}, {
		name:    "v1 without the totals",
		files:   map[string]string{"cg/memory/memory.stat": "active_file 1\ninactive_file 2\n"},
		wantErr: true,
	}, {
		name:    "malformed pressure",
		files:   map[string]string{"cg/memory.stat": "active_file 30\ninactive_file 40\n", "pressure": "some avg10=x"},
		wantErr: true,
	}, {
		name:    "malformed number",
		files:   map[string]string{"cg/memory.stat": "active_file -30\ninactive_file 40\n"},
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, text := range tc.files {
				write(t, filepath.Join(dir, p), text)
			}
			r, err := HostReclaimable{CgroupRoot: filepath.Join(dir, "cg"), PressureFile: filepath.Join(dir, "pressure")}.Read(context.Background())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Read = %+v, want an error", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.ActiveFile != tc.active || r.InactiveFile != tc.inactive {
				t.Errorf("file LRU = %d/%d, want %d/%d", r.ActiveFile, r.InactiveFile, tc.active, tc.inactive)
			}
			switch {
			case tc.psi < 0 && r.PSI != nil:
				t.Errorf("PSI = %+v, want none", r.PSI)
			case tc.psi >= 0 && (r.PSI == nil || r.PSI.Some.Avg10 != tc.psi):
				t.Errorf("PSI = %+v, want some avg10 %v", r.PSI, tc.psi)
			}
		})
	}
}

func TestHostReclaimablePodActiveFile(t *testing.T) {
	pod := testPod("p", 0, "")
	cgroup := func(p *v1.Pod) string { return "/kubepods/besteffort/pod" + string(p.UID) }
	for _, tc := range []struct {
		name    string
		file    string // below the cgroup root
		text    string
		want    uint64
		wantErr bool
	}{
		{"cgroup v1", "memory/kubepods/besteffort/podp/memory.stat", "active_file 1\ninactive_file 2\ntotal_active_file 500\ntotal_inactive_file 7\n", 500, false},
		{"cgroup v2", "kubepods/besteffort/podp/memory.stat", "anon 3\nactive_file 50\ninactive_file 7\n", 50, false},
		{"no cgroup", "kubepods/burstable/podp/memory.stat", "active_file 50\ninactive_file 7\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, tc.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := HostReclaimable{CgroupRoot: dir, PodCgroup: cgroup}.PodActiveFile(context.Background(), pod)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("PodActiveFile = %d, %v; want %d (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestHostReclaimableOnThisHost reads the machine's own files, where it
// has a memory hierarchy.
func TestHostReclaimableOnThisHost(t *testing.T) {
	h := HostReclaimable{CgroupRoot: "/sys/fs/cgroup", PressureFile: "/proc/pressure/memory"}
	r, err := h.Read(context.Background())
	if errors.Is(err, errNoMemoryStat) {
		t.Skip("no root memory.stat on this host")
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.ActiveFile+r.InactiveFile == 0 {
		t.Errorf("no page cache at all on a running host: %+v", r)
	}
}
