package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/heartlet/heartlet/internal/journal"
)

// The ratio columns pair heartlet with each reference in the table, and
// the conforming agent that costs nothing with the kubelet.
func TestRatioColumns(t *testing.T) {
	got := ratioColumns([]string{agentHeartlet, agentKubelet, agentFloorSetup, agentFloorAPI})
	want := [][2]string{{agentHeartlet, agentKubelet}, {agentHeartlet, agentFloorSetup}, {agentHeartlet, agentFloorAPI}, {agentFloorAPI, agentKubelet}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ratioColumns = %v, want %v", got, want)
	}
	if got := ratioColumns([]string{agentKubelet, agentFloor}); len(got) != 0 {
		t.Errorf("ratioColumns without heartlet or floor-api = %v, want none", got)
	}
}

func TestParseCompare(t *testing.T) {
	tests := []struct {
		agents, counts string
		wantAgents     []string
		wantCounts     []int
		wantErr        string
	}{
		{"heartlet,kubelet,floor", "30,100", []string{"heartlet", "kubelet", "floor"}, []int{30, 100}, ""},
		{" floor ", "5", []string{"floor"}, []int{5}, ""},
		{"floor-setup,floor-api,api-writes", "5", []string{"floor-setup", "floor-api", "api-writes"}, []int{5}, ""},
		{"heartlet,docker", "5", nil, nil, `unknown agent "docker"`},
		{"heartlet", "0", nil, nil, `bad pod count "0"`},
		{"heartlet", "ten", nil, nil, `bad pod count "ten"`},
	}
	for _, tt := range tests {
		o, err := parseCompare(tt.agents, tt.counts)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseCompare(%q, %q) error = %v, want %q", tt.agents, tt.counts, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCompare(%q, %q): %v", tt.agents, tt.counts, err)
			continue
		}
		if !reflect.DeepEqual(o.agents, tt.wantAgents) || !reflect.DeepEqual(o.counts, tt.wantCounts) {
			t.Errorf("parseCompare(%q, %q) = %v %v, want %v %v", tt.agents, tt.counts, o.agents, o.counts, tt.wantAgents, tt.wantCounts)
		}
	}
}

