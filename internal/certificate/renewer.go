package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// certManager keeps a certificate current. Rotating runs it.
//
// Contract: run renews the certificate until ctx ends and returns only
// when everything it started has ended, so that stopping it leaves nothing
// behind. Current and ServerHealthy are safe to call at any time, also
// before and after run.
type certManager interface {
	run(ctx context.Context)
	// Current is the certificate in use: nil when there is none or it has
	// expired.
	Current() *tls.Certificate
	// ServerHealthy says whether the API server answered the last request
	// in a way that shows it works (as upstream's certificate manager
	// judges it).
	ServerHealthy() bool
}

// Renewal timing, as upstream's certificate manager.
const (
	// renewalWaitTimeout bounds the wait for one request to be issued.
	renewalWaitTimeout = 15 * time.Minute
	// retryFirst, doubled retrySteps times with 10 % jitter, spaces the
	// first retries of a failed renewal; after them retries come every
	// retryAfter.
	retryFirst = 2 * time.Second
	retrySteps = 5
	retryAfter = 32 * time.Second
	// templateCheck is how often a renewer with a changing template (the
	// serving certificate, whose names follow the node's addresses) looks
	// whether the current certificate still covers it.
	templateCheck = time.Second
)

// renewerConfig is what a renewer asks with and stores to.
type renewerConfig struct {
	// name is the certificate's name in logs ("kubelet-client").
	name string
	// store holds the current pair (kubelet-*-current.pem).
	store pairStore
	// bootstrapCert and bootstrapKey, when set, are the starting pair
	// if the store has none: it is stored and renewed at once.
	bootstrapCert, bootstrapKey []byte
	// template is what to ask for; nil means nothing can be asked yet.
	template func() *x509.CertificateRequest
	// dynamic says the template can change while the certificate is
	// valid; the renewer then checks it every templateCheck.
	dynamic bool
	signer  string
	usages  func(privateKey any) []certificatesv1.KeyUsage
	// client is what a request is made with, given the current
	// certificate.
	client func(current *tls.Certificate) (csrClient, error)
	// renewFailure and rotation are the metrics; nil is left out.
	renewFailure Counter
	rotation     Histogram
	clock        clock.WithTicker
}

// renewer is heartlet's certificate manager: it asks for a new
// certificate through a CertificateSigningRequest when there is none, when
// the current one no longer covers the template, and at a random point
// between 70 % and 90 % of the current one's lifetime, as upstream's
// (client-go's util/certificate, whose background work does not end with
// its Stop).
type renewer struct {
	renewerConfig
	// jitter picks the fraction of a certificate's lifetime after which it
	// is renewed; tests replace it.
	jitter func() float64

	mu      sync.Mutex
	cert    *tls.Certificate
	healthy bool
	// force renews at once, whatever the current certificate's lifetime.
	force bool
	// requested is the template of the last request made.
	requested *x509.CertificateRequest
}

// newRenewer loads the current certificate as upstream does: the store's
// pair if it has one that has not expired, otherwise the bootstrap pair
// (stored, and renewed at once), otherwise none (asked for at once).
func newRenewer(logger klog.Logger, c renewerConfig) (*renewer, error) {
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	r := &renewer{renewerConfig: c, jitter: func() float64 { return 0.7 + 0.2*randv2.Float64() }}
	cur, err := c.store.Current()
	switch {
	case err == nil && cur.Leaf != nil && c.clock.Now().Before(cur.Leaf.NotAfter):
		r.cert = cur
		return r, nil
	case err != nil && !errors.Is(err, errNoCertKey):
		return nil, err
	}
	r.force = true
	if c.bootstrapCert == nil || c.bootstrapKey == nil {
		return r, nil
	}
	boot, err := tls.X509KeyPair(c.bootstrapCert, c.bootstrapKey)
	if err != nil {
		return nil, fmt.Errorf("starting certificate: %w", err)
	}
	if boot.Leaf == nil {
		if boot.Leaf, err = x509.ParseCertificate(boot.Certificate[0]); err != nil {
			return nil, fmt.Errorf("starting certificate: %w", err)
		}
	}
	if _, err := c.store.Update(c.bootstrapCert, c.bootstrapKey); err != nil {
		logger.Error(err, "Could not store the starting certificate", "certificate", c.name)
	}
	r.cert = &boot
	return r, nil
}

