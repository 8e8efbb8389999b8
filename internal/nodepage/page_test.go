package nodepage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/heartlet/heartlet/internal/journal"
)

var t0 = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

// fakeStats returns summaries with the given usage and tells every call.
type fakeStats struct {
	mu    sync.Mutex
	pods  map[string]uint64 // uid -> nanocores (memory is 1 MiB per 1m)
	err   error
	calls chan struct{}
}

func (f *fakeStats) Summary(context.Context, bool) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if f.calls != nil {
			f.calls <- struct{}{}
		}
	}()
	if f.err != nil {
		return nil, f.err
	}
	s := &statsapi.Summary{}
	var total uint64
	for uid, n := range f.pods {
		total += n
		s.Pods = append(s.Pods, statsapi.PodStats{PodRef: statsapi.PodReference{UID: uid},
			CPU: &statsapi.CPUStats{UsageNanoCores: ptr.To(n)}, Memory: &statsapi.MemoryStats{WorkingSetBytes: ptr.To(n / 1_000_000 << 20)}})
	}
	s.Node.CPU = &statsapi.CPUStats{UsageNanoCores: ptr.To(total)}
	s.Node.Memory = &statsapi.MemoryStats{WorkingSetBytes: ptr.To(total / 1_000_000 << 20)}
	return s, nil
}

func webPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "proxy", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}},
			Containers: []v1.Container{
				{Name: "app", ReadinessProbe: &v1.Probe{}, LivenessProbe: &v1.Probe{},
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("64Mi")}}},
				{Name: "crashy"},
			},
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			InitContainerStatuses: []v1.ContainerStatus{{Name: "proxy", Ready: true, Started: ptr.To(true),
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-time.Hour))}}}},
			ContainerStatuses: []v1.ContainerStatus{
				{Name: "app", Ready: true, Started: ptr.To(true), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-90 * time.Second))}}},
				{Name: "crashy", RestartCount: 4, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}}},
			},
		},
	}
}

func newTestPage(pods []*v1.Pod, j *journal.Journal, stats SummaryProvider, events ...*v1.Event) (*Page, *testclock.FakeClock) {
	clk := testclock.NewFakeClock(t0)
	evlog := NewEventLog(8, testclock.NewFakePassiveClock(t0.Add(-20*time.Second)))
	for _, e := range events {
		evlog.Record(e)
	}
	node := &v1.Node{Status: v1.NodeStatus{
		Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue, Reason: "KubeletHasInsufficientMemory"},
		},
		Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourcePods: resource.MustParse("110")},
	}}
	p := New(Options{
		NodeName: "node-a",
		Node:     func() *v1.Node { return node },
		Pods:     func() []*v1.Pod { return pods },
		Journal:  j.Latest,
		Events:   evlog.Latest,
		Stats:    stats,
		Health: func() []Check {
			return []Check{{Name: "PLEG relist", Value: "healthy, mean relist 12ms", OK: true}, {Name: "pod workers", Value: "1", OK: true}}
		},
		Clock: clk,
	})
	return p, clk
}

