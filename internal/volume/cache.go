package volume

import (
	"context"
	"strconv"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"golang.org/x/sync/singleflight"
)

// DefaultGetterTTL is how long NewCachingGetter serves a ConfigMap or
// Secret it read: content changes reach volumes and environment variables
// this much later at most, in exchange for one read per object and period
// instead of one per pod and sync.
const DefaultGetterTTL = 10 * time.Second

// cachingGetter is a Getter that remembers the ConfigMaps and Secrets it
// read for a TTL, shared by every pod, and makes concurrent reads of the
// same object one call. Failures are not remembered. Tokens are requested
// every time: they are per pod and cached by the token cache.
type cachingGetter struct {
	inner Getter
	clk   clock.PassiveClock
	ttl   func() time.Duration

	flight singleflight.Group
	mu     sync.Mutex
	cached map[string]cachedObject
	// beforeRead, if set, is called by every caller that missed the
	// cache, before it reads or joins a read (tests).
	beforeRead func()
}

// cachedObject is one read object and when it was read.
type cachedObject struct {
	obj  any // *v1.ConfigMap or *v1.Secret, never handed out itself
	read time.Time
}

// NewCachingGetter returns a Getter that reads ConfigMaps and Secrets
// through inner at most once per ttl each (and once for concurrent
// callers), and hands out copies.
func NewCachingGetter(inner Getter, clk clock.PassiveClock, ttl time.Duration) Getter {
	return &cachingGetter{inner: inner, clk: clk, ttl: func() time.Duration { return ttl }, cached: map[string]cachedObject{}}
}

// NodeTTLAnnotation is the annotation on the Node with which the API
// server's TTL controller tells kubelets for how many seconds they may
// cache ConfigMaps and Secrets (the Cache change detection strategy).
const NodeTTLAnnotation = "node.alpha.kubernetes.io/ttl"

// DefaultNodeTTL is that cache's TTL when the node has no (valid)
// annotation, as upstream's.
const DefaultNodeTTL = time.Minute

// NewNodeTTLGetter is NewCachingGetter with the TTL the node's
// NodeTTLAnnotation gives when read (DefaultNodeTTL without it), as
// upstream's Cache strategy: node returns the current Node, nil when not
// known yet.
func NewNodeTTLGetter(inner Getter, clk clock.PassiveClock, node func() *v1.Node) Getter {
	return &cachingGetter{inner: inner, clk: clk, ttl: func() time.Duration { return nodeTTL(node()) }, cached: map[string]cachedObject{}}
}

// nodeTTL is the TTL the node's annotation gives.
func nodeTTL(n *v1.Node) time.Duration {
	if n == nil {
		return DefaultNodeTTL
	}
	v, ok := n.Annotations[NodeTTLAnnotation]
	if !ok {
		return DefaultNodeTTL
	}
	secs, err := strconv.Atoi(v)
	if err != nil || secs < 0 {
		return DefaultNodeTTL
	}
	return time.Duration(secs) * time.Second
}

// GetConfigMap implements Getter.
func (g *cachingGetter) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := g.get(ctx, kindConfigMap+"/"+namespace+"/"+name, func() (any, error) {
		cm, err := g.inner.GetConfigMap(ctx, namespace, name)
		if cm == nil && err == nil {
			err = ErrMissingObject
		}
		return cm, err
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap).DeepCopy(), nil
}

// GetSecret implements Getter.
func (g *cachingGetter) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := g.get(ctx, kindSecret+"/"+namespace+"/"+name, func() (any, error) {
		s, err := g.inner.GetSecret(ctx, namespace, name)
		if s == nil && err == nil {
			err = ErrMissingObject
		}
		return s, err
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret).DeepCopy(), nil
}

// RequestToken implements Getter.
func (g *cachingGetter) RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return g.inner.RequestToken(ctx, namespace, serviceAccount, req)
}

// get returns the object under key, read with read when it is not cached
// or older than the TTL.
func (g *cachingGetter) get(ctx context.Context, key string, read func() (any, error)) (any, error) {
	if obj, ok := g.fresh(key); ok {
		return obj, nil
	}
	if g.beforeRead != nil {
		g.beforeRead()
	}
	obj, err, _ := g.flight.Do(key, func() (any, error) {
		// A caller that missed the cache just before another call
		// filled it finds it here.
		if obj, ok := g.fresh(key); ok {
			return obj, nil
		}
		read0 := g.clk.Now()
		obj, err := read()
		g.mu.Lock()
		defer g.mu.Unlock()
		if err != nil {
			delete(g.cached, key)
			return nil, err
		}
		g.cached[key] = cachedObject{obj: obj, read: read0}
		g.evictLocked(read0)
		return obj, nil
	})
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// fresh returns the cached object under key if it is younger than the TTL.
func (g *cachingGetter) fresh(key string) (any, bool) {
	now := g.clk.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cached[key]
	if !ok || now.Sub(c.read) >= g.ttl() {
		return nil, false
	}
	return c.obj, true
}

// evictLocked drops the entries older than the TTL, so objects no pod
// reads any more do not stay. Callers hold g.mu.
func (g *cachingGetter) evictLocked(now time.Time) {
	ttl := g.ttl()
	for k, c := range g.cached {
		if now.Sub(c.read) >= ttl {
			delete(g.cached, k)
		}
	}
}
