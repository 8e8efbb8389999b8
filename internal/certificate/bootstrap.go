package certificate

import (
	"context"
	"crypto"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/heartlet/heartlet/internal/kubeclient"
)

// BootstrapOptions say where the node's credentials are and how to get
// them.
type BootstrapOptions struct {
	// Kubeconfig is --kubeconfig: used as it is while its client
	// certificate is valid, else written anew by Bootstrap.
	Kubeconfig string
	// BootstrapKubeconfig is --bootstrap-kubeconfig: the credentials (a
	// bootstrap token, usually) the signing request is made with.
	BootstrapKubeconfig string
	// CertDir is --cert-dir, where the client pair is stored.
	CertDir string
	// NodeName names the certificate's subject.
	NodeName string
	// Now is the clock certificates are checked against; nil is time.Now.
	Now func() time.Time
	// NewClient builds the client for the bootstrap credentials; nil
	// builds a clientset from the rest configuration.
	NewClient func(*rest.Config) (kubeclient.Interface, error)
	// Clock bounds the wait for the request to be issued
	// (BootstrapWaitTimeout); nil is the real clock.
	Clock clock.Clock
}

// BootstrapWaitTimeout is how long Bootstrap waits for its signing
// request to be issued before it gives up, as upstream's TLS bootstrap
// (one hour, pkg/kubelet/certificate/bootstrap): heartlet then exits and
// its supervisor starts it again.
const BootstrapWaitTimeout = time.Hour

// Bootstrap makes sure Kubeconfig holds usable client credentials, as the
// upstream kubelet's TLS bootstrap: when the file exists and its client
// certificate (if it has one) is valid now, nothing happens. Otherwise a
// valid pair already in CertDir is used, or a new key is made and a
// CertificateSigningRequest for CN=system:node:<node>, O=system:nodes
// with the kube-apiserver-client-kubelet signer is created with the
// bootstrap credentials and waited for until it is issued (or ctx ends).
// The pair is stored as kubelet-client-<timestamp>.pem with the symlink
// kubelet-client-current.pem, and Kubeconfig is written with the bootstrap
// kubeconfig's server and CA and that file as client certificate and key.
func Bootstrap(ctx context.Context, o BootstrapOptions) error {
	logger := klog.FromContext(ctx)
	now := o.Now
	if now == nil {
		now = time.Now
	}
	if o.BootstrapKubeconfig == "" {
		return errors.New("no --bootstrap-kubeconfig")
	}
	if o.Kubeconfig == "" {
		return errors.New("--bootstrap-kubeconfig needs --kubeconfig, the file to write")
	}
	valid, err := kubeconfigValid(o.Kubeconfig, now())
	if err != nil {
		return err
	}
	if valid {
		logger.V(2).Info("Kubeconfig has valid client credentials; TLS bootstrap not needed", "kubeconfig", o.Kubeconfig)
		return nil
	}
	logger.Info("Using bootstrap kubeconfig to get a client certificate", "bootstrapKubeconfig", o.BootstrapKubeconfig, "kubeconfig", o.Kubeconfig)

	bootCfg, err := loadRestConfig(o.BootstrapKubeconfig)
	if err != nil {
		return fmt.Errorf("bootstrap kubeconfig (--bootstrap-kubeconfig): %w", err)
	}
	if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
		return fmt.Errorf("certificate directory (--cert-dir): %w", err)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	store, err := newFileStore(logger.V(2), ClientPairPrefix, o.CertDir, "", "", clk)
	if err != nil {
		return fmt.Errorf("certificate directory (--cert-dir) %s: %w", o.CertDir, err)
	}
	pemPath := filepath.Join(o.CertDir, CurrentClientFile)
	if cert, err := store.Current(); err == nil && cert.Leaf != nil && stillValid(cert.Leaf, now()) {
		logger.Info("Using the client certificate already in the certificate directory", "path", pemPath, "notAfter", cert.Leaf.NotAfter)
		return writeKubeconfig(o.Kubeconfig, bootCfg, pemPath)
	}

	newClient := o.NewClient
	if newClient == nil {
		newClient = kubeclient.NewForConfig
	}
	client, err := newClient(bootCfg)
	if err != nil {
		return fmt.Errorf("bootstrap kubeconfig (--bootstrap-kubeconfig): client: %w", err)
	}
	keyPath := filepath.Join(o.CertDir, bootstrapKeyFile)
	// The key of an earlier attempt is reused, so that its request (whose
	// name derives from the key) is found again rather than made twice.
	keyPEM, _, err := keyutil.LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return fmt.Errorf("client certificate key %s: %w", keyPath, err)
	}
	certPEM, err := requestClientCertificate(ctx, clk, client.CertificatesV1().CertificateSigningRequests(), keyPEM, o.NodeName)
	if err != nil {
		return err
	}
	cert, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("store client certificate in %s: %w", o.CertDir, err)
	}
	logger.Info("Got the client certificate", "path", pemPath, "subject", cert.Leaf.Subject.String(), "notAfter", cert.Leaf.NotAfter)
	if err := writeKubeconfig(o.Kubeconfig, bootCfg, pemPath); err != nil {
		return err
	}
	if err := os.Remove(keyPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", keyPath, err)
	}
	return nil
}

