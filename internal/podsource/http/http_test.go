package http

import (
	"context"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podsource/manifest"
)

const node = "node-1"

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

// server serves whatever body and status the test sets, and records the
// headers of the last request.
type server struct {
	mu     sync.Mutex
	status int
	body   string
	header nethttp.Header
	hits   int
	srv    *httptest.Server
	client *nethttp.Client
}

func newServer(t *testing.T) *server {
	s := &server{status: nethttp.StatusOK}
	s.srv = httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.header, s.hits = r.Header.Clone(), s.hits+1
		w.WriteHeader(s.status)
		_, _ = w.Write([]byte(s.body))
	}))
	tr := &nethttp.Transport{}
	s.client = &nethttp.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		s.srv.Close()
	})
	return s
}

func (s *server) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

// sink records deliveries and signals each on notify.
type sink struct {
	mu     sync.Mutex
	sets   [][]*v1.Pod
	notify chan struct{}
}

func (k *sink) put(pods []*v1.Pod) {
	k.mu.Lock()
	k.sets = append(k.sets, pods)
	k.mu.Unlock()
	select {
	case k.notify <- struct{}{}:
	default:
	}
}

func (k *sink) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.sets)
}

func (k *sink) latest() []*v1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.sets) == 0 {
		return nil
	}
	return k.sets[len(k.sets)-1]
}

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

func newSource(t *testing.T, srv *server, header map[string][]string) (*Source, *sink, *clocktesting.FakeClock) {
	t.Helper()
	k := &sink{notify: make(chan struct{}, 1)}
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := New(Config{URL: srv.srv.URL + "/pods", Header: header, NodeName: node, Period: 20 * time.Second, Sink: k.put, Client: srv.client, Clock: fc})
	return s, k, fc
}

func TestPoll(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := newServer(t)
	srv.set(nethttp.StatusServiceUnavailable, "")
	s, k, _ := newSource(t, srv, map[string][]string{"Authorization": {"Bearer t0k3n"}, "X-Two": {"a", "b"}})

	// Never answered: nothing delivered, so the source's pods are not
	// taken as gone.
	s.poll(ctx)
	if k.count() != 0 || s.Err() == nil || !strings.Contains(s.Err().Error(), "503") {
		t.Fatalf("after a 503: %d deliveries, err %v", k.count(), s.Err())
	}
	if got := srv.header.Get("Authorization"); got != "Bearer t0k3n" || strings.Join(srv.header.Values("X-Two"), ",") != "a,b" {
		t.Errorf("headers sent: %v", srv.header)
	}

	// A pod: delivered with the static identity of the URL source.
	srv.set(nethttp.StatusOK, podYAML("web", "nginx:1"))
	s.poll(ctx)
	if s.Err() != nil || names(k.latest()) != "web-node-1" {
		t.Fatalf("pods %q, err %v", names(k.latest()), s.Err())
	}
	first := k.latest()[0]
	want, err := manifest.Parse([]byte(podYAML("web", "nginx:1")), manifest.Options{NodeName: node, Origin: srv.srv.URL + "/pods", Source: podconfig.SourceHTTP})
	if err != nil {
		t.Fatal(err)
	}
	if first.UID != want.UID || first.Annotations[podconfig.AnnotationConfigSource] != "http" || first.Annotations[podconfig.AnnotationConfigSeen] == "" {
		t.Errorf("UID %s (want %s), annotations %v", first.UID, want.UID, first.Annotations)
	}

	// The same body: nothing new.
	n := k.count()
	s.poll(ctx)
	if k.count() != n {
		t.Errorf("an unchanged body was delivered again")
	}

	// Failures keep the pods.
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{nethttp.StatusNotFound, "", "404"},
		{nethttp.StatusOK, "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c}]}\n", "spec.containers[0].image: Required value"},
		{nethttp.StatusOK, "{not json", "invalid"},
		{nethttp.StatusOK, strings.Repeat("#", maxBodySize+1), "larger than 10 MiB"},
	} {
		srv.set(tc.status, tc.body)
		s.poll(ctx)
		if s.Err() == nil || !strings.Contains(s.Err().Error(), tc.want) {
			t.Errorf("status %d: err %v, want it to contain %q", tc.status, s.Err(), tc.want)
		}
		if k.count() != n || names(k.latest()) != "web-node-1" {
			t.Errorf("status %d: pods %q after %d deliveries, want web-node-1 kept", tc.status, names(k.latest()), k.count())
		}
	}

	// Recovery with the same pod: its first-seen time is kept.
	srv.set(nethttp.StatusOK, podYAML("web", "nginx:1"))
	s.poll(ctx)
	if s.Err() != nil || names(k.latest()) != "web-node-1" || k.latest()[0].Annotations[podconfig.AnnotationConfigSeen] != first.Annotations[podconfig.AnnotationConfigSeen] {
		t.Errorf("after recovery: pods %q err %v", names(k.latest()), s.Err())
	}

	// A PodList replaces the set.
	srv.set(nethttp.StatusOK, `{"apiVersion":"v1","kind":"PodList","items":[`+
		`{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},`+
		`{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`)
	s.poll(ctx)
	if s.Err() != nil || names(k.latest()) != "a-node-1,b-node-1" {
		t.Errorf("list: pods %q err %v", names(k.latest()), s.Err())
	}

	// An empty body empties the set, as upstream, and is reported.
	srv.set(nethttp.StatusOK, "")
	s.poll(ctx)
	if len(k.latest()) != 0 || s.Err() == nil {
		t.Errorf("empty body: pods %q err %v", names(k.latest()), s.Err())
	}
}

// TestRun checks the polling period and the end with the context.
func TestRun(t *testing.T) {
	_, tctx := ktesting.NewTestContext(t)
	srv := newServer(t)
	srv.set(nethttp.StatusOK, podYAML("web", "nginx:1"))
	s, k, fc := newSource(t, srv, nil)
	ctx, cancel := context.WithCancel(tctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	// waitDelivery waits for the sink to have n deliveries.
	waitDelivery := func(n int) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for k.count() < n {
			select {
			case <-k.notify:
			case <-deadline:
				t.Fatalf("timed out waiting for delivery %d", n)
			}
		}
	}
	waitDelivery(1)
	srv.set(nethttp.StatusOK, podYAML("web", "nginx:2"))
	for !fc.HasWaiters() {
		runtime.Gosched()
	}
	fc.Step(19 * time.Second)
	if k.count() != 1 {
		t.Fatal("read again before the period")
	}
	fc.Step(time.Second)
	waitDelivery(2)
	if img := k.latest()[0].Spec.Containers[0].Image; img != "nginx:2" {
		t.Errorf("image %s after the change", img)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestRunRejectsBadURL(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	err := New(Config{URL: "http://[::1", NodeName: node}).Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "static pod URL") {
		t.Fatalf("Run error %v", err)
	}
}
