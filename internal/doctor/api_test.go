package doctor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/kubeclient"
)

// fakeAPI is an API whose access reviews answer with allow.
func fakeAPI(identity string, allow func(user string, a *authorizationv1.ResourceAttributes) (bool, string), pods ...v1.Pod) (*API, *fake.Clientset) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed, r.Status.Reason = allow(identity, r.Spec.ResourceAttributes)
		return true, r, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		r := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r.Status.Allowed, r.Status.Reason = allow(r.Spec.User, r.Spec.ResourceAttributes)
		return true, r, nil
	})
	cs.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		sel := action.(k8stesting.ListAction).GetListRestrictions().Fields.String()
		if sel != "spec.nodeName=node1" {
			return true, nil, fmt.Errorf("unexpected field selector %q", sel)
		}
		return true, &v1.PodList{Items: pods}, nil
	})
	return &API{Kube: kubeapifake.Wrap(cs), Kubeconfig: "/etc/kubernetes/kubelet.conf", Server: "https://10.0.0.1:6443", Identity: identity, ServerVersion: "v1.37.2"}, cs
}

func connectTo(api *API, err error) func(context.Context) (*API, error) {
	return func(context.Context) (*API, error) { return api, err }
}

func allowAll(string, *authorizationv1.ResourceAttributes) (bool, string) { return true, "" }

func TestKubeconfigCheck(t *testing.T) {
	api, _ := fakeAPI("system:node:node1", allowAll)
	for _, tc := range []struct {
		name    string
		connect func(context.Context) (*API, error)
		level   Level
		text    string
		fix     string
	}{
		{"standalone", nil, OK, "standalone mode", ""},
		{"connected", connectTo(api, nil), OK, "/etc/kubernetes/kubelet.conf: API server https://10.0.0.1:6443 (v1.37.2), TLS verified, authenticated as system:node:node1", ""},
		{"missing", connectTo(nil, fmt.Errorf("kubeconfig /x: %w", fs.ErrNotExist)), Error, "kubeconfig /x", "--kubeconfig"},
		{"unreachable", connectTo(nil, fmt.Errorf("is unreachable: %w", kubeclient.ErrUnreachable)), Error, "unreachable", "server address"},
		{"TLS", connectTo(nil, fmt.Errorf("x: %w", kubeclient.ErrTLS)), Error, "x", "certificate-authority"},
		{"unauthorized", connectTo(nil, fmt.Errorf("x: %w", kubeclient.ErrUnauthorized)), Error, "x", "renew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checker{Inputs{Opts: testOpts(t), Connect: tc.connect}}
			rs := c.kubeconfig(context.Background())
			expect(t, rs, tc.level, tc.text)
			if !strings.Contains(rs[0].Fix, tc.fix) {
				t.Errorf("fix %q does not contain %q", rs[0].Fix, tc.fix)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		identity string
		level    Level
		text     string
	}{
		{"system:node:node1", OK, "matches node name node1"},
		{"system:node:node2", Error, "is for node node2, but the node name is node1"},
		{"alice", Warning, "alice is not a node identity"},
	} {
		api, _ := fakeAPI(tc.identity, allowAll)
		c := checker{Inputs{Opts: testOpts(t), Connect: connectTo(api, nil)}}
		expect(t, c.identity(context.Background()), tc.level, tc.text)
	}
	c := checker{Inputs{Opts: testOpts(t), Connect: connectTo(nil, errors.New("down"))}}
	expect(t, c.identity(context.Background()), Skipped, "not usable")
}

func TestPermissions(t *testing.T) {
	// nodeAuthorizer answers as the Node authorizer would for node1.
	nodeAuthorizer := func(user string, a *authorizationv1.ResourceAttributes) (bool, string) {
		switch {
		case user != "system:node:node1":
			return false, ""
		case a.Resource == "pods" && (a.Verb == "list" || a.Verb == "watch"):
			return a.FieldSelector != nil && a.FieldSelector.RawSelector == "spec.nodeName=node1", ""
		case a.Resource == "serviceaccounts":
			return false, "no relationship found between node 'node1' and this object"
		}
		return true, ""
	}
	for _, tc := range []struct {
		name     string
		identity string
		allow    func(string, *authorizationv1.ResourceAttributes) (bool, string)
		level    Level
		text     string
	}{
		{"all allowed", "system:node:node1", allowAll, OK, "system:node:node1 may do all 16 things a node does"},
		{"node authorizer", "system:node:node1", nodeAuthorizer, OK, "may do 15 of 16 things a node does; create service account tokens (tokenrequests) only for its pods"},
		{"nothing allowed", "alice", nodeAuthorizer, Error, "alice may not get its Node, patch its Node's status"},
		{"no leases", "system:node:node1", func(_ string, a *authorizationv1.ResourceAttributes) (bool, string) {
			return a.Resource != "leases", ""
		}, Error, "may not get its Lease, update its Lease, create its Lease (3 of 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, _ := fakeAPI(tc.identity, tc.allow)
			c := checker{Inputs{Opts: testOpts(t, "--authentication-token-webhook", "--authorization-mode", "Webhook"), Connect: connectTo(api, nil)}}
			expect(t, c.permissions(context.Background()), tc.level, tc.text)
		})
	}
	t.Run("review fails", func(t *testing.T) {
		api, cs := fakeAPI("system:node:node1", allowAll)
		cs.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, errors.New("boom")
		})
		c := checker{Inputs{Opts: testOpts(t), Connect: connectTo(api, nil)}}
		expect(t, c.permissions(context.Background()), Error, "boom")
	})
}

