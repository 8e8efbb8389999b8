package volume

import (
	"context"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/apiwait"
	"github.com/heartlet/heartlet/internal/kubeapi"
)

// listWait is how long a read of an object whose watch has not listed yet
// waits for that list before it reads the object directly (upstream's
// watch-based manager waits as long): the pods of a burst that share an
// object (every pod's kube-root-ca.crt) then cost one list, not one GET
// each.
const listWait = time.Second

// DefaultWatchIdle is how long NewWatchingGetter keeps watching an object
// no one read: longer than the volumes' refresh period, so an object a
// running pod uses stays watched.
const DefaultWatchIdle = 5 * time.Minute

// WatchingGetter is a Getter that serves ConfigMaps and Secrets from one
// watch per object (a list and watch of that one name, as upstream's Watch
// change detection strategy, which the node authorizer allows for the
// objects of the node's pods), started by the first read of the object
// and stopped once no one read it for the idle time. A read before the
// watch has listed the object waits up to listWait for the list, then is a
// GET through inner. Tokens are requested through inner every time.
type WatchingGetter struct {
	inner Getter
	core  kubeapi.CoreV1Interface
	// client is the clientset core is of: a fake one says it cannot
	// stream a list as a watch.
	client any
	clk    clock.WithTicker
	idle   time.Duration
	// wait, if set, is what a failed list or watch waits on.
	wait apiwait.WaitFunc

	mu sync.Mutex
	// ctx is Run's: the watches' parent; nil before Run and after it.
	ctx     context.Context
	watched map[string]*watchedObject
	wg      sync.WaitGroup
}

// watchedObject is the watch of one object.
type watchedObject struct {
	store    cache.Store
	listed   <-chan struct{} // closed once the watch has listed
	started  time.Time
	cancel   context.CancelFunc
	lastRead time.Time
}

// CoreClient is the client of the core API group the WatchingGetter lists
// and watches with (a clientset).
type CoreClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// NewWatchingGetter returns a Getter that watches each ConfigMap and Secret
// it is asked for (see WatchingGetter) once Run runs; until then, and for
// objects not listed yet, it reads through inner.
func NewWatchingGetter(inner Getter, kube CoreClient, clk clock.WithTicker, idle time.Duration) *WatchingGetter {
	if idle <= 0 {
		idle = DefaultWatchIdle
	}
	return &WatchingGetter{inner: inner, core: kube.CoreV1(), client: kube, clk: clk, idle: idle, watched: map[string]*watchedObject{}}
}

// ResumeWhenBack lets a list or watch that failed while the API server was
// unreachable resume as soon as wait reports it back (see
// kubeclient.Reachability), instead of after the reflector's backoff. It
// must be called before Run.
func (g *WatchingGetter) ResumeWhenBack(wait apiwait.WaitFunc) {
	g.wait = wait
}

// Run lets the getter start watches and stops those no one read for the
// idle time, every idle period, until ctx is done; then it stops every
// watch and waits for them. It returns nil.
func (g *WatchingGetter) Run(ctx context.Context) error {
	g.mu.Lock()
	g.ctx = ctx
	g.mu.Unlock()
	t := g.clk.NewTicker(g.idle)
	defer t.Stop()
	tick := t.C()
	for {
		select {
		case <-ctx.Done():
			g.mu.Lock()
			g.ctx = nil
			for key, w := range g.watched {
				w.cancel()
				delete(g.watched, key)
			}
			g.mu.Unlock()
			g.wg.Wait()
			return nil
		case <-tick:
			g.expire()
		}
	}
}

// expire stops the watches of the objects no one read for the idle time.
func (g *WatchingGetter) expire() {
	now := g.clk.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for key, w := range g.watched {
		if now.Sub(w.lastRead) >= g.idle {
			w.cancel()
			delete(g.watched, key)
		}
	}
}

// Watched tells how many objects are watched (diagnostics and tests).
func (g *WatchingGetter) Watched() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.watched)
}

