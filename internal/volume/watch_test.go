package volume

import (
	"context"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// gets counts the GETs of configmaps and secrets the client made.
func gets(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && (a.GetResource().Resource == "configmaps" || a.GetResource().Resource == "secrets") {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or ten seconds passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		runtime.Gosched()
	}
}

func TestWatchingGetter(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cs := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm"}, Data: map[string]string{"k": "v1"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}, Data: map[string][]byte{"k": []byte("s1")}},
	)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := NewWatchingGetter(NewClientGetter(kubeapifake.Wrap(cs)), kubeapifake.Wrap(cs), clk, time.Minute)

	// Before Run: a plain GET, no watch.
	if cm, err := g.GetConfigMap(ctx, "a", "cm"); err != nil || cm.Data["k"] != "v1" {
		t.Fatalf("GetConfigMap before Run = %v, %v", cm, err)
	}
	if n := gets(cs); n != 1 || g.Watched() != 0 {
		t.Fatalf("before Run: %d GETs and %d watches, want 1 and 0", n, g.Watched())
	}

	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	eventually(t, "Run started", func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.ctx != nil })

	// The first reads start the watches; once listed, reads make no GET.
	eventually(t, "configmap served from its watch", func() bool {
		before := gets(cs)
		cm, err := g.GetConfigMap(ctx, "a", "cm")
		return err == nil && cm.Data["k"] == "v1" && gets(cs) == before
	})
	eventually(t, "secret served from its watch", func() bool {
		before := gets(cs)
		s, err := g.GetSecret(ctx, "a", "s")
		return err == nil && string(s.Data["k"]) == "s1" && gets(cs) == before
	})
	if g.Watched() != 2 {
		t.Fatalf("%d objects watched, want 2", g.Watched())
	}

	// A change reaches the reads through the watch.
	if _, err := cs.CoreV1().ConfigMaps("a").Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm"}, Data: map[string]string{"k": "v2"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "updated configmap read", func() bool {
		cm, err := g.GetConfigMap(ctx, "a", "cm")
		return err == nil && cm.Data["k"] == "v2"
	})
	// The copy handed out is the caller's.
	cm, _ := g.GetConfigMap(ctx, "a", "cm")
	cm.Data["k"] = "changed by a caller"
	if again, _ := g.GetConfigMap(ctx, "a", "cm"); again.Data["k"] != "v2" {
		t.Fatalf("a caller changed the watched object: %q", again.Data["k"])
	}

	// A missing object is NotFound once its watch listed, and found once created.
	eventually(t, "missing configmap NotFound from its watch", func() bool {
		before := gets(cs)
		_, err := g.GetConfigMap(ctx, "a", "later")
		return apierrors.IsNotFound(err) && gets(cs) == before
	})
	if g.Watched() != 3 {
		t.Fatalf("%d objects watched, want 3", g.Watched())
	}
	settled := gets(cs)
	if _, err := cs.CoreV1().ConfigMaps("a").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "later"}, Data: map[string]string{"k": "new"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "created configmap read", func() bool {
		cm, err := g.GetConfigMap(ctx, "a", "later")
		return err == nil && cm.Data["k"] == "new"
	})
	if n := gets(cs); n != settled {
		t.Errorf("%d GETs once every watch listed, want none", n-settled)
	}

	// Objects no one read for the idle time are no longer watched.
	clk.Step(30 * time.Second)
	if _, err := g.GetSecret(ctx, "a", "s"); err != nil {
		t.Fatal(err)
	}
	clk.Step(45 * time.Second) // the ticker fires at 1m: cm and later are idle, s is not
	eventually(t, "idle watches stopped", func() bool { return g.Watched() == 1 })

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if g.Watched() != 0 {
		t.Errorf("%d watches left after Run ended", g.Watched())
	}
	// After Run, reads are GETs again.
	before := gets(cs)
	if _, err := g.GetConfigMap(t.Context(), "a", "cm"); err != nil {
		t.Fatal(err)
	}
	if gets(cs) != before+1 {
		t.Errorf("read after Run made %d GETs, want 1", gets(cs)-before)
	}
}

func TestNodeTTL(t *testing.T) {
	node := func(ann map[string]string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: ann}} }
	for _, tc := range []struct {
		name string
		node *v1.Node
		want time.Duration
	}{
		{"no node yet", nil, DefaultNodeTTL},
		{"no annotation", node(nil), DefaultNodeTTL},
		{"annotation", node(map[string]string{NodeTTLAnnotation: "15"}), 15 * time.Second},
		{"zero: no caching", node(map[string]string{NodeTTLAnnotation: "0"}), 0},
		{"not a number", node(map[string]string{NodeTTLAnnotation: "x"}), DefaultNodeTTL},
		{"negative", node(map[string]string{NodeTTLAnnotation: "-3"}), DefaultNodeTTL},
	} {
		if got := nodeTTL(tc.node); got != tc.want {
			t.Errorf("%s: ttl = %s, want %s", tc.name, got, tc.want)
		}
	}
}