func TestPods(t *testing.T) {
	pod := func(phase v1.PodPhase) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: string(phase)}, Status: v1.PodStatus{Phase: phase}}
	}
	bound := []v1.Pod{pod(v1.PodRunning), pod(v1.PodPending), pod(v1.PodSucceeded), pod(v1.PodFailed)}
	for _, tc := range []struct {
		maxPods string
		level   Level
		text    string
	}{
		{"110", OK, "2 pods bound to node1, maxPods 110"},
		{"2", Warning, "the node is full"},
		{"1", Error, "2 pods are bound to node1, more than maxPods 1: 1 would be rejected"},
	} {
		api, _ := fakeAPI("system:node:node1", allowAll, bound...)
		c := checker{Inputs{Opts: testOpts(t, "--max-pods", tc.maxPods), Connect: connectTo(api, nil)}}
		expect(t, c.pods(context.Background()), tc.level, tc.text)
	}
	c := checker{Inputs{Opts: testOpts(t)}}
	expect(t, c.pods(context.Background()), Skipped, "standalone")
}

func TestClock(t *testing.T) {
	for _, tc := range []struct {
		skew  time.Duration
		level Level
		text  string
	}{
		{500 * time.Millisecond, OK, "500ms behind"},
		{-4500 * time.Millisecond, Warning, "4.5s ahead of the API server's"},
		{60500 * time.Millisecond, Error, "1m0.5s behind"},
	} {
		api, _ := fakeAPI("system:node:node1", allowAll)
		api.ServerTime = func(context.Context) (time.Time, time.Time, time.Time, error) {
			// The Date header is cut to the second: the check takes the
			// middle of it.
			return testNow.Add(tc.skew).Truncate(time.Second), testNow.Add(-250 * time.Millisecond), testNow.Add(250 * time.Millisecond), nil
		}
		c := checker{Inputs{Opts: testOpts(t), Connect: connectTo(api, nil)}}
		expect(t, c.clock(context.Background()), tc.level, tc.text)
	}
}

