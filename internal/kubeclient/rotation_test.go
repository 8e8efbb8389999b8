package kubeclient

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"testing"
)

// TestClientCertificateRotates: with ClientCertificate the clients present
// the certificate it returns at each handshake (not the kubeconfig's), and
// after CloseAllConns the next request presents a rotated one without a
// new client; the server's CA from the kubeconfig is still checked.
func TestClientCertificateRotates(t *testing.T) {
	ca := newTestCA(t, "ca")
	srv := startTLS(t, ca, &fakeAPI{}, "")
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, srv.URL, ca.certPEM, certUser(t, dir, ca, "system:node:from-kubeconfig"))

	pair := func(cn string) *tls.Certificate {
		c, k := ca.issue(t, false, cn, []string{"system:nodes"}, nil, nil)
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	var current atomic.Pointer[tls.Certificate]
	current.Store(pair("system:node:first"))

	cl, err := Load(context.Background(), Options{Kubeconfig: path, ClientCertificate: current.Load})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseAllConns()
	if cl.Identity != "system:node:first" {
		t.Fatalf("identity %q, want the rotating certificate's", cl.Identity)
	}
	for _, c := range []Interface{cl.Kube, cl.Heartbeat, cl.Events} {
		if _, err := c.CoreV1().RESTClient().Get().AbsPath("/version").Do(context.Background()).Raw(); err != nil {
			t.Fatalf("server version: %v", err)
		}
	}

	current.Store(pair("system:node:second"))
	cl.CloseAllConns()
	if err := cl.preflight(context.Background(), DefaultPreflightTimeout); err != nil {
		t.Fatal(err)
	}
	if cl.Identity != "system:node:second" {
		t.Errorf("identity after rotation %q, want system:node:second", cl.Identity)
	}
}

// TestClientCertificateChecksServer attacks the rotating transport: a
// server whose certificate the kubeconfig's CA did not sign is refused.
func TestClientCertificateChecksServer(t *testing.T) {
	ca, other := newTestCA(t, "ca"), newTestCA(t, "other")
	srv := startTLS(t, other, &fakeAPI{}, "")
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, srv.URL, ca.certPEM, certUser(t, dir, ca, "system:node:n"))
	_, err := Load(context.Background(), Options{Kubeconfig: path, ClientCertificate: func() *tls.Certificate { return nil }})
	if err == nil {
		t.Fatal("Load succeeded against a server of another CA")
	}
}
