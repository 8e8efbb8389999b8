package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/kubeclient"
)

// renewerEnv is a renewer on a fake clock with a signer that issues
// one-hour certificates on that clock.
type renewerEnv struct {
	clk    *clocktesting.FakeClock
	signer *signer
	r      *renewer
	fails  *countingInc
}

type countingInc struct {
	mu sync.Mutex
	n  int
}

func (c *countingInc) Inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *countingInc) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func newRenewerEnv(t *testing.T, template func() *x509.CertificateRequest, dynamic bool, startCert, startKey []byte) *renewerEnv {
	t.Helper()
	ca := newTestCA(t)
	e := &renewerEnv{clk: clocktesting.NewFakeClock(time.Now()), fails: &countingInc{}}
	s, client := newSigner(t, ca)
	s.now = e.clk.Now
	e.signer = s
	dir := t.TempDir()
	store, err := newFileStore(klog.Background(), "kubelet-test", dir, "", "", e.clk)
	if err != nil {
		t.Fatal(err)
	}
	if startCert != nil {
		if _, err := store.Update(startCert, startKey); err != nil {
			t.Fatal(err)
		}
	}
	e.r, err = newRenewer(klog.Background(), renewerConfig{
		name:     "kubelet-test",
		store:    store,
		template: template,
		dynamic:  dynamic,
		signer:   ServingSigner,
		usages:   kubeletServingUsages,
		client: func(*tls.Certificate) (csrClient, error) {
			return client.CertificatesV1().CertificateSigningRequests(), nil
		},
		renewFailure: e.fails,
		clock:        e.clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.r.jitter = func() float64 { return 0.8 }
	return e
}

// run runs the renewer until the test ends.
func (e *renewerEnv) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.r.run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// waitRequests waits until the signer has seen n requests.
func (e *renewerEnv) waitRequests(t *testing.T, n int) []*x509.CertificateRequest {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for len(e.signer.requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests, want %d", len(e.signer.requests()), n)
		}
		runtime.Gosched()
	}
	var reqs []*x509.CertificateRequest
	for _, c := range e.signer.requests() {
		reqs = append(reqs, parseRequest(t, c))
	}
	return reqs
}

// waitIdle waits until the renewer, with n requests made, waits on its
// clock: on one timer (a renewal point, a retry) or, with a changing
// template and a certificate, on the renewal point and the template check
// (while a request waits for its certificate, the renewer waits on the
// template check only). It has then acted on everything the clock allowed
// so far.
func (e *renewerEnv) waitIdle(t *testing.T, n int) {
	t.Helper()
	e.waitRequests(t, n)
	waiters := 1
	if e.r.dynamic && e.r.Current() != nil {
		waiters = 2
	}
	deadline := time.Now().Add(waitFor)
	for e.clk.Waiters() != waiters {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want %d", e.clk.Waiters(), waiters)
		}
		runtime.Gosched()
	}
	if got := len(e.signer.requests()); got != n {
		t.Fatalf("%d requests, want %d", got, n)
	}
}

// waitCurrent waits until the current certificate has these names.
func (e *renewerEnv) waitCurrent(t *testing.T, names ...string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if c := e.r.Current(); c != nil && slices.Equal(c.Leaf.DNSNames, names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("current certificate never had the names %v", names)
		}
		runtime.Gosched()
	}
}

func fixedTemplate(names ...string) func() *x509.CertificateRequest {
	return func() *x509.CertificateRequest {
		return &x509.CertificateRequest{Subject: NodeSubject("node-1"), DNSNames: names}
	}
}

// TestRenewerRenewsAtDeadline: a valid certificate is renewed at the
// chosen point of its lifetime (80 % here), not before; the renewed one
// is current and stored.
func TestRenewerRenewsAtDeadline(t *testing.T) {
	ca := newTestCA(t)
	now := time.Now()
	cert, key := ca.pair(t, NodeSubject("node-1"), now, now.Add(10*time.Hour))
	e := newRenewerEnv(t, fixedTemplate(), false, cert, key)
	first := e.r.Current()
	if first == nil {
		t.Fatal("no starting certificate")
	}
	e.run(t)
	e.waitIdle(t, 0)
	e.clk.Step(8*time.Hour - time.Minute)
	e.waitIdle(t, 0)
	e.clk.Step(2 * time.Minute)
	e.waitRequests(t, 1)
	deadline := time.Now().Add(waitFor)
	for e.r.Current() == first {
		if time.Now().After(deadline) {
			t.Fatal("renewed certificate never became current")
		}
		runtime.Gosched()
	}
	if got := e.r.Current().Leaf.NotAfter; !got.After(e.clk.Now().Add(50 * time.Minute)) {
		t.Errorf("renewed certificate expires %v, want the signer's, an hour from %v", got, e.clk.Now())
	}
	// Next renewal is at 80 % of the new one's lifetime: nothing before.
	e.waitIdle(t, 1)
	e.clk.Step(40 * time.Minute)
	e.waitIdle(t, 1)
	if !e.r.ServerHealthy() {
		t.Error("server not healthy after an issued certificate")
	}
	if n := e.fails.get(); n != 0 {
		t.Errorf("%d renewal failures counted", n)
	}
}