func TestTraceStarts(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	journals := map[string]journal.PodJournal{
		"bench-0": {Entries: []journal.Entry{
			{Time: at(100), Message: "admitted"},
			{Time: at(150), Message: "1 volumes ready"},
			{Time: at(900), Message: "pod sandbox started (attempt 0, IPs [10.88.0.2])"},
			{Time: at(1000), Message: "container created (restart count 0)"},
			{Time: at(1200), Message: "container started"},
			{Time: at(1300), Message: "status written: Pending, 0/1 containers ready"},
			{Time: at(1600), First: at(1400), Count: 2, Message: "status written: Running, 1/1 containers ready"},
		}},
		// A container that failed to start once: the first success counts.
		"bench-1": {Entries: []journal.Entry{
			{Time: at(200), Message: "admitted"},
			{Time: at(1100), Message: "container not started: boom"},
			{Time: at(2000), Message: "container started"},
		}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/debug/pods/ns/"), "/journal")
		pj, ok := journals[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(pj)
	}))
	defer srv.Close()

	times := map[string]podTimes{
		"bench-0": {created: t0, running: at(1800)},
		"bench-1": {created: t0, running: at(2500)},
		"bench-2": {created: t0, running: at(3000)}, // no journal
	}
	got, missing := traceStarts(srv.URL, "ns", times)
	if missing != 1 {
		t.Errorf("missing = %d, want 1", missing)
	}
	ms := func(v ...int) []time.Duration {
		out := []time.Duration{}
		for _, m := range v {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	want := stepTimes{ms(100, 200), ms(150), ms(900), ms(1000), ms(1200, 2000), ms(1400), ms(1800, 2500)}
	for i := range want {
		if len(got[i]) == 0 && len(want[i]) == 0 {
			continue
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("step %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestStatusKiB(t *testing.T) {
	pid := os.Getpid()
	for _, tc := range []struct {
		name    string
		fields  []string
		wantErr bool
	}{
		{"anonymous", []string{"RssAnon:", "RssShmem:"}, false},
		{"file-backed", []string{"RssFile:"}, false},
		{"unknown field", []string{"RssNothing:"}, true},
		{"one known, one unknown", []string{"RssAnon:", "RssNothing:"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kib, err := statusKiB(pid, tc.fields...)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("statusKiB(%v) = %d, want an error", tc.fields, kib)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kib <= 0 {
				t.Errorf("statusKiB(%v) = %d KiB, want > 0 for a running test binary", tc.fields, kib)
			}
		})
	}
	total, err := rssKiB(pid)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := statusKiB(pid, "RssAnon:", "RssShmem:", "RssFile:")
	if err != nil {
		t.Fatal(err)
	}
	// VmRSS is the sum of the three, read a moment apart.
	if d := total - parts; d < -1024 || d > 1024 {
		t.Errorf("VmRSS %d KiB, RssAnon+RssShmem+RssFile %d KiB: more than 1 MiB apart", total, parts)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	tests := []struct {
		name                          string
		stat                          string
		wantBusy, wantAll, wantStolen float64
	}{
		{
			name:     "eight fields and guests",
			stat:     "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n",
			wantBusy: (100 + 5 + 50 + 3 + 2 + 0) * 10, wantAll: (100 + 5 + 50 + 800 + 20 + 3 + 2 + 0) * 10,
		},
		{
			name:     "steal",
			stat:     "cpu  100 5 50 800 20 3 2 40 7 0\n",
			wantBusy: (100 + 5 + 50 + 3 + 2 + 40) * 10, wantAll: (100 + 5 + 50 + 800 + 20 + 3 + 2 + 40) * 10, wantStolen: 400,
		},
		{name: "old kernel, four fields", stat: "cpu 10 0 10 80\n", wantBusy: 200, wantAll: 1000},
		{name: "not the cpu line", stat: "intr 1 2 3 4 5\n"},
		{name: "garbage number", stat: "cpu 1 x 3 4 5\n"},
		{name: "empty", stat: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy, all, stolen := parseProcStatCPU(tt.stat)
			if busy != tt.wantBusy || all != tt.wantAll || stolen != tt.wantStolen {
				t.Errorf("parseProcStatCPU = %v, %v, %v; want %v, %v, %v", busy, all, stolen, tt.wantBusy, tt.wantAll, tt.wantStolen)
			}
		})
	}
}

func TestCallsSince(t *testing.T) {
	before := calls{api: 10, cri: map[string]float64{"list_podsandbox": 4, "run_podsandbox": 0}}
	after := calls{api: 40, cri: map[string]float64{"list_podsandbox": 8, "run_podsandbox": 10, "start_container": 10}}
	api, cri, by := after.since(before, 10)
	if api != 3 || cri != 2.4 {
		t.Errorf("since = %v API, %v CRI per pod; want 3, 2.4", api, cri)
	}
	if got, want := formatMethods(by), "run_podsandbox=1.00 start_container=1.00 list_podsandbox=0.40"; got != want {
		t.Errorf("formatMethods = %q, want %q", got, want)
	}
	if api, cri, _ := after.since(calls{api: -1}, 10); api != -1 || cri != -1 {
		t.Errorf("since an unreadable reading = %v, %v; want -1, -1", api, cri)
	}
	if got := perPod(map[string]float64{"sync": 20}, map[string]float64{"sync": 80, "create": 30}, 30); !maps.Equal(got, map[string]float64{"sync": 2, "create": 1}) {
		t.Errorf("perPod = %v, want sync 2, create 1", got)
	}
	if got := perPod(map[string]float64{}, map[string]float64{"create": 30}, 30); !maps.Equal(got, map[string]float64{"create": 1}) {
		t.Errorf("perPod from no sync yet = %v, want create 1", got)
	}
	if got := perPod(map[string]float64{"create": 30}, nil, 30); got != nil {
		t.Errorf("perPod to an unread page = %v, want nil", got)
	}
}

func TestParseMemStats(t *testing.T) {
	tests := []struct {
		name string
		text string
		want heapReading
	}{
		{"heap profile", "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 100\n# TotalAlloc = 123456789\n# Sys = 5\n# NumGC = 42\n# NumForcedGC = 0\n", heapReading{123456789, 42}},
		{"no MemStats", "heap profile: 0: 0 [0: 0] @ heap/1048576\n", heapReading{-1, -1}},
		{"garbage value", "# TotalAlloc = x\n# NumGC = 7\n", heapReading{-1, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseMemStats(tt.text); got != tt.want {
				t.Errorf("parseMemStats = %+v, want %+v", got, tt.want)
			}
		})
	}
	kib, gcs := heapReading{3 * 1024 * 100, 12}.since(heapReading{1024 * 100, 2}, 100)
	if kib != 2 || gcs != 10 {
		t.Errorf("since = %v KiB, %v GCs; want 2, 10", kib, gcs)
	}
	if kib, gcs := (heapReading{5, 5}).since(heapReading{-1, -1}, 1); kib != -1 || gcs != -1 {
		t.Errorf("since an unread reading = %v, %v; want -1, -1", kib, gcs)
	}
}

func TestCountersOf(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		wantAPI  float64
		wantCRI  map[string]float64
		wantHeap heapReading
		wantSync map[string]float64
	}{
		{"every counter", `# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total 42
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 1.23456789e+08
# TYPE kubelet_runtime_operations_total counter
kubelet_runtime_operations_total{operation_type="run_podsandbox"} 3
kubelet_runtime_operations_total{operation_type="start_container"} 5
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="a",method="GET"} 7
rest_client_requests_total{code="201",host="a",method="POST"} 2
# TYPE kubelet_pod_worker_duration_seconds histogram
kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="+Inf"} 30
kubelet_pod_worker_duration_seconds_sum{operation_type="create"} 1.5
kubelet_pod_worker_duration_seconds_count{operation_type="create"} 30
kubelet_pod_worker_duration_seconds_bucket{operation_type="sync",le="+Inf"} 75
kubelet_pod_worker_duration_seconds_sum{operation_type="sync"} 2
kubelet_pod_worker_duration_seconds_count{operation_type="sync"} 75
`, 9, map[string]float64{"run_podsandbox": 3, "start_container": 5}, heapReading{123456789, 42}, map[string]float64{"create": 30, "sync": 75}},
		{"no Go series", `# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="a",method="GET"} 1
`, 1, nil, heapReading{-1, -1}, map[string]float64{}},
		{"allocation without GC cycles", `# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 10
`, -1, nil, heapReading{10, -1}, map[string]float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			c := countersOf(families)
			if c.api != tt.wantAPI || !maps.Equal(c.cri, tt.wantCRI) || c.heap != tt.wantHeap || !maps.Equal(c.syncs, tt.wantSync) {
				t.Errorf("countersOf = %+v, want api %v cri %v heap %+v syncs %v", c, tt.wantAPI, tt.wantCRI, tt.wantHeap, tt.wantSync)
			}
		})
	}
}

func TestWholeCPUSince(t *testing.T) {
	before := wholeCPU{busy: 1000, total: 4000, stolen: 100, control: 50}
	after := wholeCPU{busy: 3000, total: 8000, stolen: 500, control: 250}
	control, machine, busy, stolen := after.since(before, 10)
	// 2000 ms busy, of which 400 stolen: 1600 ms of work for 10 pods.
	if control != 20 || machine != 160 || busy != 0.5 || stolen != 0.1 {
		t.Errorf("since = control %v, machine %v, busy %v, stolen %v; want 20, 160, 0.5, 0.1", control, machine, busy, stolen)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, -1},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	agents := []string{agentHeartlet, agentKubelet, agentFloor}
	if got := roundOrder(agents, 0); !slices.Equal(got, agents) {
		t.Errorf("round 1 = %v, want %v", got, agents)
	}
	if got, want := roundOrder(agents, 1), []string{agentFloor, agentKubelet, agentHeartlet}; !slices.Equal(got, want) {
		t.Errorf("round 2 = %v, want %v", got, want)
	}
	if !slices.Equal(agents, []string{agentHeartlet, agentKubelet, agentFloor}) {
		t.Errorf("roundOrder changed its input: %v", agents)
	}
}

// The rounds' table has each agent's median and the median of each ratio
// over the rounds with its lowest and highest; an agent missing from a
// round counts in none of its medians.
func TestPrintRounds(t *testing.T) {
	round := func(h, k time.Duration) []*agentResult {
		res := func(name string, all time.Duration) *agentResult {
			return &agentResult{name: name, byN: map[int]*result{30: {n: 30, allRunning: all, p50: -1, p90: -1, p99: -1, allDeleted: -1}}}
		}
		out := []*agentResult{res(agentHeartlet, h)}
		if k > 0 {
			out = append(out, res(agentKubelet, k))
		}
		return out
	}
	rounds := [][]*agentResult{
		round(3*time.Second, 5*time.Second),
		round(4*time.Second, 5*time.Second),
		round(2*time.Second, 4*time.Second),
		round(9*time.Second, 0), // the kubelet failed in this round
	}
	var b strings.Builder
	printRounds(&b, rounds, []int{30})
	var line string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "| 30 pods: all Running |") {
			line = l
		}
	}
	// heartlet: median of 2, 3, 4, 9 = 3.5; kubelet: of 4, 5, 5 = 5.
	// Ratios per round 0.6, 0.8, 0.5: median 0.6.
	if want := "| 30 pods: all Running | 3.50 s | 5.00 s | 0.60 (0.50–0.80) |"; line != want {
		t.Errorf("row\n %q\nwant\n %q\nin\n%s", line, want, b.String())
	}
}

func TestMemoryTotal(t *testing.T) {
	for _, tc := range []struct {
		m    memory
		want float64
	}{
		{memory{anonMiB: 9.5, fileMiB: 10}, 19.5},
		{memory{anonMiB: -1, fileMiB: 10}, -1},
		{memory{anonMiB: 9.5, fileMiB: -1}, -1},
	} {
		if got := tc.m.total(); got != tc.want {
			t.Errorf("%+v: total %v, want %v", tc.m, got, tc.want)
		}
	}
}