// certPEM makes a self-signed certificate valid from notBefore to notAfter.
func certPEM(t *testing.T, cn string, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestCertificates(t *testing.T) {
	day := 24 * time.Hour
	valid := certPEM(t, "good", testNow.Add(-day), testNow.Add(365*day))
	for _, tc := range []struct {
		name   string
		client []byte
		files  fstest.MapFS
		args   []string
		want   []any
	}{
		{"valid, serving not made", valid, nil, nil, []any{
			OK, "client certificate in /etc/kubernetes/kubelet.conf (good) expires 2027-06-01T12:00:00Z, in 365 days",
			OK, "serving certificate /var/lib/kubelet/pki/kubelet.crt: not yet made"}},
		{"client expired", certPEM(t, "old", testNow.Add(-365*day), testNow.Add(-day)), nil, nil, []any{
			Error, "client certificate in /etc/kubernetes/kubelet.conf (old) expires 2026-05-31T12:00:00Z: expired 24h0m0s ago",
			OK, "not yet made"}},
		{"client soon", certPEM(t, "soon", testNow.Add(-day), testNow.Add(10*day)), nil, nil, []any{
			Warning, "in 240h0m0s", OK, "not yet made"}},
		{"client not yet valid", certPEM(t, "future", testNow.Add(day), testNow.Add(10*day)), nil, nil, []any{
			Error, "is not valid before", OK, "not yet made"}},
		{"serving and CA", nil, fstest.MapFS{"etc/tls.crt": {Data: valid}, "etc/ca.crt": {Data: certPEM(t, "ca", testNow.Add(-day), testNow.Add(-time.Hour))}},
			[]string{"--tls-cert-file", "/etc/tls.crt", "--tls-private-key-file", "/etc/tls.key", "--client-ca-file", "/etc/ca.crt"}, []any{
				OK, "serving certificate /etc/tls.crt (good)", Error, "client CA /etc/ca.crt (ca)"}},
		{"missing files", nil, nil,
			[]string{"--tls-cert-file", "/etc/tls.crt", "--tls-private-key-file", "/etc/tls.key", "--client-ca-file", "/etc/ca.crt"}, []any{
				Error, "serving certificate /etc/tls.crt", Error, "client CA /etc/ca.crt"}},
		{"not PEM", nil, fstest.MapFS{"etc/tls.crt": {Data: []byte("junk")}}, []string{"--tls-cert-file", "/etc/tls.crt", "--tls-private-key-file", "/etc/tls.key"}, []any{
			Error, "no PEM certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Opts: testOpts(t, tc.args...), Host: fakeHost(tc.files, nil, nil)}
			if tc.client != nil {
				api, _ := fakeAPI("system:node:node1", allowAll)
				api.ClientCert, api.ClientCertSource = tc.client, "in /etc/kubernetes/kubelet.conf"
				in.Connect = connectTo(api, nil)
			}
			expect(t, checker{in}.certificates(context.Background()), tc.want...)
		})
	}
}

func TestKubeletAPI(t *testing.T) {
	apiserverAllowed := func(user string, a *authorizationv1.ResourceAttributes) (bool, string) {
		return user == DefaultAPIServerKubeletUser && a.Resource == "nodes" && a.Subresource == "proxy" && a.Name == "node1", "no RBAC policy matched"
	}
	denyAll := func(string, *authorizationv1.ResourceAttributes) (bool, string) {
		return false, "no RBAC policy matched"
	}
	secure := []string{"--anonymous-auth=false", "--authentication-token-webhook", "--authorization-mode", "Webhook", "--client-ca-file", "/etc/ca.crt"}
	for _, tc := range []struct {
		name  string
		args  []string
		allow func(string, *authorizationv1.ResourceAttributes) (bool, string)
		want  []any
	}{
		{"webhook, allowed", secure, apiserverAllowed, []any{
			OK, ":10250 authentication x509 /etc/ca.crt, webhook tokens; authorization Webhook",
			OK, "kube-apiserver-kubelet-client may get nodes/proxy of node1"}},
		{"webhook, denied", secure, denyAll, []any{
			OK, "authorization Webhook",
			Error, "kube-apiserver-kubelet-client may not get nodes/proxy of node1: kubectl logs, exec and port-forward will get 403"}},
		{"no client CA", []string{"--anonymous-auth=false", "--authorization-mode", "Webhook"}, apiserverAllowed, []any{
			Warning, "no client CA", OK, "may get nodes/proxy"}},
		{"AlwaysAllow", []string{"--anonymous-auth=false", "--authorization-mode", "AlwaysAllow", "--client-ca-file", "/etc/ca.crt"}, nil, []any{
			Warning, "every authenticated user may run commands in every pod"}},
		{"anonymous AlwaysAllow", []string{"--anonymous-auth=true", "--authorization-mode", "AlwaysAllow"}, nil, []any{
			Error, "anyone who reaches the port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Opts: testOpts(t, tc.args...), APIServerKubeletUser: DefaultAPIServerKubeletUser}
			if tc.allow != nil {
				api, _ := fakeAPI("system:node:node1", tc.allow)
				in.Connect = connectTo(api, nil)
			}
			expect(t, checker{in}.kubeletAPI(context.Background()), tc.want...)
		})
	}
}

func TestChecksShareConnections(t *testing.T) {
	runtimeCalls, apiCalls := 0, 0
	api, _ := fakeAPI("system:node:node1", allowAll)
	in := Inputs{
		Opts: testOpts(t),
		Host: fakeHost(nil, nil, nil),
		ConnectRuntime: func(context.Context) (Runtime, error) {
			runtimeCalls++
			return nil, errors.New("no socket")
		},
		Connect: func(context.Context) (*API, error) { apiCalls++; return api, nil },
	}
	api.ServerTime = func(context.Context) (time.Time, time.Time, time.Time, error) { return testNow, testNow, testNow, nil }
	lines := Run(context.Background(), Checks(in), time.Minute)
	if runtimeCalls != 1 || apiCalls != 1 {
		t.Errorf("runtime connected %d times, API %d times; want once each", runtimeCalls, apiCalls)
	}
	if !Failed(lines) {
		t.Error("no error with the runtime unreachable")
	}
}

// TestCertificatesServerTLSBootstrap: with serverTLSBootstrap the serving
// certificate is the issued kubelet-server-current.pem, not a self-signed
// one.
func TestCertificatesServerTLSBootstrap(t *testing.T) {
	day := 24 * time.Hour
	valid := certPEM(t, "system:node:node1", testNow.Add(-day), testNow.Add(365*day))
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		args  []string
		want  []any
	}{
		{"not issued yet", nil, nil, []any{OK, "serving certificate /var/lib/kubelet/pki/kubelet-server-current.pem: not yet issued; heartlet asks for it with a kubelet-serving CertificateSigningRequest"}},
		{"issued", fstest.MapFS{"var/lib/kubelet/pki/kubelet-server-current.pem": {Data: valid}}, nil, []any{
			OK, "serving certificate /var/lib/kubelet/pki/kubelet-server-current.pem (system:node:node1)"}},
		{"not issued, tlsCertFile serves meanwhile", fstest.MapFS{"etc/tls.crt": {Data: valid}},
			[]string{"--tls-cert-file", "/etc/tls.crt", "--tls-private-key-file", "/etc/tls.key"}, []any{OK, "serving certificate /etc/tls.crt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOpts(t, tc.args...)
			opts.Config.ServerTLSBootstrap = true
			in := Inputs{Opts: opts, Host: fakeHost(tc.files, nil, nil)}
			expect(t, checker{in}.certificates(context.Background()), tc.want...)
		})
	}
}