// TestRenewerRetries: a denied request is counted and asked again after
// 2, 4, 8, 16 and 32 seconds (up to 10 % later), then every 32 seconds,
// as upstream; once the signer issues, the certificate is current.
func TestRenewerRetries(t *testing.T) {
	e := newRenewerEnv(t, fixedTemplate(), false, nil, nil)
	e.signer.setDeny(true)
	e.run(t)
	e.waitIdle(t, 1)
	delays := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 32 * time.Second, 32 * time.Second}
	for i, d := range delays {
		if i == len(delays)-1 {
			e.signer.setDeny(false)
		}
		// Not before the delay...
		e.clk.Step(d - 10*time.Millisecond)
		e.waitIdle(t, i+1)
		// ...and at most 10 % after it (the last ones are not jittered).
		e.clk.Step(d/10 + 20*time.Millisecond)
		e.waitRequests(t, i+2)
		if i < len(delays)-1 {
			e.waitIdle(t, i+2)
		}
	}
	if n := e.fails.get(); n != len(delays) {
		t.Errorf("%d renewal failures counted, want %d", n, len(delays))
	}
	deadline := time.Now().Add(waitFor)
	for e.r.Current() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no certificate after the signer issued one")
		}
		runtime.Gosched()
	}
}

// TestRenewerTemplateChange: a changing template (the serving
// certificate) waits while there is nothing to ask for, asks as soon as
// there is, and asks again within a second when the template asks for a
// name the current certificate lacks; a template the certificate already
// covers asks nothing.
func TestRenewerTemplateChange(t *testing.T) {
	var mu sync.Mutex
	var names []string
	template := func() *x509.CertificateRequest {
		mu.Lock()
		defer mu.Unlock()
		if len(names) == 0 {
			return nil
		}
		return &x509.CertificateRequest{Subject: NodeSubject("node-1"), DNSNames: slices.Clone(names), IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}
	}
	setNames := func(n ...string) { mu.Lock(); names = n; mu.Unlock() }
	e := newRenewerEnv(t, template, true, nil, nil)
	e.run(t)
	e.waitIdle(t, 0)
	e.clk.Step(time.Second)
	e.waitIdle(t, 0)

	setNames("node-1")
	e.clk.Step(time.Second)
	reqs := e.waitRequests(t, 1)
	if !slices.Equal(reqs[0].DNSNames, []string{"node-1"}) {
		t.Errorf("first request names %v", reqs[0].DNSNames)
	}
	e.waitCurrent(t, "node-1")
	e.waitIdle(t, 1)
	e.clk.Step(time.Second)
	e.waitIdle(t, 1)

	setNames("node-1", "node-1.example")
	e.clk.Step(time.Second)
	reqs = e.waitRequests(t, 2)
	if !slices.Equal(reqs[1].DNSNames, []string{"node-1", "node-1.example"}) {
		t.Errorf("second request names %v", reqs[1].DNSNames)
	}
	e.waitCurrent(t, "node-1", "node-1.example")
	e.waitIdle(t, 2)

	// Fewer names than the certificate has: still covered.
	setNames("node-1.example")
	e.clk.Step(time.Second)
	e.waitIdle(t, 2)
}

// TestRunLeavesNothingRunning: when Run's context ends while the renewer
// waits for a certificate's renewal point, Run returns only after the
// renewal work has ended. client-go's certificate manager, used before,
// kept a goroutine asleep until the renewal point (most of a
// certificate's lifetime) after its Stop; the renewer also waits on the
// injected clock, which client-go's did not.
func TestRunLeavesNothingRunning(t *testing.T) {
	e := newBootstrapEnv(t)
	now := time.Now()
	cert, key := e.ca.pair(t, NodeSubject("node-1"), now.Add(-time.Minute), now.Add(time.Hour))
	certFile, keyFile := filepath.Join(e.dir, "c.pem"), filepath.Join(e.dir, "k.pem")
	writeFile(t, certFile, cert)
	writeFile(t, keyFile, key)
	writeKubeconfigFile(t, e.kubeconfig, e.ca.certPEM, "", certFile, keyFile)
	_, client := newSigner(t, e.ca)
	clk := clocktesting.NewFakeClock(now)
	r, err := NewClient(context.Background(), ClientOptions{
		Kubeconfig: e.kubeconfig,
		CertDir:    e.certDir,
		NodeName:   "node-1",
		Clock:      clk,
		NewClient:  func(*rest.Config) (kubeclient.Interface, error) { return kubeapifake.Wrap(client), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, nil) }()
	// Run's ticker and the renewer's wait for the renewal point.
	deadline := time.Now().Add(waitFor)
	for clk.Waiters() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters on the clock, want Run's check and the renewal's wait", clk.Waiters())
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	goleak.VerifyNone(t)
}

// TestJudgeServer: the server's health as the renewal's request errors
// show it.
func TestJudgeServer(t *testing.T) {
	gr := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	tests := []struct {
		name    string
		err     error
		healthy bool
	}{
		{"unauthorized", apierrors.NewUnauthorized("no"), true},
		{"forbidden", apierrors.NewForbidden(gr, "x", nil), true},
		{"not found", apierrors.NewNotFound(gr, "x"), true},
		{"server error", apierrors.NewInternalError(context.DeadlineExceeded), false},
		{"no answer", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &renewer{healthy: !tt.healthy}
			r.judgeServer(tt.err)
			if r.ServerHealthy() != tt.healthy {
				t.Errorf("healthy = %v, want %v", r.ServerHealthy(), tt.healthy)
			}
		})
	}
}
