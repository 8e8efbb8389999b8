package kubeclient

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestLoadEventClientLimits checks that eventRecordQPS and eventBurst set
// the event client's own rate limit, 0 meaning none, and leave the main
// client's alone.
func TestLoadEventClientLimits(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	srv := startTLS(t, ca, &fakeAPI{}, "")
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, srv.URL, ca.certPEM, certUser(t, dir, ca, "system:node:n"))

	tests := []struct {
		name      string
		qps       int32
		burst     int32
		wantQPS   float32
		unlimited bool
	}{
		{name: "defaults 50/100", qps: 50, burst: 100, wantQPS: 50},
		{name: "1/7", qps: 1, burst: 7, wantQPS: 1},
		{name: "0 is no limit", qps: 0, burst: 100, unlimited: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(context.Background(), Options{Kubeconfig: path, QPS: 20, Burst: 30, EventQPS: tc.qps, EventBurst: tc.burst})
			if err != nil {
				t.Fatal(err)
			}
			rl := c.Events.CoreV1().RESTClient().GetRateLimiter()
			switch {
			case tc.unlimited && rl != nil:
				t.Errorf("event client rate limiter at %v QPS, want none", rl.QPS())
			case !tc.unlimited && (rl == nil || rl.QPS() != tc.wantQPS):
				t.Errorf("event client rate limiter %v, want %v QPS", rl, tc.wantQPS)
			}
			if tc.wantQPS == 1 {
				// A fresh bucket holds exactly the burst (at 1 QPS no
				// token comes back while the loop runs).
				n := 0
				for rl.TryAccept() && n < 1000 {
					n++
				}
				if n != int(tc.burst) {
					t.Errorf("event client burst = %d, want %d", n, tc.burst)
				}
			}
			if got := c.Kube.CoreV1().RESTClient().GetRateLimiter().QPS(); got != 20 {
				t.Errorf("main client QPS = %v, want 20 (kubeAPIQPS)", got)
			}
		})
	}
}

// TestEventRecorderRateLimited records more events than the burst on an
// event client from Load and checks that the API server receives them no
// faster than eventRecordQPS allows.
func TestEventRecorderRateLimited(t *testing.T) {
	posted := make(chan time.Time, 10)
	api := &fakeAPI{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
			posted <- time.Now()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"e","namespace":"team"}}`))
			return
		}
		api.ServeHTTP(w, r)
	})
	ca := newTestCA(t, "cluster-ca")
	srv := startTLS(t, ca, h, "")
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, srv.URL, ca.certPEM, certUser(t, dir, ca, "system:node:n"))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Load(ctx, Options{Kubeconfig: path, EventQPS: 1, EventBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec, shutdown := NewEventRecorder(ctx, c.Events, "n")
	defer shutdown()
	const events = 3
	for i := range events {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+i)), Namespace: "team", UID: types.UID("uid-" + string(rune('a'+i)))}}
		rec.Eventf(pod, v1.EventTypeNormal, Pulled, "event %d", i)
	}
	var last time.Time
	for i := range events {
		select {
		case last = <-posted:
		case <-ctx.Done():
			t.Fatalf("%d of %d events reached the API server", i, events)
		}
	}
	// A bucket of one token refilled at 1/s lets the third event out no
	// sooner than 2 s after it was made.
	if d := last.Sub(start); d < 1900*time.Millisecond {
		t.Errorf("%d events reached the API server within %v; at 1 QPS with burst 1 that takes at least 2s", events, d)
	}
}
