package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	cliflag "k8s.io/component-base/cli/flag"
)

// TLSOptions are the serving settings of the kubelet API.
type TLSOptions struct {
	// CertFile and KeyFile are tlsCertFile and tlsPrivateKeyFile; when
	// both are empty a self-signed certificate is made in CertDir.
	CertFile, KeyFile string
	// CertDir is --cert-dir.
	CertDir string
	// Hostname and IPs are the names of the self-signed certificate.
	Hostname string
	IPs      []net.IP
	// CipherSuites and MinVersion are tlsCipherSuites and tlsMinVersion
	// (Go names, as the kubelet accepts them).
	CipherSuites []string
	MinVersion   string
	// GetCertificate, when set, gives the serving certificate at every
	// handshake (a rotating one, or files read again when they change)
	// and nothing is loaded or made here.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientCAs are offered to clients as the acceptable issuers; the
	// authenticator verifies client certificates itself.
	ClientCAs *x509.CertPool
}

// SelfSignedPaths are the certificate and key the kubelet makes in its
// certificate directory when it is given none: kubelet.crt, kubelet.key.
func SelfSignedPaths(certDir string) (certFile, keyFile string) {
	return filepath.Join(certDir, "kubelet.crt"), filepath.Join(certDir, "kubelet.key")
}

// EnsureServingCert returns the certificate and key files to serve with:
// the given ones, or those in CertDir, made (self-signed, for the hostname
// and IPs) when they cannot be read, as the kubelet does.
func EnsureServingCert(o TLSOptions) (certFile, keyFile string, err error) {
	if o.CertFile != "" || o.KeyFile != "" {
		return o.CertFile, o.KeyFile, nil
	}
	if o.CertDir == "" {
		return "", "", fmt.Errorf("no tlsCertFile/tlsPrivateKeyFile and no --cert-dir")
	}
	certFile, keyFile = SelfSignedPaths(o.CertDir)
	if ok, _ := cert.CanReadCertAndKey(certFile, keyFile); ok {
		return certFile, keyFile, closeKey(o.CertDir, keyFile)
	}
	host := o.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, o.IPs, nil)
	if err != nil {
		return "", "", fmt.Errorf("generate self-signed serving certificate: %w", err)
	}
	if err := cert.WriteCert(certFile, certPEM); err != nil {
		return "", "", fmt.Errorf("write serving certificate (--cert-dir): %w", err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return "", "", fmt.Errorf("write serving key (--cert-dir): %w", err)
	}
	return certFile, keyFile, closeKey(o.CertDir, keyFile)
}

// closeKey makes the self-signed serving key readable by its owner alone
// (0600, also when the file existed with another mode, which writing it
// keeps) and takes write permission for group and others away from its
// directory, so no other local user can read or replace the key.
func closeKey(certDir, keyFile string) error {
	if err := os.Chmod(keyFile, 0o600); err != nil {
		return fmt.Errorf("set mode of serving key (--cert-dir): %w", err)
	}
	fi, err := os.Stat(certDir)
	if err != nil {
		return fmt.Errorf("check --cert-dir: %w", err)
	}
	// A sticky directory (such as /tmp) keeps others from replacing the
	// key already and is left alone.
	if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		if err := os.Chmod(certDir, perm&^0o022); err != nil {
			return fmt.Errorf("set mode of --cert-dir %s: %w", certDir, err)
		}
	}
	return nil
}

// NewTLSConfig loads or makes the serving certificate and returns the TLS
// configuration of the kubelet API: the configured cipher suites and
// minimum version, and client certificates requested but not required
// (requests without one may authenticate otherwise).
func NewTLSConfig(o TLSOptions) (*tls.Config, error) {
	suites, err := cliflag.TLSCipherSuites(o.CipherSuites)
	if err != nil {
		return nil, fmt.Errorf("tlsCipherSuites: %w", err)
	}
	minVersion, err := cliflag.TLSVersion(o.MinVersion)
	if err != nil {
		return nil, fmt.Errorf("tlsMinVersion: %w", err)
	}
	c := &tls.Config{
		GetCertificate: o.GetCertificate,
		CipherSuites:   suites,
		MinVersion:     minVersion,
		ClientAuth:     tls.RequestClientCert,
		ClientCAs:      o.ClientCAs,
		NextProtos:     []string{"h2", "http/1.1"},
	}
	if c.GetCertificate != nil {
		return c, nil
	}
	certFile, keyFile, err := EnsureServingCert(o)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsCertFile %s / tlsPrivateKeyFile %s: %w", certFile, keyFile, err)
	}
	c.Certificates = []tls.Certificate{pair}
	return c, nil
}
