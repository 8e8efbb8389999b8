package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	certutil "k8s.io/client-go/util/cert"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/certificate"
	"github.com/heartlet/heartlet/internal/config"
)

func TestBuildCertificates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("node-a", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		kc          kubeletv1beta1.KubeletConfiguration
		wantErr     string
		wantServing bool
	}{
		{name: "self-signed", kc: kubeletv1beta1.KubeletConfiguration{}},
		{name: "files, reloaded", kc: kubeletv1beta1.KubeletConfiguration{TLSCertFile: certFile, TLSPrivateKeyFile: keyFile}, wantServing: true},
		{name: "files that do not load", kc: kubeletv1beta1.KubeletConfiguration{TLSCertFile: certFile, TLSPrivateKeyFile: certFile}, wantErr: "tlsCertFile"},
		// Standalone: nobody to ask for certificates. Without rotation the
		// node runs on (with a warning, as the kubelet without one); without
		// a serving certificate it could serve nothing, so that is refused.
		{name: "rotateCertificates standalone", kc: kubeletv1beta1.KubeletConfiguration{RotateCertificates: true}},
		{name: "serverTLSBootstrap standalone", kc: kubeletv1beta1.KubeletConfiguration{ServerTLSBootstrap: true}, wantErr: "serverTLSBootstrap needs an API server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := tt.kc
			a, err := New(&config.Options{Config: &kc, NodeName: "node-a", CertDir: filepath.Join(t.TempDir(), "pki")})
			if err != nil {
				t.Fatal(err)
			}
			c := &components{}
			err = a.buildCertificates(t.Context(), c, &connection{})
			defer c.close()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (c.servingCert != nil) != tt.wantServing {
				t.Fatalf("serving certificate function set %v, want %v", c.servingCert != nil, tt.wantServing)
			}
			if tt.wantServing {
				got, err := c.servingCert(&tls.ClientHelloInfo{})
				if err != nil || got.Leaf == nil || got.Leaf.Subject.CommonName == "" {
					t.Errorf("served %v, %v", got, err)
				}
			}
		})
	}
}

// TestWaitCertificateFailure: the client certificate's failure ends the
// agent's run with that error (so heartlet exits, as upstream); without
// one, the wait ends with the run, without an error.
func TestWaitCertificateFailure(t *testing.T) {
	failure := make(chan error, 1)
	failure <- certificate.ErrNoClientCertificate
	if err := waitCertificateFailure(t.Context(), failure); !errors.Is(err, certificate.ErrNoClientCertificate) {
		t.Errorf("with a failure: %v, want ErrNoClientCertificate", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := waitCertificateFailure(ctx, nil); err != nil {
		t.Errorf("without rotation, after the run: %v, want nil", err)
	}
	if err := waitCertificateFailure(ctx, make(chan error)); err != nil {
		t.Errorf("no failure, after the run: %v, want nil", err)
	}
}
