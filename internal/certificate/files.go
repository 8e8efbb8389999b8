package certificate

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Files is a serving certificate and key read from files
// (tlsCertFile, tlsPrivateKeyFile) and read again when they change, as
// upstream's ReloadKubeletServerCertificateFile: Run reads both files every
// DefaultCheckInterval, and a new content is served once both files are
// non-empty and the key is the certificate's. Anything else (a missing
// file, a certificate replaced before its key) keeps the pair before it.
// GetCertificate is safe for concurrent use; Run is called once.
type Files struct {
	certFile, keyFile string
	clock             clock.Clock
	interval          time.Duration
	// current is the pair served, with the file contents it came from.
	current atomic.Pointer[filesPair]
}

type filesPair struct {
	cert, key []byte
	pair      *tls.Certificate
}

// NewFiles reads the pair once; a missing or mismatched pair is an error.
// Run then checks the files on the real clock.
func NewFiles(certFile, keyFile string) (*Files, error) {
	return newFiles(certFile, keyFile, clock.RealClock{})
}

func newFiles(certFile, keyFile string, clk clock.Clock) (*Files, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("serving certificate needs both tlsCertFile (%q) and tlsPrivateKeyFile (%q)", certFile, keyFile)
	}
	f := &Files{certFile: certFile, keyFile: keyFile, clock: clk, interval: DefaultCheckInterval}
	if _, err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// load reads the files and serves their pair if it differs from the
// current one; it says whether it did. Errors name the files.
func (f *Files) load() (bool, error) {
	cert, err := os.ReadFile(f.certFile)
	if err != nil {
		return false, fmt.Errorf("tlsCertFile: %w", err)
	}
	key, err := os.ReadFile(f.keyFile)
	if err != nil {
		return false, fmt.Errorf("tlsPrivateKeyFile: %w", err)
	}
	if cur := f.current.Load(); cur != nil && bytes.Equal(cur.cert, cert) && bytes.Equal(cur.key, key) {
		return false, nil
	}
	if len(cert) == 0 || len(key) == 0 {
		return false, fmt.Errorf("tlsCertFile %s / tlsPrivateKeyFile %s: empty file", f.certFile, f.keyFile)
	}
	pair, err := parsePair(cert, key)
	if err != nil {
		return false, fmt.Errorf("tlsCertFile %s / tlsPrivateKeyFile %s: %w", f.certFile, f.keyFile, err)
	}
	f.current.Store(&filesPair{cert: cert, key: key, pair: pair})
	return true, nil
}

// Run checks the files every interval until ctx ends. A pair that cannot
// be served is logged once for each distinct error.
func (f *Files) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("certFile", f.certFile, "keyFile", f.keyFile)
	// A timer reset after each check rather than a ticker: Run leaves
	// nothing on its clock once it returns.
	t := f.clock.NewTimer(f.interval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		changed, err := f.load()
		switch {
		case err != nil && err.Error() != lastErr:
			logger.Error(err, "Serving certificate files cannot be loaded; keeping the pair loaded before")
			lastErr = err.Error()
		case err == nil:
			lastErr = ""
		}
		if changed {
			leaf := f.current.Load().pair.Leaf
			logger.Info("Loaded a new serving certificate", "subject", leaf.Subject.String(), "notAfter", leaf.NotAfter)
		}
		t.Reset(f.interval)
	}
}

// GetCertificate is tls.Config.GetCertificate: the pair last loaded.
func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.current.Load().pair, nil
}
