package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/rest"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/kubeclient"
)

// waitFor is how long a test waits for the certificate manager, which runs
// on the real clock, to act; a pass takes milliseconds.
const waitFor = 30 * time.Second

// runRotating runs r until the test ends and returns a channel that gets a
// value at each rotation.
func runRotating(t *testing.T, r *Rotating) <-chan struct{} {
	t.Helper()
	rotated := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx, func() { rotated <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return rotated
}

func waitRotated(t *testing.T, rotated <-chan struct{}) {
	t.Helper()
	select {
	case <-rotated:
	case <-time.After(waitFor):
		t.Fatal("no rotation")
	}
}

// TestClientRotation: a client certificate past its rotation point (here
// 95 % of its lifetime) is renewed through a new request made with the
// current certificate, stored as the new kubelet-client-current.pem, and
// reported to the caller, who closes its connections.
func TestClientRotation(t *testing.T) {
	e := newBootstrapEnv(t)
	now := time.Now()
	oldCert, oldKey := e.ca.pair(t, NodeSubject("node-1"), now.Add(-95*time.Minute), now.Add(5*time.Minute))
	certFile, keyFile := filepath.Join(e.dir, "c.pem"), filepath.Join(e.dir, "k.pem")
	writeFile(t, certFile, oldCert)
	writeFile(t, keyFile, oldKey)
	writeKubeconfigFile(t, e.kubeconfig, e.ca.certPEM, "", certFile, keyFile)

	_, client := newSigner(t, e.ca)
	var cfgs []*rest.Config
	ttl := &fakeGauge{}
	r, err := NewClient(context.Background(), ClientOptions{
		Metrics:    Metrics{TTL: ttl},
		Kubeconfig: e.kubeconfig,
		CertDir:    e.certDir,
		NodeName:   "node-1",
		NewClient: func(c *rest.Config) (kubeclient.Interface, error) {
			cfgs = append(cfgs, c)
			return kubeapifake.Wrap(client), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	first := r.Current()
	if first == nil || first.Leaf.NotAfter.Unix() != now.Add(5*time.Minute).Unix() {
		t.Fatalf("starting certificate %v, want the kubeconfig's", first)
	}
	waitRotated(t, runRotating(t, r))

	cur := r.Current()
	if cur == first || !cur.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Fatalf("current certificate not renewed: %v", cur.Leaf.NotAfter)
	}
	// The TTL gauge is set before each rotation is reported.
	if got := ttl.get(); got < 50*60 || got > 60*60 {
		t.Errorf("TTL gauge %v s, want the renewed certificate's, about an hour", got)
	}
	if cur.Leaf.Subject.CommonName != "system:node:node-1" {
		t.Errorf("renewed subject %v", cur.Leaf.Subject)
	}
	list, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1ListAll)
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("requests %v %v", list, err)
	}
	if s := list.Items[0].Spec.SignerName; s != ClientSigner {
		t.Errorf("signer %q", s)
	}
	// The renewal was asked with the current certificate, not anonymously.
	if len(cfgs) == 0 || len(cfgs[0].CertData) == 0 || len(cfgs[0].KeyData) == 0 {
		t.Errorf("renewal client without the current certificate: %+v", cfgs)
	}
	stored, err := os.ReadFile(filepath.Join(e.certDir, "kubelet-client-current.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(stored, stored)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if !leaf.Equal(cur.Leaf) {
		t.Error("kubelet-client-current.pem is not the renewed certificate")
	}
}

// TestServingBootstrap: with serverTLSBootstrap the serving certificate is
// asked for from the kubelet-serving signer for the node's names and IPs;
// until it is issued every handshake fails, as upstream.
func TestServingBootstrap(t *testing.T) {
	ca := newTestCA(t)
	s, client := newSigner(t, ca)
	r, err := NewServing(context.Background(), ServingOptions{
		Client:   kubeapifake.Wrap(client),
		CertDir:  filepath.Join(t.TempDir(), "pki"),
		NodeName: "node-1",
		Addresses: func() ([]string, []net.IP) {
			return []string{"node-1"}, []net.IP{net.ParseIP("10.0.0.7")}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetCertificate(nil); !errors.Is(err, ErrNoServingCertificate) {
		t.Fatalf("GetCertificate before issue: %v, want ErrNoServingCertificate", err)
	}
	waitRotated(t, runRotating(t, r))

	got, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Leaf.DNSNames, []string{"node-1"}) || len(got.Leaf.IPAddresses) != 1 || !got.Leaf.IPAddresses[0].Equal(net.ParseIP("10.0.0.7")) {
		t.Errorf("serving names %v %v", got.Leaf.DNSNames, got.Leaf.IPAddresses)
	}
	reqs := s.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	csr := reqs[0]
	if csr.Spec.SignerName != "kubernetes.io/kubelet-serving" {
		t.Errorf("signer %q", csr.Spec.SignerName)
	}
	want := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	if !slices.Equal(csr.Spec.Usages, want) {
		t.Errorf("usages %v, want %v", csr.Spec.Usages, want)
	}
	req := parseRequest(t, csr)
	if req.Subject.CommonName != "system:node:node-1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", req.Subject)
	}
}

func TestServingNeedsClient(t *testing.T) {
	if _, err := NewServing(context.Background(), ServingOptions{CertDir: t.TempDir()}); err == nil {
		t.Error("NewServing without a client succeeded")
	}
}

type fakeGauge struct {
	mu sync.Mutex
	v  float64
}

func (g *fakeGauge) Set(v float64) { g.mu.Lock(); g.v = v; g.mu.Unlock() }
func (g *fakeGauge) get() float64  { g.mu.Lock(); defer g.mu.Unlock(); return g.v }

// countingCounter signals each Inc.
type countingCounter chan struct{}

func (c countingCounter) Inc() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// TestServingRenewErrors: a request the signer denies is counted as a
// renewal error, the TTL is +Inf without a certificate, and nothing is
// served.
func TestServingRenewErrors(t *testing.T) {
	ca := newTestCA(t)
	s, client := newSigner(t, ca)
	s.deny = true
	errs := make(countingCounter, 1)
	ttl := &fakeGauge{}
	r, err := NewServing(context.Background(), ServingOptions{
		Client:    kubeapifake.Wrap(client),
		CertDir:   filepath.Join(t.TempDir(), "pki"),
		NodeName:  "node-1",
		Addresses: func() ([]string, []net.IP) { return []string{"node-1"}, nil },
		Metrics:   Metrics{TTL: ttl, RenewErrors: errs},
	})
	if err != nil {
		t.Fatal(err)
	}
	runRotating(t, r)
	select {
	case <-errs:
	case <-time.After(waitFor):
		t.Fatal("no renewal error counted for a denied request")
	}
	if _, err := r.GetCertificate(nil); !errors.Is(err, ErrNoServingCertificate) {
		t.Errorf("GetCertificate after a denied request: %v", err)
	}
	if got := ttl.get(); !math.IsInf(got, 1) {
		t.Errorf("TTL gauge %v without a certificate, want +Inf", got)
	}
}