// requestClientCertificate creates the node's client signing request for
// the key, or finds the one an earlier attempt made, and waits until it is
// issued.
func requestClientCertificate(ctx context.Context, clk clock.Clock, client csrClient, keyPEM []byte, nodeName string) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse client certificate key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("client certificate key of type %T cannot sign", key)
	}
	subject := NodeSubject(nodeName)
	csrPEM, err := certutil.MakeCSR(signer, &subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("make certificate signing request: %w", err)
	}
	name, err := requestName(signer.Public(), nodeName)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := requestCertificate(ctx, clk, client, csrRequest{
		name:       name,
		request:    csrPEM,
		signerName: ClientSigner,
		usages:     kubeletClientUsages(signer),
		key:        signer,
	})
	if err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	klog.FromContext(ctx).Info("Waiting for the client certificate signing request to be approved and issued", "csr", reqName, "signerName", ClientSigner, "timeout", BootstrapWaitTimeout)
	waitCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timedOut := fmt.Errorf("not issued within %s (approve it with kubectl certificate approve %s, or check the controller manager's approver)", BootstrapWaitTimeout, reqName)
	go func() {
		select {
		case <-waitCtx.Done():
		case <-clk.After(BootstrapWaitTimeout):
			cancel(timedOut)
		}
	}()
	certPEM, err := waitForCertificate(waitCtx, clk, client, reqName, reqUID)
	if err != nil {
		if cause := context.Cause(waitCtx); errors.Is(cause, timedOut) {
			err = cause
		}
		return nil, fmt.Errorf("certificate signing request %s was not issued: %w", reqName, err)
	}
	return certPEM, nil
}

// requestName names the node's client signing request after its public key
// and subject, so the same key always asks under the same name ("node-csr-"
// and an unpadded URL-safe base64 SHA-512 digest, as upstream's names look).
func requestName(pub crypto.PublicKey, nodeName string) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	sub := NodeSubject(nodeName)
	h := sha512.New512_256()
	for _, part := range [][]byte{der, []byte(sub.CommonName), []byte(strings.Join(sub.Organization, ",")), []byte(ClientSigner)} {
		// Each part is length-prefixed so no two inputs hash alike.
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return "node-csr-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), nil
}

// kubeconfigValid says whether the kubeconfig can be used as it is: it
// exists, loads, and its client certificate, if it names one, can be read
// and is valid at now. A kubeconfig without a client certificate (a token,
// say) is taken as valid, as upstream.
func kubeconfigValid(path string, now time.Time) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	// An unusable kubeconfig, or a client certificate that is missing,
	// unreadable or not valid now, is replaced by bootstrapping.
	cfg, err := loadRestConfig(path)
	if err != nil {
		return false, nil
	}
	if len(cfg.CertData) == 0 && cfg.CertFile == "" {
		return true, nil
	}
	data := cfg.CertData
	if len(data) == 0 {
		if data, err = os.ReadFile(cfg.CertFile); err != nil {
			return false, nil
		}
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil || len(certs) == 0 {
		return false, nil
	}
	for _, c := range certs {
		if !stillValid(c, now) {
			return false, nil
		}
	}
	return true, nil
}

func stillValid(c *x509.Certificate, now time.Time) bool {
	return !now.Before(c.NotBefore) && now.Before(c.NotAfter)
}

// loadRestConfig reads a kubeconfig file into a rest configuration.
func loadRestConfig(path string) (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, fmt.Errorf("%s: resolving relative paths: %w", path, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// writeKubeconfig writes the node's kubeconfig: the bootstrap
// configuration's server and CA, and pemPath as client certificate and key.
func writeKubeconfig(path string, boot *rest.Config, pemPath string) error {
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"default-cluster": {
			Server:                   boot.Host,
			InsecureSkipTLSVerify:    boot.Insecure,
			CertificateAuthority:     boot.CAFile,
			CertificateAuthorityData: boot.CAData,
			TLSServerName:            boot.ServerName,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {
			ClientCertificate: pemPath,
			ClientKey:         pemPath,
		}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster:  "default-cluster",
			AuthInfo: "default-auth",
		}},
		CurrentContext: "default-context",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("kubeconfig directory: %w", err)
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
