package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"

	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/certificate"
	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/metrics"
)

// clientCertificate runs TLS bootstrap when --bootstrap-kubeconfig is set
// and, with rotateCertificates, returns the rotating client certificate
// the API clients present (nil otherwise: the kubeconfig's credentials
// are used as they are).
func (a *Agent) clientCertificate(ctx context.Context) (*certificate.Rotating, error) {
	if a.opts.BootstrapKubeconfig != "" {
		if err := certificate.Bootstrap(ctx, certificate.BootstrapOptions{
			Kubeconfig:          a.opts.Kubeconfig,
			BootstrapKubeconfig: a.opts.BootstrapKubeconfig,
			CertDir:             a.opts.CertDir,
			NodeName:            a.opts.NodeName,
			Clock:               a.clock,
		}); err != nil {
			return nil, err
		}
	}
	if !a.opts.Config.RotateCertificates {
		return nil, nil
	}
	metrics.RegisterClientCertificate()
	return certificate.NewClient(ctx, certificate.ClientOptions{
		Kubeconfig: a.opts.Kubeconfig,
		CertDir:    a.opts.CertDir,
		NodeName:   a.opts.NodeName,
		Clock:      a.clock,
		Metrics:    certificate.Metrics{TTL: metrics.ClientCertificateTTL, RenewErrors: metrics.ClientCertificateRenewErrors},
		ExitAfter:  certificate.DefaultExitAfter,
	})
}

// currentCertificate is the kubeclient option for a rotating client
// certificate; nil keeps the kubeconfig's.
func currentCertificate(r *certificate.Rotating) func() *tls.Certificate {
	if r == nil {
		return nil
	}
	return r.Current
}

// buildCertificates starts the client certificate's rotation (it closes
// the API connections when the certificate changes, so that new ones
// present the new one) and chooses the kubelet API's serving certificate:
// one from a kubelet-serving signing request with serverTLSBootstrap, the
// files tlsCertFile/tlsPrivateKeyFile read again when they change, or
// (neither) the self-signed one newKubeletAPI makes.
func (a *Agent) buildCertificates(ctx context.Context, c *components, conn *connection) error {
	cfg := a.opts.Config
	if cfg.RotateCertificates && conn.kube == nil {
		// As the kubelet, a standalone node runs without rotation.
		klog.FromContext(ctx).Info("Warning: rotateCertificates is ignored in standalone mode: there is no API server (--kubeconfig) to renew the client certificate with")
	}
	var runs []func(context.Context)
	if r := conn.clientCert; r != nil {
		failed := make(chan error, 1)
		c.certFailure = failed
		runs = append(runs, func(ctx context.Context) {
			if err := r.Run(ctx, conn.kube.CloseAllConns); err != nil {
				failed <- err
			}
		})
	}
	switch {
	case cfg.ServerTLSBootstrap:
		var kube *kubeclient.Client
		if kube = conn.kube; kube == nil {
			return errors.New("serverTLSBootstrap needs an API server (--kubeconfig)")
		}
		metrics.RegisterServerCertificate()
		ips := parseIPs(conn.nodeIPs)
		names := []string{a.opts.NodeName}
		r, err := certificate.NewServing(ctx, certificate.ServingOptions{
			Client:    kube.Kube,
			CertDir:   a.opts.CertDir,
			CertFile:  cfg.TLSCertFile,
			KeyFile:   cfg.TLSPrivateKeyFile,
			NodeName:  a.opts.NodeName,
			Addresses: func() ([]string, []net.IP) { return names, ips },
			Clock:     a.clock,
			Metrics: certificate.Metrics{TTL: metrics.ServerCertificateTTL, RenewErrors: metrics.ServerCertificateRenewErrors,
				Rotation: metrics.ServerCertificateRotation},
		})
		if err != nil {
			return err
		}
		c.servingCert = r.GetCertificate
		runs = append(runs, func(ctx context.Context) { _ = r.Run(ctx, nil) })
	case cfg.TLSCertFile != "":
		f, err := certificate.NewFiles(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
		if err != nil {
			return err
		}
		c.servingCert = f.GetCertificate
		runs = append(runs, f.Run)
	}
	if len(runs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() { run(ctx) })
	}
	c.closers = append(c.closers, func() { cancel(); wg.Wait() })
	return nil
}

// waitCertificateFailure returns the client certificate's failure (no
// valid one could be had, so heartlet exits as upstream), or nil when ctx
// ends first.
func waitCertificateFailure(ctx context.Context, failure <-chan error) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-failure:
		return err
	}
}

func parseIPs(ss []string) []net.IP {
	var ips []net.IP
	for _, s := range ss {
		if ip := net.ParseIP(s); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}