func get(t *testing.T, p *Page, path string) (*http.Response, string) {
	t.Helper()
	mux := http.NewServeMux()
	for pattern, h := range p.Handlers() {
		mux.Handle(pattern, h)
	}
	ts := httptest.NewServer(mux)
	defer ts.Close()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestPageContent(t *testing.T) {
	j := journal.New(8, testclock.NewFakePassiveClock(t0.Add(-time.Minute)))
	j.Record("uid-web", journal.Entry{Kind: journal.KindAdmission, Message: "admitted"})
	j.Record("uid-web", journal.Entry{Time: t0.Add(-10 * time.Second), Kind: journal.KindBackoff, Container: "crashy", Message: "back-off restarting failed container", NextRetry: t0.Add(30 * time.Second)})
	p, _ := newTestPage([]*v1.Pod{webPod()}, j, &fakeStats{pods: map[string]uint64{"uid-web": 120_000_000}},
		podEvent(v1.EventTypeNormal, "Pulled", `Container image "busybox" already present on machine`),
		podEvent(v1.EventTypeWarning, "BackOff", "Back-off restarting failed container crashy"),
		podEvent(v1.EventTypeWarning, "BackOff", "Back-off restarting failed container crashy"))
	p.Sample(t.Context())
	p.Sample(t.Context())

	resp, page := get(t, p, "/node")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /node: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		"<title>heartlet: node-a</title>",
		`<td>Ready</td><td class="ok">True</td><td>KubeletReady</td>`,
		`<td>MemoryPressure</td><td class="bad">True</td>`,
		`<tr><td>cpu</td><td>2</td><td>250m</td><td>120m</td></tr>`,
		`<tr><td>memory</td><td>4.0 GiB</td><td>64.0 MiB</td><td>120.0 MiB</td></tr>`,
		`<tr><td>pods</td><td>110</td><td>1</td><td>1</td></tr>`,
		`data-pod="default/web"`,
		`<tr data-container="proxy"><td>proxy <span class="muted">(sidecar)</span></td><td class="ok">running <span class="muted">since -1h0m0s</span>`,
		`<tr data-container="app"><td>app</td><td class="ok">running <span class="muted">since -1m30s</span></td><td>0</td><td class="ok">true</td><td>true</td><td>liveness, readiness</td>`,
		`<tr data-container="crashy"><td>crashy</td><td class="bad">waiting <span class="muted">CrashLoopBackOff back-off 40s</span></td><td>4</td><td class="bad">false</td><td></td><td>none</td>`,
		`<td>-1m0s</td><td>admission</td><td>admitted</td>`,
		`<td>-10s</td><td>backoff</td><td>[crashy] back-off restarting failed container; next retry in 30s</td>`,
		`<td>-10s</td><td>default/web</td><td>backoff</td>`,
		`<td>PLEG relist</td><td class="ok">healthy, mean relist 12ms</td>`,
		`<polyline points="0.0,1.0 120.0,1.0"/></svg> 120m`,
		`<tr><td>-20s</td><td class="bad">Warning</td><td>Pod default/web</td><td>BackOff</td><td>Back-off restarting failed container crashy</td><td>2</td></tr>`,
		`<td class="ok">Normal</td><td>Pod default/web</td><td>Pulled</td><td>Container image &#34;busybox&#34; already present on machine</td><td>1</td>`,
		"fetch(\"node/body\"",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Events are newest first too.
	if strings.Index(page, "<td>BackOff</td>") > strings.Index(page, "<td>Pulled</td>") {
		t.Error("events are not newest first")
	}
	// The latest decisions are newest first.
	if strings.Index(page, `<td>default/web</td><td>backoff</td>`) > strings.Index(page, `<td>default/web</td><td>admission</td>`) {
		t.Error("latest decisions are not newest first")
	}

	resp, body := get(t, p, "/node/body")
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "<html") || strings.Contains(body, "<script") || !strings.Contains(body, `data-pod="default/web"`) {
		t.Errorf("GET /node/body: %s\n%s\nwant the body alone", resp.Status, body)
	}
}

