package volume

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// countingGetter counts reads per kind and can hold them until release
// is closed.
type countingGetter struct {
	mu       sync.Mutex
	cms      int
	secrets  int
	tokens   int
	fail     error
	release  chan struct{} // nil: answer at once
	entered  chan struct{} // receives once per read, when set
	cmData   string
	secretID string
}

func (g *countingGetter) wait() {
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	if g.release != nil {
		<-g.release
	}
}

func (g *countingGetter) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	g.wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cms++
	if g.fail != nil {
		return nil, g.fail
	}
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": g.cmData}}, nil
}

func (g *countingGetter) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.secrets++
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "s-1"}, Data: map[string][]byte{"k": []byte(g.secretID)}}, nil
}

func (g *countingGetter) RequestToken(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tokens++
	return &authenticationv1.TokenRequest{}, nil
}

func (g *countingGetter) counts() (int, int, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cms, g.secrets, g.tokens
}

func TestCachingGetterReadsOncePerTTL(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &countingGetter{cmData: "v1", secretID: "s1"}
	g := NewCachingGetter(inner, clk, DefaultGetterTTL)

	steps := []struct {
		name                     string
		advance                  time.Duration
		read                     func() error
		wantCMs, wantSec, wantTk int
	}{
		{"first read", 0, func() error { _, err := g.GetConfigMap(ctx, "a", "cm"); return err }, 1, 0, 0},
		{"again within the TTL", DefaultGetterTTL - time.Second, func() error { _, err := g.GetConfigMap(ctx, "a", "cm"); return err }, 1, 0, 0},
		{"another namespace is another object", 0, func() error { _, err := g.GetConfigMap(ctx, "b", "cm"); return err }, 2, 0, 0},
		{"a Secret of the same name is another object", 0, func() error { _, err := g.GetSecret(ctx, "a", "cm"); return err }, 2, 1, 0},
		{"after the TTL it is read again", time.Second, func() error { _, err := g.GetConfigMap(ctx, "a", "cm"); return err }, 3, 1, 0},
		{"tokens are never cached", 0, func() error { _, err := g.RequestToken(ctx, "a", "sa", nil); return err }, 3, 1, 1},
		{"tokens are never cached, twice", 0, func() error { _, err := g.RequestToken(ctx, "a", "sa", nil); return err }, 3, 1, 2},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if err := s.read(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if cms, secs, tks := inner.counts(); cms != s.wantCMs || secs != s.wantSec || tks != s.wantTk {
			t.Fatalf("%s: reads = %d ConfigMaps, %d Secrets, %d tokens; want %d, %d, %d", s.name, cms, secs, tks, s.wantCMs, s.wantSec, s.wantTk)
		}
	}

	// Callers get copies: changing one changes nothing cached.
	cm, _ := g.GetConfigMap(ctx, "a", "cm")
	cm.Data["k"] = "changed"
	if again, _ := g.GetConfigMap(ctx, "a", "cm"); again.Data["k"] != "v1" {
		t.Errorf("cached ConfigMap changed through a copy: %q", again.Data["k"])
	}
}

func TestCachingGetterRemembersNoFailure(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &countingGetter{fail: errors.New("boom")}
	g := NewCachingGetter(inner, clk, DefaultGetterTTL)
	for range 2 {
		if _, err := g.GetConfigMap(ctx, "a", "cm"); err == nil {
			t.Fatal("GetConfigMap succeeded, want the inner error")
		}
	}
	inner.mu.Lock()
	inner.fail = nil
	inner.mu.Unlock()
	if _, err := g.GetConfigMap(ctx, "a", "cm"); err != nil {
		t.Fatalf("GetConfigMap after the failure: %v", err)
	}
	if cms, _, _ := inner.counts(); cms != 3 {
		t.Errorf("reads = %d, want 3 (failures are read again)", cms)
	}
}

// Pods starting together read a shared ConfigMap with one call.
func TestCachingGetterCollapsesConcurrentReads(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	inner := &countingGetter{cmData: "v1", release: make(chan struct{}), entered: make(chan struct{}, 100)}
	g := NewCachingGetter(inner, clk, DefaultGetterTTL).(*cachingGetter)
	const n = 20
	missed := make(chan struct{}, n)
	g.beforeRead = func() { missed <- struct{}{} }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cm, err := g.GetConfigMap(ctx, "a", "kube-root-ca.crt")
			if err == nil && cm.Data["k"] != "v1" {
				err = errors.New("wrong content")
			}
			errs <- err
		}()
	}
	<-inner.entered // one read is in flight
	for range n {   // every caller missed the cache and joins it, or finds it filled
		<-missed
	}
	close(inner.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if cms, _, _ := inner.counts(); cms != 1 {
		t.Errorf("reads = %d for %d concurrent callers, want 1", cms, n)
	}
}