// Current is the certificate in use: nil when there is none or it has
// expired.
func (r *renewer) Current() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert == nil || r.cert.Leaf == nil || !r.clock.Now().Before(r.cert.Leaf.NotAfter) {
		return nil
	}
	return r.cert
}

// ServerHealthy says whether the API server answered the last request as
// a working server does.
func (r *renewer) ServerHealthy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.healthy
}

func (r *renewer) run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("certificate", r.name)
	ctx = klog.NewContext(ctx, logger)
	for {
		if !r.waitForDeadline(ctx) {
			return
		}
		if r.template() == nil {
			// Nothing to ask for yet (the node has no address): look
			// again shortly.
			if !r.sleep(ctx, templateCheck) {
				return
			}
			continue
		}
		if !r.renewUntilDone(ctx) {
			return
		}
	}
}

// waitForDeadline waits until the current certificate is due for
// renewal, or, with a dynamic template, until the template asks for what
// the certificate does not cover. It is false when ctx ended.
func (r *renewer) waitForDeadline(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	deadline := r.deadline()
	wait := deadline.Sub(r.clock.Now())
	if wait <= 0 {
		return ctx.Err() == nil
	}
	logger.V(2).Info("Waiting for the next certificate renewal", "deadline", deadline)
	timer := r.clock.NewTimer(wait)
	defer timer.Stop()
	// A timer made again for each check, not a ticker: a renewer
	// leaves nothing on its clock once it stops waiting.
	var check <-chan time.Time
	var checkTimer clock.Timer
	if r.dynamic {
		checkTimer = r.clock.NewTimer(templateCheck)
		defer checkTimer.Stop()
		check = checkTimer.C()
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C():
			return true
		case <-check:
			if r.templateChanged() {
				logger.V(2).Info("Certificate template changed, renewing")
				return true
			}
			checkTimer.Reset(templateCheck)
		}
	}
}

// deadline is when the current certificate is to be renewed.
func (r *renewer) deadline() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.force || !r.satisfiesLocked(r.template()) {
		r.force = false
		return now
	}
	leaf := r.cert.Leaf
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(time.Duration(float64(life) * r.jitter()))
}

// templateChanged says whether the current certificate does not cover the
// template and the template is not what was last asked for.
func (r *renewer) templateChanged() bool {
	tmpl := r.template()
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.satisfiesLocked(tmpl) && !reflect.DeepEqual(r.requested, tmpl)
}

