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

	"github.com/heartlet/heartlet/internal/kubeapi"
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

// slowList is a core client whose ConfigMap lists wait for release.
type slowList struct {
	kubeapi.Interface
	release chan struct{}
}

// IsWatchListSemanticsUnSupported says, as the fake clientset, that the
// reflector must list.
func (s slowList) IsWatchListSemanticsUnSupported() bool { return true }

func (s slowList) CoreV1() kubeapi.CoreV1Interface {
	return slowListCore{CoreV1Interface: s.Interface.CoreV1(), release: s.release}
}

type slowListCore struct {
	kubeapi.CoreV1Interface
	release chan struct{}
}

func (s slowListCore) ConfigMaps(ns string) kubeapi.ConfigMapInterface {
	return slowListConfigMaps{ConfigMapInterface: s.CoreV1Interface.ConfigMaps(ns), release: s.release}
}

type slowListConfigMaps struct {
	kubeapi.ConfigMapInterface
	release chan struct{}
}

func (s slowListConfigMaps) List(ctx context.Context, opts metav1.ListOptions) (*v1.ConfigMapList, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.ConfigMapInterface.List(ctx, opts)
}

// The reads of an object whose watch is listing wait for the list (one
// list for a burst of pods sharing the object, not a GET each) for at most
// listWait from the watch's start; after that they read directly.
func TestWatchingGetterWaitsForTheFirstList(t *testing.T) {
	for _, listed := range []bool{true, false} {
		name := map[bool]string{true: "listed in time", false: "list too slow"}[listed]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cs := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm"}, Data: map[string]string{"k": "v1"}})
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			kube := slowList{Interface: kubeapifake.Wrap(cs), release: make(chan struct{})}
			g := NewWatchingGetter(NewClientGetter(kubeapifake.Wrap(cs)), kube, clk, time.Minute)
			// As Run, without its expiry ticker: the clock's only waiters
			// are the reads.
			g.mu.Lock()
			g.ctx = ctx
			g.mu.Unlock()
			defer func() {
				cancel()
				if !listed {
					close(kube.release)
				}
				g.wg.Wait()
			}()

			const readers = 5
			got := make(chan *v1.ConfigMap, readers)
			for range readers {
				go func() {
					cm, err := g.GetConfigMap(ctx, "a", "cm")
					if err != nil {
						t.Error(err)
					}
					got <- cm
				}()
			}
			eventually(t, "a read waiting for the list", clk.HasWaiters)
			if listed {
				close(kube.release)
			}
			for range readers {
				var cm *v1.ConfigMap
			wait:
				for {
					select {
					case cm = <-got:
						break wait
					default:
					}
					if !listed && clk.HasWaiters() {
						clk.Step(listWait)
					}
					runtime.Gosched()
				}
				if cm == nil || cm.Data["k"] != "v1" {
					t.Fatalf("read %v", cm)
				}
			}
			wantGets := map[bool]int{true: 0, false: readers}[listed]
			if n := gets(cs); n != wantGets {
				t.Errorf("%d GETs, want %d", n, wantGets)
			}
			if !listed {
				// Past listWait, a read of the still unlisted watch goes
				// direct at once.
				if _, err := g.GetConfigMap(ctx, "a", "cm"); err != nil {
					t.Fatal(err)
				}
				if n := gets(cs); n != readers+1 {
					t.Errorf("%d GETs after a late read, want %d", n, readers+1)
				}
			}
		})
	}
}
