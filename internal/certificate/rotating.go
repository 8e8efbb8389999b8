package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeclient"
)

// ErrNoServingCertificate is what a TLS handshake fails with while the
// serving certificate asked for with serverTLSBootstrap is not issued yet.
var ErrNoServingCertificate = errors.New("no serving certificate available for the kubelet")

// ErrNoClientCertificate is what Run of the client certificate returns
// when, with ExitAfter set, no valid client certificate could be had for
// that long while the API server answered: as upstream's kubelet, heartlet
// then exits so that its supervisor restarts it and TLS bootstrap (or a
// new kubeconfig laid down meanwhile) can give it one.
var ErrNoClientCertificate = errors.New("no valid client certificate")

// DefaultCheckInterval is how often Run looks for a rotated certificate.
const DefaultCheckInterval = time.Second

// DefaultExitAfter is upstream's bound on running without a valid client
// certificate while the API server answers (cmd/kubelet/app passes five
// minutes to the rotating transport).
const DefaultExitAfter = 5 * time.Minute

// Rotating is a certificate kept current by a renewer: it asks for a new
// one through a CertificateSigningRequest when there is none and at a
// random point between 70 % and 90 % of the current one's lifetime, and
// stores each in the certificate directory. Current and GetCertificate are
// safe for concurrent use; Run is called once.
type Rotating struct {
	mgr      certManager
	name     string
	clock    clock.WithTicker
	interval time.Duration
	ttl      Gauge
	// exitAfter, when positive, ends Run with ErrNoClientCertificate; see
	// ClientOptions.ExitAfter.
	exitAfter time.Duration
}

// Metrics are where a rotating certificate reports; nil fields are left
// out.
type Metrics struct {
	// TTL is set to the seconds until the current certificate expires
	// (+Inf when there is none) at every check of Run.
	TTL Gauge
	// RenewErrors counts failed renewals.
	RenewErrors Counter
	// Rotation observes how long each replaced certificate lived.
	Rotation Histogram
}

// Gauge is the part of a Prometheus gauge Metrics uses.
type Gauge interface{ Set(float64) }

// Counter is the part of a Prometheus counter Metrics uses.
type Counter interface{ Inc() }

// Histogram is the part of a Prometheus histogram Metrics uses.
type Histogram interface{ Observe(float64) }

// ClientOptions configure the client certificate's rotation
// (rotateCertificates).
type ClientOptions struct {
	// Kubeconfig is the node's kubeconfig (after Bootstrap): its client
	// certificate, embedded or in files, is the starting one, and its
	// server and CA are where renewals are asked.
	Kubeconfig string
	// CertDir is --cert-dir, where renewed pairs are stored
	// (kubelet-client-*.pem).
	CertDir string
	// NodeName names the certificate's subject.
	NodeName string
	// NewClient builds the clientset a renewal is asked with (with the
	// current certificate); nil builds a clientset.
	NewClient func(*rest.Config) (kubeclient.Interface, error)
	// Clock drives Run's checks and the renewals; nil is the real clock.
	Clock clock.WithTicker
	// Metrics are the client certificate's.
	Metrics Metrics
	// ExitAfter, when positive, makes Run return ErrNoClientCertificate
	// when there has been no current certificate for that long, or the
	// current one has expired, and the API server is healthy (it answered
	// the manager's last request). While the server does not answer, Run
	// logs the problem and goes on, as upstream. Zero never ends Run.
	ExitAfter time.Duration
}