func TestPageWithoutInputs(t *testing.T) {
	p := New(Options{NodeName: "solo", Clock: testclock.NewFakeClock(t0)})
	_, page := get(t, p, "/node")
	for _, want := range []string{"No node conditions (standalone mode", "<td>cpu</td><td>unknown</td><td>0m</td><td>no samples yet</td>", "No pods.", "None yet.", "No events (standalone mode"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// An attacker names a pod, its namespace, its containers and the messages
// in its status and journal: none of it may become markup or script.
func TestPageEscapesPodData(t *testing.T) {
	const evil = `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	pod := webPod()
	pod.Name = "web" + evil
	pod.Namespace = "ns" + evil
	pod.UID = types.UID("uid" + evil)
	pod.Spec.Containers[0].Name = "app" + evil
	pod.Status.ContainerStatuses[0].Name = "app" + evil
	pod.Status.Reason = "Evicted" + evil
	pod.Status.Message = "</style><svg onload=alert(3)>"
	j := journal.New(8, testclock.NewFakePassiveClock(t0))
	j.Record(pod.UID, journal.Entry{Kind: journal.KindImage, Container: "app" + evil, Message: "pull of \"x\" failed: " + evil, Reason: "javascript:alert(4)"})
	ev := podEvent(v1.EventTypeWarning, "Failed"+evil, "Error: "+evil)
	ev.InvolvedObject.Name = pod.Name
	p, _ := newTestPage([]*v1.Pod{pod}, j, &fakeStats{pods: map[string]uint64{string(pod.UID): 1}}, ev)
	p.Sample(t.Context())

	for _, path := range []string{"/node", "/node/body"} {
		resp, page := get(t, p, path)
		checkMarkup(t, path, page)
		for _, bad := range []string{"<script>alert", "</style><svg", "javascript:alert(4)\""} {
			if strings.Contains(page, bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		if n := strings.Count(page, "<script"); (path == "/node" && n != 1) || (path == "/node/body" && n != 0) {
			t.Errorf("%s has %d script elements", path, n)
		}
		if !strings.Contains(page, "web&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the pod's name escaped", path)
		}
		if !strings.Contains(page, "<td>Error: &#34;&gt;&lt;script&gt;alert(1)") {
			t.Errorf("%s does not show the event's message escaped", path)
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'nonce-") {
			t.Errorf("%s: Content-Security-Policy %q, want no source but the page's nonce", path, csp)
		}
		if path == "/node" {
			m := regexp.MustCompile(`<script nonce="([^"]+)">`).FindStringSubmatch(page)
			if m == nil || !strings.Contains(csp, "'nonce-"+m[1]+"'") {
				t.Errorf("the page's script nonce %v is not the policy's %q", m, csp)
			}
		}
	}
	// Every request has its own nonce.
	r1, _ := get(t, p, "/node")
	r2, _ := get(t, p, "/node")
	if r1.Header.Get("Content-Security-Policy") == r2.Header.Get("Content-Security-Policy") {
		t.Error("two requests got the same nonce")
	}
}

// Run samples at once and then every SampleEvery, keeps at most Samples,
// drops pods that are gone, and survives a failed sample.
func TestRunSamples(t *testing.T) {
	stats := &fakeStats{pods: map[string]uint64{"a": 10_000_000, "b": 20_000_000}, calls: make(chan struct{})}
	clk := testclock.NewFakeClock(t0)
	p := New(Options{Stats: stats, Clock: clk, SampleEvery: 10 * time.Second, Samples: 3})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	<-stats.calls // the first sample, at once
	for i := range 4 {
		stats.mu.Lock()
		stats.pods["a"] = uint64(i+2) * 10_000_000
		if i == 2 {
			delete(stats.pods, "b")
		}
		if i == 3 {
			stats.err = errors.New("runtime down")
		}
		stats.mu.Unlock()
		for !clk.HasWaiters() {
			// Run is between its sample and its wait; it waits next.
			select {
			case <-ctx.Done():
				t.Fatal("cancelled")
			default:
			}
		}
		clk.Step(10 * time.Second)
		<-stats.calls
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	// Samples of a: 10m, 20m, 30m, 40m, then a failure: the last three.
	got := p.samples.podSeries("a")
	if len(got) != 3 || got[0].cpuNanoCores != 20_000_000 || got[2].cpuNanoCores != 40_000_000 {
		t.Errorf("samples of a = %+v, want 20m, 30m, 40m", got)
	}
	if p.samples.podSeries("b") != nil {
		t.Error("samples of b kept after it left the summary")
	}
	if n := len(p.samples.nodeSeries()); n != 3 {
		t.Errorf("node samples = %d, want 3", n)
	}
}

// checkMarkup parses page as a browser would and fails on any element or
// attribute the page does not write itself, and on script anywhere but in
// the page's own script element.
func checkMarkup(t *testing.T, path, page string) {
	t.Helper()
	elements := map[string]bool{"html": true, "head": true, "meta": true, "title": true, "style": true, "body": true, "h1": true, "h2": true, "h3": true,
		"p": true, "main": true, "script": true, "table": true, "tr": true, "th": true, "td": true, "span": true, "section": true, "svg": true, "polyline": true}
	attrs := map[string]bool{"lang": true, "charset": true, "name": true, "content": true, "id": true, "class": true, "nonce": true, "data-now": true,
		"data-pod": true, "data-container": true, "width": true, "height": true, "viewbox": true, "role": true, "aria-label": true, "points": true}
	z := html.NewTokenizer(strings.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("%s: %v", path, z.Err())
			}
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !elements[tok.Data] {
				t.Errorf("%s has an element <%s>", path, tok.Data)
			}
			for _, a := range tok.Attr {
				if !attrs[strings.ToLower(a.Key)] {
					t.Errorf("%s: <%s> has an attribute %s=%q", path, tok.Data, a.Key, a.Val)
				}
			}
		}
	}
}

