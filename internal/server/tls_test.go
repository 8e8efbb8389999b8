package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

func TestNewTLSConfig(t *testing.T) {
	tests := []struct {
		name       string
		suites     []string
		minVersion string
		wantMin    uint16
		wantSuites []uint16
		wantErr    string
	}{
		// An empty tlsMinVersion is TLS 1.2 (k8s.io/component-base/cli/flag
		// TLSVersion).
		{"defaults", nil, "", tls.VersionTLS12, nil, ""},
		{"TLS 1.2 with suites", []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, "VersionTLS12",
			tls.VersionTLS12, []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, ""},
		{"TLS 1.3", nil, "VersionTLS13", tls.VersionTLS13, nil, ""},
		{"unknown suite", []string{"TLS_NOPE"}, "", 0, nil, "tlsCipherSuites"},
		{"unknown version", nil, "VersionTLS99", 0, nil, "tlsMinVersion"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := NewTLSConfig(TLSOptions{CertDir: dir, Hostname: "node-a", CipherSuites: tt.suites, MinVersion: tt.minVersion})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewTLSConfig: %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MinVersion != tt.wantMin || len(cfg.CipherSuites) != len(tt.wantSuites) {
				t.Fatalf("MinVersion %x suites %v, want %x %v", cfg.MinVersion, cfg.CipherSuites, tt.wantMin, tt.wantSuites)
			}
			for i := range tt.wantSuites {
				if cfg.CipherSuites[i] != tt.wantSuites[i] {
					t.Errorf("suite %d = %x, want %x", i, cfg.CipherSuites[i], tt.wantSuites[i])
				}
			}
			if cfg.ClientAuth != tls.RequestClientCert {
				t.Errorf("ClientAuth = %v, want RequestClientCert (other authentication methods stay possible)", cfg.ClientAuth)
			}
		})
	}
}

func TestSelfSignedCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	opts := TLSOptions{CertDir: dir, Hostname: "node-a", IPs: []net.IP{net.ParseIP("10.1.2.3")}}
	certFile, keyFile, err := EnsureServingCert(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream names: <cert-dir>/kubelet.crt and kubelet.key.
	if certFile != filepath.Join(dir, "kubelet.crt") || keyFile != filepath.Join(dir, "kubelet.key") {
		t.Errorf("files %s %s", certFile, keyFile)
	}
	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node-a", "10.1.2.3"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("certificate does not name %s: %v", name, err)
		}
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("key file %v mode %v, want private", err, fi.Mode())
	}
	// A second start reuses the files.
	if _, _, err := EnsureServingCert(opts); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(certFile)
	if !bytes.Equal(again, data) {
		t.Error("the self-signed certificate was made again instead of reused")
	}
	// Given files are used as they are, not made.
	if c, k, err := EnsureServingCert(TLSOptions{CertFile: "/a.crt", KeyFile: "/a.key", CertDir: dir}); err != nil || c != "/a.crt" || k != "/a.key" {
		t.Errorf("given files: %s %s %v", c, k, err)
	}
	if _, err := NewTLSConfig(TLSOptions{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}); err == nil || !strings.Contains(err.Error(), "tlsCertFile") {
		t.Errorf("missing tlsCertFile: %v, want an error naming the field", err)
	}
}

func TestTLSMinVersionEnforced(t *testing.T) {
	cfg, err := NewTLSConfig(TLSOptions{CertDir: t.TempDir(), Hostname: "node-a", MinVersion: "VersionTLS13"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()
	get := func(max uint16) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: max}}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(tls.VersionTLS12); err == nil {
		t.Error("a TLS 1.2 client was served with tlsMinVersion VersionTLS13")
	}
	if err := get(tls.VersionTLS13); err != nil {
		t.Errorf("a TLS 1.3 client: %v", err)
	}
}

// The serving key is the owner's alone and its directory writable by the
// owner alone, whatever the umask and whatever modes a key and directory
// made earlier had.
func TestSelfSignedKeyClosed(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{name: "new files with umask 0", setup: func(t *testing.T, dir string) {}},
		{name: "open key and world-writable directory reused", setup: func(t *testing.T, dir string) {
			if _, _, err := EnsureServingCert(TLSOptions{CertDir: dir, Hostname: "n"}); err != nil {
				t.Fatal(err)
			}
			_, keyFile := SelfSignedPaths(dir)
			if err := os.Chmod(keyFile, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "open key rewritten", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			_, keyFile := SelfSignedPaths(dir)
			if err := os.WriteFile(keyFile, []byte("not a key"), 0o666); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pki")
			tt.setup(t, dir)
			_, keyFile, err := EnsureServingCert(TLSOptions{CertDir: dir, Hostname: "n"})
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("cert dir mode %v (%v), want no write for group or others", fi.Mode().Perm(), err)
			}
		})
	}
}

// TestTLSGetCertificate: a GetCertificate function (a rotating or reloaded
// certificate) serves every handshake; no self-signed pair is made, and
// its error fails the handshake (upstream serves nothing until a
// bootstrapped serving certificate is issued).
func TestTLSGetCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	self, err := NewTLSConfig(TLSOptions{CertDir: filepath.Join(t.TempDir(), "self"), Hostname: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	var serve atomic.Pointer[tls.Certificate]
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if serve.Load() == nil {
			return nil, errors.New("no serving certificate available for the kubelet")
		}
		return serve.Load(), nil
	}
	cfg, err := NewTLSConfig(TLSOptions{CertDir: dir, Hostname: "node-a", GetCertificate: getCert})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 0 || cfg.GetCertificate == nil {
		t.Fatalf("Certificates %d, GetCertificate set %v", len(cfg.Certificates), cfg.GetCertificate != nil)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a self-signed pair was made in %s: %v", dir, err)
	}
	// A handshake over a pipe: httptest would add a certificate of its own.
	dial := func() (*tls.Conn, error) {
		sc, cc := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer sc.Close()
			_ = tls.Server(sc, cfg).Handshake()
		}()
		c := tls.Client(cc, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test inspects the served certificate
		err := c.Handshake()
		cc.Close()
		<-done
		return c, err
	}
	if _, err := dial(); err == nil {
		t.Fatal("handshake succeeded without a serving certificate")
	}
	serve.Store(&self.Certificates[0])
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ConnectionState().PeerCertificates[0].Subject.CommonName; !strings.HasPrefix(got, "node-b") {
		t.Errorf("served %q, want the GetCertificate pair", got)
	}
}