// NewClient returns the rotating client certificate, as upstream's: the
// kubeconfig's certificate files (or the current pair in CertDir, if
// present) are the starting certificate; an embedded certificate is
// stored in CertDir and rotated at once. Nothing is asked until Run.
func NewClient(ctx context.Context, o ClientOptions) (*Rotating, error) {
	cfg, err := loadRestConfig(o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig (--kubeconfig): %w", err)
	}
	if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate directory (--cert-dir): %w", err)
	}
	logger := klog.FromContext(ctx)
	store, err := newFileStore(logger.V(2), ClientPairPrefix, o.CertDir, cfg.CertFile, cfg.KeyFile, o.Clock)
	if err != nil {
		return nil, fmt.Errorf("certificate directory (--cert-dir) %s: %w", o.CertDir, err)
	}
	newClient := o.NewClient
	if newClient == nil {
		newClient = kubeclient.NewForConfig
	}
	subject := NodeSubject(o.NodeName)
	mgr, err := newRenewer(logger.V(2), renewerConfig{
		name:  "kubelet-client",
		store: store,
		client: func(current *tls.Certificate) (csrClient, error) {
			c, err := withClientCert(cfg, current)
			if err != nil {
				return nil, err
			}
			kube, err := newClient(c)
			if err != nil {
				return nil, err
			}
			return kube.CertificatesV1().CertificateSigningRequests(), nil
		},
		template:      func() *x509.CertificateRequest { return &x509.CertificateRequest{Subject: subject} },
		signer:        ClientSigner,
		usages:        kubeletClientUsages,
		bootstrapCert: cfg.CertData,
		bootstrapKey:  cfg.KeyData,
		renewFailure:  o.Metrics.RenewErrors,
		rotation:      o.Metrics.Rotation,
		clock:         o.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate (--cert-dir %s): %w", o.CertDir, err)
	}
	r := newRotating(mgr, "client", o.Clock, o.Metrics.TTL)
	r.exitAfter = o.ExitAfter
	return r, nil
}

// withClientCert is cfg authenticating with the given pair instead of its
// own credentials; with none it is cfg as it is.
func withClientCert(cfg *rest.Config, current *tls.Certificate) (*rest.Config, error) {
	if current == nil {
		return cfg, nil
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(current.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("encode client key: %w", err)
	}
	var certPEM []byte
	for _, der := range current.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der})...)
	}
	c := rest.AnonymousClientConfig(cfg)
	c.CertData, c.KeyData = certPEM, keyPEM
	return c, nil
}

// ServingOptions configure the serving certificate's bootstrap and
// rotation (serverTLSBootstrap).
type ServingOptions struct {
	// Client is what the signing requests are made with.
	Client kubeclient.Interface
	// CertDir is --cert-dir, where the pairs are stored
	// (kubelet-server-*.pem).
	CertDir string
	// CertFile and KeyFile (tlsCertFile, tlsPrivateKeyFile) are the
	// starting pair when CertDir has none, as upstream.
	CertFile, KeyFile string
	// NodeName names the certificate's subject.
	NodeName string
	// Addresses are the names and IPs the certificate is for, as the
	// node reports them; nothing is asked while both are empty.
	Addresses func() (dnsNames []string, ips []net.IP)
	// Clock drives Run's checks and the renewals; nil is the real clock.
	Clock clock.WithTicker
	// Metrics are the serving certificate's.
	Metrics Metrics
}

// NewServing returns the rotating serving certificate, asked for from the
// kubelet-serving signer for the node's addresses. Until one is issued,
// GetCertificate fails every handshake, as upstream.
func NewServing(ctx context.Context, o ServingOptions) (*Rotating, error) {
	if o.Client == nil {
		return nil, errors.New("serverTLSBootstrap needs an API server (--kubeconfig)")
	}
	if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate directory (--cert-dir): %w", err)
	}
	logger := klog.FromContext(ctx)
	store, err := newFileStore(logger.V(2), ServerPairPrefix, o.CertDir, o.CertFile, o.KeyFile, o.Clock)
	if err != nil {
		return nil, fmt.Errorf("certificate directory (--cert-dir) %s: %w", o.CertDir, err)
	}
	subject := NodeSubject(o.NodeName)
	csrs := o.Client.CertificatesV1().CertificateSigningRequests()
	mgr, err := newRenewer(logger.V(2), renewerConfig{
		name:   "kubelet-serving",
		store:  store,
		client: func(*tls.Certificate) (csrClient, error) { return csrs, nil },
		template: func() *x509.CertificateRequest {
			names, ips := o.Addresses()
			if len(names) == 0 && len(ips) == 0 {
				return nil
			}
			return &x509.CertificateRequest{Subject: subject, DNSNames: names, IPAddresses: ips}
		},
		dynamic:      true,
		signer:       ServingSigner,
		usages:       kubeletServingUsages,
		renewFailure: o.Metrics.RenewErrors,
		rotation:     o.Metrics.Rotation,
		clock:        o.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate (--cert-dir %s): %w", o.CertDir, err)
	}
	return newRotating(mgr, "serving", o.Clock, o.Metrics.TTL), nil
}