func TestSparkline(t *testing.T) {
	tests := []struct {
		values []float64
		want   string
	}{
		{nil, ""},
		{[]float64{5}, "0.0,1.0"},
		{[]float64{0, 0}, "0.0,23.0 120.0,23.0"},
		{[]float64{0, 5, 10}, "0.0,23.0 60.0,12.0 120.0,1.0"},
	}
	for _, tt := range tests {
		if got := newSparkline(tt.values, "").Points; got != tt.want {
			t.Errorf("points of %v = %q, want %q", tt.values, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{formatBytes(0), "0 B"},
		{formatBytes(1023), "1023 B"},
		{formatBytes(1536), "1.5 KiB"},
		{formatBytes(64 << 20), "64.0 MiB"},
		{formatBytes(3 << 30), "3.0 GiB"},
		{formatCores(1_500_000), "1m"},
		{formatCores(2_000_000_000), "2000m"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func podEvent(typ, reason, message string) *v1.Event {
	return &v1.Event{
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Type:           typ, Reason: reason, Message: message,
	}
}

func TestEventLog(t *testing.T) {
	ev := func(name, reason string) *v1.Event {
		return &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name}, Type: v1.EventTypeNormal, Reason: reason, Message: "m"}
	}
	node := &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Node", Name: "n1"}, Type: v1.EventTypeWarning, Reason: "EvictionThresholdMet", Message: "Attempting to reclaim memory"}
	type want struct {
		object, reason string
		count          int
	}
	for _, tc := range []struct {
		name   string
		size   int
		events []*v1.Event
		n      int
		want   []want
	}{
		{name: "empty", size: 4, n: 10},
		{name: "newest first", size: 4, events: []*v1.Event{ev("a", "Pulled"), ev("a", "Created"), node}, n: 10,
			want: []want{{"Node n1", "EvictionThresholdMet", 1}, {"Pod ns/a", "Created", 1}, {"Pod ns/a", "Pulled", 1}}},
		{name: "a repeat of the newest folds", size: 4, events: []*v1.Event{ev("a", "BackOff"), ev("a", "BackOff"), ev("a", "BackOff")}, n: 10,
			want: []want{{"Pod ns/a", "BackOff", 3}}},
		{name: "a repeat of an older one does not", size: 4, events: []*v1.Event{ev("a", "BackOff"), ev("b", "BackOff"), ev("a", "BackOff")}, n: 10,
			want: []want{{"Pod ns/a", "BackOff", 1}, {"Pod ns/b", "BackOff", 1}, {"Pod ns/a", "BackOff", 1}}},
		{name: "bounded: the oldest go", size: 3, events: []*v1.Event{ev("a", "1"), ev("a", "2"), ev("a", "3"), ev("a", "4"), ev("a", "5")}, n: 10,
			want: []want{{"Pod ns/a", "5", 1}, {"Pod ns/a", "4", 1}, {"Pod ns/a", "3", 1}}},
		{name: "folding in a full ring", size: 2, events: []*v1.Event{ev("a", "1"), ev("a", "2"), ev("a", "3"), ev("a", "3")}, n: 10,
			want: []want{{"Pod ns/a", "3", 2}, {"Pod ns/a", "2", 1}}},
		{name: "n limits", size: 4, events: []*v1.Event{ev("a", "1"), ev("a", "2"), ev("a", "3")}, n: 2,
			want: []want{{"Pod ns/a", "3", 1}, {"Pod ns/a", "2", 1}}},
		{name: "nil is ignored", size: 4, events: []*v1.Event{nil, ev("a", "1"), nil}, n: 10,
			want: []want{{"Pod ns/a", "1", 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewEventLog(tc.size, testclock.NewFakePassiveClock(t0))
			for _, e := range tc.events {
				l.Record(e)
			}
			got := l.Latest(tc.n)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tc.want))
			}
			for i, w := range tc.want {
				if got[i].Object != w.object || got[i].Reason != w.reason || got[i].Count != w.count || !got[i].Time.Equal(t0) {
					t.Errorf("event %d: %+v, want %+v at %s", i, got[i], w, t0)
				}
			}
		})
	}
}
