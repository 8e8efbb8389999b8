package serviceenv

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// fat is a Service as the API server returns it, with what the variables
// are not made of: labels, annotations, managed fields, selector, status.
func fat(ns, name, ip string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7",
			Labels:        map[string]string{"app": name},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"a very":"long document"}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
			Selector: map[string]string{"app": name},
		},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
	}
}

func TestSlim(t *testing.T) {
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: &v1.Service{}}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"service", fat("ns", "a", "10.0.0.1"), &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a", ResourceVersion: "7"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1"},
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
		}},
		{"headless", svc("ns", "h", v1.ClusterIPNone), svc("ns", "h", v1.ClusterIPNone)},
		{"tombstone passes through", tomb, tomb},
		{"other object passes through", &v1.Pod{}, &v1.Pod{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Slim(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Slim(%#v) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

// New's informer lists and watches every Service, keeps them slim, and
// gives the same variables as the full objects would.
func TestNewWatchesServices(t *testing.T) {
	client := fake.NewClientset(fat("default", "kubernetes", "10.0.0.1"), fat("app", "db", "10.0.0.2"))
	e := New(kubeapifake.Wrap(client), nil)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "p"}}
	if _, err := e.ServiceEnv(pod); err != ErrNotSynced {
		t.Fatalf("ServiceEnv before the first list: err = %v, want ErrNotSynced", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) { return cond(), nil })
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	waitFor("the first list", e.synced)
	got, err := e.ServiceEnv(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := FromServices([]*v1.Service{fat("app", "db", "10.0.0.2"), fat("default", "kubernetes", "10.0.0.1")})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceEnv = %v, want %v", got, want)
	}
	cached, err := e.lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cached {
		if s.Annotations != nil || s.Labels != nil || s.ManagedFields != nil || s.Spec.Selector != nil || len(s.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("cached Service %s/%s keeps more than the variables need: %+v", s.Namespace, s.Name, s)
		}
	}

	// A Service created later is seen through the watch.
	if _, err := client.CoreV1().Services("app").Create(ctx, fat("app", "cache", "10.0.0.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the new Service", func() bool {
		vars, err := e.ServiceEnv(pod)
		if err != nil {
			return false
		}
		for _, v := range vars {
			if v.Name == "CACHE_SERVICE_HOST" && v.Value == "10.0.0.3" {
				return true
			}
		}
		return false
	})
}