func newRotating(mgr certManager, name string, c clock.WithTicker, ttl Gauge) *Rotating {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Rotating{mgr: mgr, name: name, clock: c, interval: DefaultCheckInterval, ttl: ttl}
}

// Current is the certificate in use: nil when there is none yet or it has
// expired.
func (r *Rotating) Current() *tls.Certificate { return r.mgr.Current() }

// GetCertificate is the serving side's tls.Config.GetCertificate: the
// current certificate, or ErrNoServingCertificate.
func (r *Rotating) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.mgr.Current(); c != nil {
		return c, nil
	}
	return nil, ErrNoServingCertificate
}

// Run starts the renewer and, until ctx ends, calls onRotate
// (if not nil) each time the current certificate is replaced; the client
// side closes its connections there so that new ones present the new
// certificate. It stops the renewer and returns nil when ctx ends, or
// ErrNoClientCertificate as ClientOptions.ExitAfter says.
func (r *Rotating) Run(ctx context.Context, onRotate func()) error {
	logger := klog.FromContext(ctx).WithValues("certificate", r.name)
	last := r.mgr.Current()
	r.reportTTL(last)
	mctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.mgr.run(mctx)
	}()
	// The manager's work ends before Run returns.
	defer func() { stop(); <-stopped }()
	// The time a valid certificate was last seen starts before the ticker
	// does: a tick can never be measured against a later start.
	lastValid := r.clock.Now()
	t := r.clock.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		cur := r.mgr.Current()
		if r.exitAfter > 0 {
			var err error
			if lastValid, err = r.checkValid(logger, cur, lastValid); err != nil {
				return err
			}
		}
		r.reportTTL(cur)
		if cur == nil || cur == last {
			continue
		}
		last = cur
		logger.Info("Certificate rotated", "subject", cur.Leaf.Subject.String(), "notAfter", cur.Leaf.NotAfter)
		if onRotate != nil {
			onRotate()
		}
	}
}

// checkValid is one check of ExitAfter: it returns when a valid
// certificate was last seen, or ErrNoClientCertificate when heartlet has
// to exit.
func (r *Rotating) checkValid(logger klog.Logger, cur *tls.Certificate, lastValid time.Time) (time.Time, error) {
	now := r.clock.Now()
	var problem string
	switch {
	case cur == nil:
		if now.Sub(lastValid) <= r.exitAfter {
			return lastValid, nil
		}
		problem = fmt.Sprintf("none for %s", r.exitAfter)
	case cur.Leaf != nil && now.After(cur.Leaf.NotAfter):
		problem = fmt.Sprintf("the current one expired at %s", cur.Leaf.NotAfter.UTC().Format(time.RFC3339))
		lastValid = now
	default:
		return now, nil
	}
	if !r.mgr.ServerHealthy() {
		logger.Error(nil, "No valid client certificate, but the API server does not answer; a restart may be needed to get new initial credentials", "problem", problem)
		return lastValid, nil
	}
	return lastValid, fmt.Errorf("%w: %s and the API server answers; exiting so that a restart can bootstrap one (--bootstrap-kubeconfig) or load a new --kubeconfig", ErrNoClientCertificate, problem)
}

// reportTTL sets the TTL gauge for c: seconds until it expires, +Inf
// without one.
func (r *Rotating) reportTTL(c *tls.Certificate) {
	if r.ttl == nil {
		return
	}
	if c == nil || c.Leaf == nil {
		r.ttl.Set(math.Inf(1))
		return
	}
	r.ttl.Set(c.Leaf.NotAfter.Sub(r.clock.Now()).Seconds())
}