// GetConfigMap implements Getter.
func (g *WatchingGetter) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, ok, err := g.get(ctx, kindConfigMap, namespace, name, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return g.core.ConfigMaps(namespace).List(ctx, opts)
	}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return g.core.ConfigMaps(namespace).Watch(ctx, opts)
	}, &v1.ConfigMap{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return g.inner.GetConfigMap(ctx, namespace, name)
	}
	return obj.(*v1.ConfigMap).DeepCopy(), nil
}

// GetSecret implements Getter.
func (g *WatchingGetter) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, ok, err := g.get(ctx, kindSecret, namespace, name, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return g.core.Secrets(namespace).List(ctx, opts)
	}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return g.core.Secrets(namespace).Watch(ctx, opts)
	}, &v1.Secret{})
	if err != nil {
		return nil, err
	}
	if !ok {
		return g.inner.GetSecret(ctx, namespace, name)
	}
	return obj.(*v1.Secret).DeepCopy(), nil
}

// RequestToken implements Getter.
func (g *WatchingGetter) RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return g.inner.RequestToken(ctx, namespace, serviceAccount, req)
}

// get returns the object from its watch (ok), a NotFound error when the
// watch has listed and the object does not exist, or !ok when it is to be
// read directly: the watch has not listed within listWait, or Run does not
// run. It starts the object's watch when there is none.
func (g *WatchingGetter) get(ctx context.Context, kind, namespace, name string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	example runtime.Object) (any, bool, error) {
	key := kind + "/" + namespace + "/" + name
	g.mu.Lock()
	w := g.watched[key]
	if w == nil {
		if g.ctx == nil {
			g.mu.Unlock()
			return nil, false, nil
		}
		w = g.startLocked(kind, namespace, name, list, watchFn, example)
		g.watched[key] = w
	}
	now := g.clk.Now()
	w.lastRead = now
	g.mu.Unlock()
	select {
	case <-w.listed:
	default:
		// Only the reads of a watch's first listWait wait: a watch that
		// has not listed by then is failing, and its reads go direct.
		left := w.started.Add(listWait).Sub(now)
		if left <= 0 {
			return nil, false, nil
		}
		select {
		case <-w.listed:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-g.clk.After(left):
			return nil, false, nil
		}
	}
	obj, exists, err := w.store.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, false, err
	}
	if !exists {
		return nil, false, apierrors.NewNotFound(resourceOf(kind), name)
	}
	return obj, true, nil
}

// startLocked starts the watch of one object under g.ctx. Callers hold
// g.mu.
func (g *WatchingGetter) startLocked(kind, namespace, name string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	example runtime.Object) *watchedObject {
	ctx, cancel := context.WithCancel(g.ctx)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return list(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return watchFn(ctx, opts)
		},
	}
	store := &listedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), listed: make(chan struct{})}
	// A fake client that cannot stream its list is told apart, as the
	// generated informers do.
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(apiwait.ResumeListWatch(lw, g.wait), g.client), example, store, cache.ReflectorOptions{Name: kind + " " + namespace + "/" + name})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		klog.FromContext(ctx).V(4).Info("Watching object for volumes", "kind", kind, "namespace", namespace, "name", name)
		r.RunWithContext(ctx)
	}()
	return &watchedObject{store: store, listed: store.listed, started: g.clk.Now(), cancel: cancel}
}

// listedStore is a store that knows whether its reflector has listed:
// the reflector replaces the store's content with each list.
type listedStore struct {
	cache.Store
	listed chan struct{} // closed by the first Replace
	once   sync.Once
}

// Replace implements cache.Store.
func (s *listedStore) Replace(list []any, resourceVersion string) error {
	err := s.Store.Replace(list, resourceVersion)
	if err == nil {
		s.once.Do(func() { close(s.listed) })
	}
	return err
}

// resourceOf is the API resource of a kind, for NotFound errors.
func resourceOf(kind string) schema.GroupResource {
	if kind == kindSecret {
		return schema.GroupResource{Resource: "secrets"}
	}
	return schema.GroupResource{Resource: "configmaps"}
}