// satisfiesLocked says whether the current certificate has the
// template's common name and all its names, IPs and organizations (extra
// ones in the certificate do not matter), as upstream.
func (r *renewer) satisfiesLocked(tmpl *x509.CertificateRequest) bool {
	if r.cert == nil || r.cert.Leaf == nil {
		return false
	}
	if tmpl == nil {
		return true
	}
	leaf := r.cert.Leaf
	if tmpl.Subject.CommonName != leaf.Subject.CommonName {
		return false
	}
	for _, n := range tmpl.DNSNames {
		if !slices.Contains(leaf.DNSNames, n) {
			return false
		}
	}
	for _, ip := range tmpl.IPAddresses {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	for _, o := range tmpl.Subject.Organization {
		if !slices.Contains(leaf.Subject.Organization, o) {
			return false
		}
	}
	return true
}

// renewUntilDone renews the certificate, retrying failures after 2, 4,
// 8, 16 and 32 seconds (10 % jitter) and then every 32 seconds. It is
// false when ctx ended first.
func (r *renewer) renewUntilDone(ctx context.Context) bool {
	delay := retryFirst
	for step := 0; ; step++ {
		if r.renew(ctx) {
			return true
		}
		next := retryAfter
		if step < retrySteps {
			next = delay + time.Duration(randv2.Float64()*0.1*float64(delay))
			delay *= 2
		}
		if !r.sleep(ctx, next) {
			return false
		}
	}
}

// sleep waits d on the renewer's clock; false when ctx ended first.
func (r *renewer) sleep(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// renew asks for one new certificate and waits for it: a new key, a
// request for the template, the issued certificate stored as the current
// pair. Each failure is logged and counted.
func (r *renewer) renew(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	if err := r.tryRenew(ctx); err != nil {
		if ctx.Err() != nil {
			return false
		}
		logger.Error(err, "Certificate renewal failed")
		if r.renewFailure != nil {
			r.renewFailure.Inc()
		}
		return false
	}
	return true
}

func (r *renewer) tryRenew(ctx context.Context) error {
	tmpl := r.template()
	if tmpl == nil {
		return errors.New("nothing to ask for yet: no template")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("new private key: %w", err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("encode private key: %w", err)
	}
	csrPEM, err := certutil.MakeCSRFromTemplate(key, tmpl)
	if err != nil {
		return fmt.Errorf("certificate request: %w", err)
	}
	client, err := r.client(r.Current())
	if err != nil {
		return fmt.Errorf("client to ask with: %w", err)
	}
	name, uid, err := requestCertificate(ctx, r.clock, client, csrRequest{request: csrPEM, signerName: r.signer, usages: r.usages(key), key: key})
	if err != nil {
		r.judgeServer(err)
		return fmt.Errorf("request a certificate from %s: %w", r.signer, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, renewalWaitTimeout)
	defer cancel()
	r.mu.Lock()
	r.requested = tmpl
	r.mu.Unlock()
	watched := make(chan struct{})
	if r.dynamic {
		// A template that changes while the request waits makes it moot:
		// stop waiting and ask again, as upstream.
		go func() {
			defer close(watched)
			r.cancelOnTemplateChange(waitCtx, cancel)
		}()
	} else {
		close(watched)
	}
	certPEM, err := waitForCertificate(waitCtx, r.clock, client, name, uid)
	cancel()
	<-watched
	if err != nil {
		return fmt.Errorf("certificate request %s not issued: %w", name, err)
	}
	cert, err := r.store.Update(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("store the new certificate: %w", err)
	}
	r.mu.Lock()
	old := r.cert
	r.cert, r.healthy = cert, true
	r.mu.Unlock()
	if old != nil && old.Leaf != nil && r.rotation != nil {
		r.rotation.Observe(r.clock.Since(old.Leaf.NotBefore).Seconds())
	}
	klog.FromContext(ctx).V(2).Info("Certificate renewed", "notAfter", cert.Leaf.NotAfter)
	return nil
}

// cancelOnTemplateChange ends the wait for a request (cancel) when the
// template changes; it ends with ctx.
func (r *renewer) cancelOnTemplateChange(ctx context.Context, cancel context.CancelFunc) {
	t := r.clock.NewTimer(templateCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if r.templateChanged() {
				cancel()
				return
			}
			t.Reset(templateCheck)
		}
	}
}

// judgeServer infers the API server's health from a request's error, as
// upstream: an authentication failure (a TLS-terminating proxy may answer
// it) or a not-found or forbidden answer come from a working server; a
// 5xx from something in between; anything else (no answer) from a server
// that does not work.
func (r *renewer) judgeServer(err error) {
	healthy := false
	switch {
	case apierrors.IsUnauthorized(err):
		healthy = true
	case apierrors.IsUnexpectedServerError(err):
	default:
		healthy = apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
	}
	r.mu.Lock()
	r.healthy = healthy
	r.mu.Unlock()
}
