package serviceenv

import (
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func env(kv ...string) []v1.EnvVar {
	var out []v1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, v1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// The variables as upstream's kubelet sets them (and as upstream's e2e
// test "should contain environment variables for services",
// test/e2e/common/node/pods.go, expects them).
func TestFromServices(t *testing.T) {
	for _, tc := range []struct {
		name string
		svcs []*v1.Service
		want []v1.EnvVar
	}{
		{name: "none"},
		{name: "one unnamed TCP port", svcs: []*v1.Service{svc("ns", "fooservice", "10.0.0.11", v1.ServicePort{Port: 8765})},
			want: env(
				"FOOSERVICE_PORT", "tcp://10.0.0.11:8765",
				"FOOSERVICE_PORT_8765_TCP", "tcp://10.0.0.11:8765",
				"FOOSERVICE_PORT_8765_TCP_ADDR", "10.0.0.11",
				"FOOSERVICE_PORT_8765_TCP_PORT", "8765",
				"FOOSERVICE_PORT_8765_TCP_PROTO", "tcp",
				"FOOSERVICE_SERVICE_HOST", "10.0.0.11",
				"FOOSERVICE_SERVICE_PORT", "8765",
			)},
		{name: "named ports, dashes, UDP", svcs: []*v1.Service{svc("ns", "my-dns", "10.0.0.10",
			v1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP},
			v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})},
			want: env(
				"MY_DNS_PORT", "tcp://10.0.0.10:53",
				"MY_DNS_PORT_53_TCP", "tcp://10.0.0.10:53",
				"MY_DNS_PORT_53_TCP_ADDR", "10.0.0.10",
				"MY_DNS_PORT_53_TCP_PORT", "53",
				"MY_DNS_PORT_53_TCP_PROTO", "tcp",
				"MY_DNS_PORT_53_UDP", "udp://10.0.0.10:53",
				"MY_DNS_PORT_53_UDP_ADDR", "10.0.0.10",
				"MY_DNS_PORT_53_UDP_PORT", "53",
				"MY_DNS_PORT_53_UDP_PROTO", "udp",
				"MY_DNS_SERVICE_HOST", "10.0.0.10",
				"MY_DNS_SERVICE_PORT", "53",
				"MY_DNS_SERVICE_PORT_DNS", "53",
				"MY_DNS_SERVICE_PORT_DNS_TCP", "53",
			)},
		{name: "IPv6", svcs: []*v1.Service{svc("ns", "v6", "fd00::1", v1.ServicePort{Port: 80})},
			want: env(
				"V6_PORT", "tcp://[fd00::1]:80",
				"V6_PORT_80_TCP", "tcp://[fd00::1]:80",
				"V6_PORT_80_TCP_ADDR", "fd00::1",
				"V6_PORT_80_TCP_PORT", "80",
				"V6_PORT_80_TCP_PROTO", "tcp",
				"V6_SERVICE_HOST", "fd00::1",
				"V6_SERVICE_PORT", "80",
			)},
		{name: "headless, ExternalName and port-less Services have none", svcs: []*v1.Service{
			svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
			svc("ns", "external", "", v1.ServicePort{Port: 80}),
			svc("ns", "noports", "10.0.0.3"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromServices(tc.svcs); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func names(svcs []*v1.Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func TestSelect(t *testing.T) {
	all := []*v1.Service{
		svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Port: 443}),
		svc("default", "other", "10.0.0.2", v1.ServicePort{Port: 80}),
		svc("ns", "web", "10.0.0.3", v1.ServicePort{Port: 80}),
		svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		svc("ns2", "db", "10.0.0.4", v1.ServicePort{Port: 5432}),
	}
	shadow := svc("ns", "kubernetes", "10.0.0.9", v1.ServicePort{Port: 1})
	for _, tc := range []struct {
		name  string
		svcs  []*v1.Service
		ns    string
		links bool
		want  []string
	}{
		{name: "namespace and master", svcs: all, ns: "ns", links: true, want: []string{"default/kubernetes", "ns/web"}},
		{name: "links off: master only", svcs: all, ns: "ns", links: false, want: []string{"default/kubernetes"}},
		{name: "default namespace", svcs: all, ns: "default", links: true, want: []string{"default/kubernetes", "default/other"}},
		{name: "default namespace, links off", svcs: all, ns: "default", links: false, want: []string{"default/kubernetes"}},
		{name: "a namespace's own kubernetes Service wins", svcs: append([]*v1.Service{shadow}, all...), ns: "ns", links: true, want: []string{"ns/kubernetes", "ns/web"}},
		{name: "its own kubernetes Service listed last still wins", svcs: append(append([]*v1.Service{}, all...), shadow), ns: "ns", links: true, want: []string{"ns/kubernetes", "ns/web"}},
		{name: "with links off the master wins", svcs: append([]*v1.Service{shadow}, all...), ns: "ns", links: false, want: []string{"default/kubernetes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(Select(tc.svcs, tc.ns, tc.links)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

type fakeLister struct {
	svcs []*v1.Service
	err  error
}

func (f fakeLister) List(labels.Selector) ([]*v1.Service, error) { return f.svcs, f.err }

func TestServiceEnv(t *testing.T) {
	l := fakeLister{svcs: []*v1.Service{
		svc("default", "kubernetes", "10.0.0.1", v1.ServicePort{Name: "https", Port: 443}),
		svc("ns", "web", "10.0.0.3", v1.ServicePort{Port: 80}),
	}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}

	synced := false
	e := NewFromLister(l, func() bool { return synced })
	if _, err := e.ServiceEnv(pod); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("before sync: %v", err)
	}
	synced = true
	got, err := e.ServiceEnv(pod)
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]string{}
	for _, v := range got {
		has[v.Name] = v.Value
	}
	if has["WEB_SERVICE_HOST"] != "10.0.0.3" || has["KUBERNETES_SERVICE_PORT_HTTPS"] != "443" || len(got) != 15 {
		t.Errorf("default enableServiceLinks: %v", got)
	}
	pod.Spec.EnableServiceLinks = ptr.To(false)
	got, _ = e.ServiceEnv(pod)
	for _, v := range got {
		if v.Name == "WEB_SERVICE_HOST" {
			t.Errorf("enableServiceLinks false: %v", got)
		}
	}
	if len(got) != 8 {
		t.Errorf("enableServiceLinks false: want the master's 8 variables, got %v", got)
	}
	boom := errors.New("boom")
	if _, err := NewFromLister(fakeLister{err: boom}, nil).ServiceEnv(pod); !errors.Is(err, boom) {
		t.Errorf("list error lost: %v", err)
	}
}
