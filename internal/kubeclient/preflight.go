package kubeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// Sentinel errors Load's failures wrap; check them with errors.Is.
var (
	// ErrUnreachable: no answer from the server (refused, timed out, no
	// route, name not found).
	ErrUnreachable = errors.New("API server unreachable")
	// ErrTLS: the TLS connection failed (unknown authority, certificate
	// not valid for the address, not a TLS server, handshake refused).
	ErrTLS = errors.New("TLS connection to the API server failed")
	// ErrUnauthorized: the server rejected the credentials (HTTP 401).
	ErrUnauthorized = errors.New("API server rejected the credentials")
	// ErrForbidden: the identity may not make the request (HTTP 403).
	ErrForbidden = errors.New("request forbidden by the API server")
)

// PreflightError is a failure of Load's checks against the server.
type PreflightError struct {
	// Kind is one of the sentinel errors, or nil for another failure.
	Kind error
	// Kubeconfig, Server and Identity say which configuration, which
	// server, and which user (as far as heartlet knows it).
	Kubeconfig, Server, Identity string
	// Err is the failure of the request.
	Err error

	msg string
}

func (e *PreflightError) Error() string { return e.msg }

// Unwrap returns the kind and the cause, so errors.Is and errors.As see both.
func (e *PreflightError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// preflight learns the server's version and heartlet's identity, each
// request bounded by timeout.
func (c *Client) preflight(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	raw, err := c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return c.preflightError("get /version", timeout, err)
	}
	var info apiversion.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return &PreflightError{Kubeconfig: c.Path, Server: c.Server, Identity: c.Identity, Err: err,
			msg: fmt.Sprintf("kubeconfig %s: API server %s: decoding /version: %v", c.Path, c.Server, err)}
	}
	c.ServerVersion = info.GitVersion

	review, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// A server without the API: /version already proved the
		// credentials are accepted (or anonymous), keep what the
		// kubeconfig says.
	case err != nil:
		return c.preflightError("create selfsubjectreviews.authentication.k8s.io", timeout, err)
	case review.Status.UserInfo.Username != "":
		c.Identity = review.Status.UserInfo.Username
	}
	return nil
}

// preflightError maps a failed request to an error that says what to fix.
func (c *Client) preflightError(what string, timeout time.Duration, err error) error {
	e := &PreflightError{Kubeconfig: c.Path, Server: c.Server, Identity: c.Identity, Err: err}
	detail, kind := classify(err)
	e.Kind = kind
	switch kind {
	case ErrUnauthorized:
		e.msg = fmt.Sprintf("kubeconfig %s: API server %s rejected the credentials of %s: %v", c.Path, c.Server, c.Identity, err)
	case ErrForbidden:
		e.msg = fmt.Sprintf("kubeconfig %s: %s is not allowed to %s at API server %s: %v", c.Path, c.Identity, what, c.Server, err)
	case ErrTLS:
		e.msg = fmt.Sprintf("kubeconfig %s: TLS connection to API server %s failed, %s: %v", c.Path, c.Server, detail, err)
	case ErrUnreachable:
		if detail == "timeout" {
			e.msg = fmt.Sprintf("kubeconfig %s: API server %s did not answer within %s: %v", c.Path, c.Server, timeout, err)
		} else {
			e.msg = fmt.Sprintf("kubeconfig %s: API server %s is unreachable: %v", c.Path, c.Server, err)
		}
	default:
		e.msg = fmt.Sprintf("kubeconfig %s: API server %s: %s as %s: %v", c.Path, c.Server, what, c.Identity, err)
	}
	return e
}

// classify returns, for TLS failures, what is wrong (for timeouts
// "timeout") and the sentinel for err.
func classify(err error) (detail string, kind error) {
	switch {
	case apierrors.IsUnauthorized(err):
		return "", ErrUnauthorized
	case apierrors.IsForbidden(err):
		return "", ErrForbidden
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return "", nil
	}

	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		recordHeader     tls.RecordHeaderError
		opErr            *net.OpError
	)
	switch {
	case errors.As(err, &unknownAuthority):
		return "the server's certificate is not signed by the kubeconfig's certificate-authority", ErrTLS
	case errors.As(err, &hostname):
		return "the server's certificate is not valid for the server's address", ErrTLS
	case errors.As(err, &invalid):
		return "the server's certificate is not valid", ErrTLS
	case errors.As(err, &verification):
		return "the server's certificate could not be verified", ErrTLS
	case errors.As(err, &recordHeader):
		return "the server does not speak TLS", ErrTLS
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return "the server refused the TLS handshake (check the client certificate)", ErrTLS
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http reports this one as text only.
		return "the server does not speak TLS", ErrTLS
	}

	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return "timeout", ErrUnreachable
	}
	return "", ErrUnreachable
}

// credentialIdentity describes who the kubeconfig's credentials claim to
// be, for error messages before the server said who heartlet is.
func credentialIdentity(cfg *rest.Config) string {
	switch {
	case len(cfg.CertData) > 0 || cfg.CertFile != "":
		data := cfg.CertData
		if len(data) == 0 {
			b, err := os.ReadFile(cfg.CertFile)
			if err != nil {
				return "client certificate " + cfg.CertFile
			}
			data = b
		}
		if cn := certCommonName(data); cn != "" {
			return cn
		}
		return "the client certificate"
	case cfg.ExecProvider != nil:
		return "the credentials of exec plugin " + cfg.ExecProvider.Command
	case cfg.BearerTokenFile != "":
		return "the bearer token in " + cfg.BearerTokenFile
	case cfg.BearerToken != "":
		return "the bearer token"
	case cfg.Username != "":
		return cfg.Username
	case cfg.AuthProvider != nil:
		return "the credentials of auth provider " + cfg.AuthProvider.Name
	}
	return "system:anonymous"
}

// certCommonName returns the subject CN of the first certificate in PEM
// data, the user name the API server sees.
func certCommonName(data []byte) string {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return ""
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return ""
		}
		return cert.Subject.CommonName
	}
}
