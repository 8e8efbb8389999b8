package resize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podresources"
)

func rr(req, lim map[v1.ResourceName]string) v1.ResourceRequirements {
	out := v1.ResourceRequirements{}
	if req != nil {
		out.Requests = v1.ResourceList{}
		for n, q := range req {
			out.Requests[n] = resource.MustParse(q)
		}
	}
	if lim != nil {
		out.Limits = v1.ResourceList{}
		for n, q := range lim {
			out.Limits[n] = resource.MustParse(q)
		}
	}
	return out
}

func TestStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.UIDs()) != 0 {
		t.Fatalf("new store has %v", s.UIDs())
	}
	a := Allocation{"app": rr(map[v1.ResourceName]string{"cpu": "100m", "memory": "64Mi"}, map[v1.ResourceName]string{"cpu": "200m"})}
	b := Allocation{"web": rr(nil, map[v1.ResourceName]string{"memory": "1Gi"})}
	for uid, al := range map[types.UID]Allocation{"u1": a, "u2": b, "u3": a} {
		if err := s.Set(uid, al); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove("u3"); err != nil {
		t.Fatal(err)
	}
	r, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.UIDs(); len(got) != 2 || got[0] != "u1" || got[1] != "u2" {
		t.Fatalf("reopened UIDs = %v, want [u1 u2]", got)
	}
	for uid, want := range map[types.UID]Allocation{"u1": a, "u2": b} {
		got, ok := r.Get(uid)
		if !ok || !got.Equal(want) {
			t.Errorf("reopened %s = %v %v, want %v", uid, got, ok, want)
		}
	}
	if err := r.RemoveOrphans(map[types.UID]bool{"u2": true}); err != nil {
		t.Fatal(err)
	}
	r2, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.UIDs(); len(got) != 1 || got[0] != "u2" {
		t.Fatalf("after RemoveOrphans UIDs = %v, want [u2]", got)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the state file (no temporary file left)", len(entries))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestStoreGetReturnsACopy(t *testing.T) {
	s, err := OpenStore(filepath.Join(t.TempDir(), StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("u", Allocation{"c": rr(map[v1.ResourceName]string{"cpu": "1"}, nil)}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get("u")
	got["c"].Requests[v1.ResourceCPU] = resource.MustParse("5")
	again, _ := s.Get("u")
	if q := again["c"].Requests[v1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("a caller changed the record: cpu %s", q.String())
	}
}

func TestStoreFailedWriteKeepsRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(filepath.Join(dir, "missing-dir", StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("u", Allocation{"c": {}}); err == nil {
		t.Fatal("Set into a missing directory succeeded")
	}
	if _, ok := s.Get("u"); ok {
		t.Fatal("an allocation that was not written is visible")
	}
}

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"empty checkpoint", `{"data":"{}","checksum":` + sumOf(`{}`) + `}`, true},
		{"checkpoint", `{"data":` + quote(upstreamOne) + `,"checksum":` + sumOf(upstreamOne) + `}`, true},
		{"checkpoint with a wrong checksum", `{"data":` + quote(upstreamOne) + `,"checksum":1}`, false},
		{"checkpoint without data", `{"checksum":` + sumOf(``) + `}`, false},
		{"checkpoint with an unknown field", `{"data":"{}","checksum":` + sumOf(`{}`) + `,"x":1}`, false},
		{"checkpoint data with an unknown field", `{"data":` + quote(`{"x":1}`) + `,"checksum":` + sumOf(`{"x":1}`) + `}`, false},
		{"checkpoint data not json", `{"data":"x","checksum":` + sumOf(`x`) + `}`, false},
		{"checkpoint with a negative emptyDir limit", `{"data":` + quote(badEmptyDir) + `,"checksum":` + sumOf(badEmptyDir) + `}`, false},
		{"empty record", `{"version":1,"pods":{}}`, true},
		{"one pod", `{"version":1,"pods":{"u":{"c":{"requests":{"cpu":"100m"},"limits":{"memory":"1Gi"}}}}}`, true},
		{"other version", `{"version":2,"pods":{}}`, false},
		{"neither version nor data", `{"pods":{}}`, false},
		{"unknown field", `{"version":1,"pods":{},"x":1}`, false},
		{"trailing data", `{"version":1,"pods":{}} {}`, false},
		{"empty uid", `{"version":1,"pods":{"":{}}}`, false},
		{"empty container name", `{"version":1,"pods":{"u":{"":{}}}}`, false},
		{"long container name", `{"version":1,"pods":{"u":{"` + strings.Repeat("a", 254) + `":{}}}}`, false},
		{"bad quantity", `{"version":1,"pods":{"u":{"c":{"requests":{"cpu":"lots"}}}}}`, false},
		{"negative quantity", `{"version":1,"pods":{"u":{"c":{"limits":{"memory":"-1"}}}}}`, false},
		{"not json", `version: 1`, false},
		{"empty", ``, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseState([]byte(tc.in))
			if (err == nil) != tc.ok {
				t.Fatalf("ParseState(%s) error = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

const (
	upstreamOne = `{"entries":{"u":{"ContainerResources":{"c":{"requests":{"cpu":"100m"}}},"PodLevelResources":null,"EmptyDirVolumeLimits":{"v":"1Gi"}}}}`
	badEmptyDir = `{"entries":{"u":{"ContainerResources":{},"EmptyDirVolumeLimits":{"v":"-1"}}}}`
)

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func sumOf(data string) string { return strconv.FormatUint(checksum(data), 10) }

// The record is the upstream kubelet's allocation checkpoint: heartlet
// reads the file the upstream kubelet v1.37.2 wrote and, given the same
// allocations, writes the same bytes, so that either can take over a node
// from the other. testdata/upstream-allocated_pods_state was written by
// upstream's own code (pkg/kubelet/allocation/state, NewCheckpoint and
// MarshalCheckpoint) with hack/tools/kube/allocationstate.
func TestStateIsUpstreamCheckpoint(t *testing.T) {
	upstream, err := os.ReadFile(filepath.Join("testdata", "upstream-allocated_pods_state"))
	if err != nil {
		t.Fatal(err)
	}
	pods, extra, err := parseState(upstream)
	if err != nil {
		t.Fatalf("parse upstream's checkpoint: %v", err)
	}
	want := map[types.UID]Allocation{
		"0b6f3a6e-5c1e-4c55-9f0e-2f1c1d1a7a01": {
			"app":     rr(map[v1.ResourceName]string{"cpu": "250m", "memory": "64Mi"}, map[v1.ResourceName]string{"memory": "128Mi"}),
			"sidecar": {},
		},
		"9d1c2b3a-0000-4000-8000-000000000002": {
			"main":   rr(map[v1.ResourceName]string{"cpu": "1"}, nil),
			PodLevel: rr(nil, map[v1.ResourceName]string{"cpu": "2"}),
		},
	}
	if len(pods) != len(want) {
		t.Fatalf("parsed %d pods, want %d: %v", len(pods), len(want), pods)
	}
	for uid, a := range want {
		if !pods[uid].Equal(a) {
			t.Errorf("pod %s = %v, want %v", uid, pods[uid], a)
		}
	}
	x, ok := extra["9d1c2b3a-0000-4000-8000-000000000002"]
	if !ok || x.emptyDir["scratch"].String() != "64Mi" {
		t.Errorf("upstream's emptyDir allocations were not kept: %+v", x)
	}
	if _, ok := extra["0b6f3a6e-5c1e-4c55-9f0e-2f1c1d1a7a01"]; ok {
		t.Error("a pod without emptyDir allocations has an extra record")
	}
	got, err := encodeState(pods, extra)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(upstream) {
		t.Errorf("heartlet writes\n%s\nupstream writes\n%s", got, upstream)
	}
}

// A store opened on heartlet's earlier format keeps its allocations and
// rewrites them as the upstream checkpoint; upstream's extra records
// disappear with their pod.
func TestStoreMigratesAndKeepsUpstreamRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFileName)
	if err := os.WriteFile(path, []byte(`{"version":1,"pods":{"u":{"c":{"requests":{"cpu":"100m"}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("v", Allocation{"d": {}}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), `{"data":`) {
		t.Fatalf("the record was not rewritten as the upstream checkpoint: %s", data)
	}
	if a, ok := s.Get("u"); !ok || !a.Equal(Allocation{"c": rr(map[v1.ResourceName]string{"cpu": "100m"}, nil)}) {
		t.Fatalf("the earlier record's pod u = %v %v", a, ok)
	}

	upstream, err := os.ReadFile(filepath.Join("testdata", "upstream-allocated_pods_state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, upstream, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("w", Allocation{"e": {}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("0b6f3a6e-5c1e-4c55-9f0e-2f1c1d1a7a01"); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `\"PodLevelResources\":{\"limits\":{\"cpu\":\"2\"}}`) {
		t.Errorf("upstream's pod-level allocation of a kept pod was lost: %s", data)
	}
	if err := s.Remove("9d1c2b3a-0000-4000-8000-000000000002"); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `\"PodLevelResources\":{`) || len(s.extra) != 0 {
		t.Errorf("a removed pod's upstream records stayed: %s", data)
	}
}

func TestOpenStoreRefusesACorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	if err := os.WriteFile(path, []byte(`{"version":1,"pods":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(path); err == nil {
		t.Fatal("a truncated state file was accepted")
	}
	if err := os.WriteFile(path, []byte(strings.Repeat(" ", maxStateBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an oversized state file: error %v", err)
	}
}

// FuzzParseState checks that the parser never panics and that whatever it
// accepts is written back to a file it parses to the same record.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":1,"pods":{"u":{"c":{"requests":{"cpu":"100m"},"limits":{"memory":"1Gi"}}}}}`))
	f.Add([]byte(`{"version":1,"pods":{}}`))
	f.Add([]byte(`{"data":` + quote(upstreamOne) + `,"checksum":` + sumOf(upstreamOne) + `}`))
	f.Add([]byte(`{"version":1,"pods":{"u":{"c":{"limits":{"cpu":"1e3"}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, extra, err := parseState(data)
		if err != nil {
			return
		}
		enc, err := encodeState(pods, extra)
		if err != nil {
			t.Fatalf("encode an accepted record: %v", err)
		}
		again, err := ParseState(enc)
		if err != nil {
			t.Fatalf("the encoding of an accepted record does not parse: %v\n%s", err, enc)
		}
		if len(again) != len(pods) {
			t.Fatalf("round trip changed the pod count: %d != %d", len(again), len(pods))
		}
		for uid, a := range pods {
			if !again[uid].Equal(a) {
				t.Fatalf("round trip changed pod %s: %v != %v", uid, again[uid], a)
			}
		}
	})
}

func TestHandlerListsAndRemoves(t *testing.T) {
	s, err := OpenStore(filepath.Join(t.TempDir(), StateFileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []types.UID{"a", "b"} {
		if err := s.Set(uid, Allocation{"c": {}}); err != nil {
			t.Fatal(err)
		}
	}
	set := podresources.New(s.Handler())
	uids, err := set.PodsWithResources(context.Background())
	if err != nil || len(uids) != 2 {
		t.Fatalf("PodsWithResources = %v, %v; want a and b", uids, err)
	}
	if err := set.Cleanup(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("a"); ok {
		t.Error("Cleanup left the allocation")
	}
	if _, ok := s.Get("b"); !ok {
		t.Error("Cleanup of a removed b's allocation")
	}
	if err := set.Release(context.Background(), &v1.Pod{}); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// A pod's pod-level resources are recorded as upstream's
// PodLevelResources beside its containers' (pkg/kubelet/allocation in
// v1.37.2, ResourceInfoForPod, InPlacePodLevelResourcesVerticalScaling on
// by default), and no emptyDir limits (their gate is off by default).
func TestStoreRecordsPodLevelResources(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFileName)
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{}
	pod.UID = "u"
	pod.Spec.Containers = []v1.Container{{Name: "app", Resources: rr(map[v1.ResourceName]string{"cpu": "100m"}, nil)}}
	pod.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
	if err := s.Set(pod.UID, FromPod(pod)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entries":{"u":{"ContainerResources":{"app":{"requests":{"cpu":"100m"}}},"PodLevelResources":{"limits":{"cpu":"2"}},"EmptyDirVolumeLimits":null}}}`
	if wantFile := `{"data":` + quote(want) + `,"checksum":` + sumOf(want) + `}`; string(data) != wantFile {
		t.Errorf("file\n%s\nwant\n%s", data, wantFile)
	}
	reopened, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := reopened.Get("u"); !ok || !a.Equal(FromPod(pod)) {
		t.Errorf("read back %v, want %v", a, FromPod(pod))
	}
	pod.Spec.Resources = nil
	if err := s.Set(pod.UID, FromPod(pod)); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Get("u"); a != nil {
		if _, ok := a[PodLevel]; ok {
			t.Error("a pod recorded again without pod-level resources kept them")
		}
	}
}

// Changes made while the file is being written are written together by
// the next write, and each caller returns once its own change is written;
// a failed write fails every change it held, and none of them is recorded.
func TestStoreWritesConcurrentChangesTogether(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("second write fails=%v", fail), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), StateFileName)
			s, err := OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var writes atomic.Int32
			s.writeFile = func(p string, data []byte) error {
				n := writes.Add(1)
				if n == 1 {
					<-release
				}
				if n == 2 && fail {
					return errors.New("disk full")
				}
				return writeFileAtomic(p, data)
			}
			const n = 10
			al := Allocation{"c": rr(map[v1.ResourceName]string{"cpu": "100m"}, nil)}
			errs := make(chan error, n)
			go func() { errs <- s.Set("u0", al) }()
			for writes.Load() == 0 { // the first write is under way
				runtime.Gosched()
			}
			for i := 1; i < n; i++ {
				go func() { errs <- s.Set(types.UID(fmt.Sprintf("u%d", i)), al) }()
			}
			for {
				s.mu.Lock()
				queued := len(s.queue)
				s.mu.Unlock()
				if queued == n-1 {
					break
				}
				runtime.Gosched()
			}
			close(release)
			failed := 0
			for range n {
				if err := <-errs; err != nil {
					failed++
				}
			}
			if got := writes.Load(); got != 2 {
				t.Errorf("%d changes written in %d writes, want 2 (one under way, then the rest together)", n, got)
			}
			wantFailed, wantUIDs := 0, n
			if fail {
				wantFailed, wantUIDs = n-1, 1
			}
			if failed != wantFailed {
				t.Errorf("%d calls failed, want %d", failed, wantFailed)
			}
			if got := len(s.UIDs()); got != wantUIDs {
				t.Errorf("record has %d pods, want %d", got, wantUIDs)
			}
			r, err := OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.UIDs()); got != wantUIDs {
				t.Errorf("file has %d pods, want %d", got, wantUIDs)
			}
		})
	}
}
