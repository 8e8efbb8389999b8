// Package serviceenv computes the Service environment variables of a
// pod's containers, as the upstream kubelet sets them: for every Service
// with a cluster IP in the pod's namespace (when enableServiceLinks is not
// false) and for the master Service ("kubernetes" in "default") always,
// <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT, <NAME>_SERVICE_PORT_<PORT NAME>
// and the Docker link variables <NAME>_PORT, <NAME>_PORT_<port>_<PROTO>
// and its _PROTO, _PORT and _ADDR.
//
// The Services come from an informer (cluster mode); in standalone mode
// there are none and heartlet sets no such variable.
package serviceenv

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kuberuntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/heartlet/heartlet/internal/apiwait"
	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/podconfig"
)

// KubeClient is the API group Services are read with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// The master Service every pod gets the variables of, as upstream.
const (
	masterNamespace = v1.NamespaceDefault
	masterName      = "kubernetes"
)

// ErrNotSynced is returned before the Services were listed once: the
// variables cannot be made yet, and the container must wait.
var ErrNotSynced = errors.New("services have not been read yet, cannot make the Service environment variables")

// Lister lists Services (a client-go Service lister).
type Lister interface {
	List(selector labels.Selector) ([]*v1.Service, error)
}

// Env gives pods their Service environment variables from the Services
// it watches.
type Env struct {
	lister Lister
	synced func() bool
	run    func(ctx context.Context)
}

// New returns an Env fed by an informer on every Service of the cluster;
// it has no side effects, Run starts the informer. The informer keeps of
// each Service only what the variables are made of (see Slim): a cluster
// has many Services, and their annotations and managed fields would
// otherwise stay in memory for nothing.
//
// wait, if not nil, lets a list or watch that failed while the API server
// was unreachable resume as soon as it is back (kubeclient.Reachability).
func New(client KubeClient, wait apiwait.WaitFunc) *Env {
	services := client.CoreV1().Services(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kuberuntime.Object, error) {
			return services.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return services.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(apiwait.ResumeListWatch(lw, wait), client), &v1.Service{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	// SetTransform fails only once the informer has started.
	_ = informer.SetTransform(Slim)
	return &Env{
		lister: corelisters.NewServiceLister(informer.GetIndexer()),
		synced: informer.HasSynced,
		run:    informer.RunWithContext,
	}
}

// Slim is the informer's transform: of a Service (or a tombstone of one)
// it keeps the name, namespace, UID and resource version, and the cluster
// IPs, type and ports; anything else (a tombstone, whose Service went
// through Slim already) is passed through unchanged.
func Slim(obj any) (any, error) {
	s, ok := obj.(*v1.Service)
	if !ok {
		return obj, nil
	}
	return &v1.Service{
		TypeMeta: s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.Name,
			Namespace:       s.Namespace,
			UID:             s.UID,
			ResourceVersion: s.ResourceVersion,
		},
		Spec: v1.ServiceSpec{
			ClusterIP:  s.Spec.ClusterIP,
			ClusterIPs: s.Spec.ClusterIPs,
			Ports:      s.Spec.Ports,
			Type:       s.Spec.Type,
		},
	}, nil
}

// NewFromLister returns an Env reading lister, synced once synced says so
// (a nil synced: always).
func NewFromLister(lister Lister, synced func() bool) *Env {
	if synced == nil {
		synced = func() bool { return true }
	}
	return &Env{lister: lister, synced: synced, run: func(ctx context.Context) { <-ctx.Done() }}
}

var _ Lister = corelisters.ServiceLister(nil)

// Run watches the Services until ctx ends.
func (e *Env) Run(ctx context.Context) error {
	e.run(ctx)
	return nil
}

// ServiceEnv returns the Service variables of pod's containers, sorted by
// name. Before the Services were listed once, a pod from the API server
// gets ErrNotSynced (so that it never misses KUBERNETES_SERVICE_HOST, which
// in-cluster clients need), while a static pod gets what is known, as
// upstream: the API server itself may be a static pod.
func (e *Env) ServiceEnv(pod *v1.Pod) ([]v1.EnvVar, error) {
	if !e.synced() && !podconfig.IsStatic(pod) {
		return nil, ErrNotSynced
	}
	svcs, err := e.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	return FromServices(Select(svcs, pod.Namespace, links)), nil
}

// Select returns the Services whose variables a pod in namespace gets:
// those with a cluster IP in namespace when links is true, and the master
// Service. A Service of the pod's namespace wins over the master Service
// of the same name.
func Select(svcs []*v1.Service, namespace string, links bool) []*v1.Service {
	byName := map[string]*v1.Service{}
	for _, s := range svcs {
		if !hasClusterIP(s) {
			continue
		}
		switch {
		case s.Namespace == namespace && links:
			byName[s.Name] = s
		case s.Namespace == masterNamespace && s.Name == masterName:
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		}
	}
	out := make([]*v1.Service, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hasClusterIP: neither headless nor without an IP (ExternalName).
func hasClusterIP(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// FromServices returns the variables of svcs, sorted by name.
func FromServices(svcs []*v1.Service) []v1.EnvVar {
	var out []v1.EnvVar
	add := func(k, v string) { out = append(out, v1.EnvVar{Name: k, Value: v}) }
	for _, s := range svcs {
		if !hasClusterIP(s) || len(s.Spec.Ports) == 0 {
			continue
		}
		ip := s.Spec.ClusterIP
		prefix := varName(s.Name)
		add(prefix+"_SERVICE_HOST", ip)
		add(prefix+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
		for i, p := range s.Spec.Ports {
			if p.Name != "" {
				add(prefix+"_SERVICE_PORT_"+varName(p.Name), strconv.Itoa(int(p.Port)))
			}
			proto := strings.ToLower(string(v1.ProtocolTCP))
			if p.Protocol != "" {
				proto = strings.ToLower(string(p.Protocol))
			}
			port := strconv.Itoa(int(p.Port))
			url := proto + "://" + net.JoinHostPort(ip, port)
			if i == 0 {
				// Docker's links name the first port alone.
				add(prefix+"_PORT", url)
			}
			pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
			add(pp, url)
			add(pp+"_PROTO", proto)
			add(pp+"_PORT", port)
			add(pp+"_ADDR", ip)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// varName is a Service or port name as a variable name: upper case, '-'
// as '_'.
func varName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
