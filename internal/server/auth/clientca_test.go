package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

// issue signs a certificate for cn, with tmpl's other fields, by ca; a
// template that is a CA gives the issued certificate as a testCA.
func (ca *testCA) issue(t *testing.T, cn string, tmpl *x509.Certificate) (tls.Certificate, *testCA) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.Subject = pkix.Name{CommonName: cn}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		&testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// certUser is the user the client CA's certificate authenticator makes of
// a client presenting chain, "" when it makes none.
func certUser(t *testing.T, ca *clientCA, chain ...tls.Certificate) string {
	t.Helper()
	resp, ok, err := x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion).
		AuthenticateRequest(peerRequest(t, "/pods", chain...))
	if err != nil || !ok {
		return ""
	}
	return resp.User.GetName()
}

// Only certificates for client authentication that chain to the client CA
// and are valid now authenticate.
func TestClientCAVerification(t *testing.T) {
	ca, foreign := newTestCA(t, "cluster-ca"), newTestCA(t, "foreign-ca")
	file := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, file, ca.pem)
	c, err := newClientCA(file, clocktesting.NewFakeClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	intermediateCert, intermediate := ca.issue(t, "intermediate", &x509.Certificate{
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	})
	viaIntermediate, _ := intermediate.issue(t, "carol", &x509.Certificate{ExtKeyUsage: clientAuth})
	serverOnly, _ := ca.issue(t, "server", &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	expired, _ := ca.issue(t, "late", &x509.Certificate{
		ExtKeyUsage: clientAuth, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
	})
	noName, _ := ca.issue(t, "", &x509.Certificate{ExtKeyUsage: clientAuth})

	tests := []struct {
		name  string
		chain []tls.Certificate
		want  string
	}{
		{"signed by the client CA", []tls.Certificate{ca.client(t, "alice")}, "alice"},
		{"signed by another CA", []tls.Certificate{foreign.client(t, "alice")}, ""},
		{"through an intermediate the client presents", []tls.Certificate{viaIntermediate, intermediateCert}, "carol"},
		{"through an intermediate the client does not present", []tls.Certificate{viaIntermediate}, ""},
		{"for server authentication only", []tls.Certificate{serverOnly}, ""},
		{"expired", []tls.Certificate{expired}, ""},
		{"without a common name", []tls.Certificate{noName}, ""},
		{"no certificate", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := certUser(t, c, tt.chain...); got != tt.want {
				t.Errorf("user %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewClientCAErrors(t *testing.T) {
	dir := t.TempDir()
	empty, garbage := filepath.Join(dir, "empty.crt"), filepath.Join(dir, "garbage.crt")
	writeFile(t, empty, nil)
	writeFile(t, garbage, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
	for _, f := range []string{filepath.Join(dir, "missing.crt"), empty, garbage} {
		if _, err := newClientCA(f, clocktesting.NewFakeClock(time.Now())); err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("newClientCA(%s) = %v, want an error naming the file", f, err)
		}
	}
}

func x509Only(file string) kubeletv1beta1.KubeletAuthentication {
	return kubeletv1beta1.KubeletAuthentication{X509: kubeletv1beta1.KubeletX509Authentication{ClientCAFile: file}}
}

var alwaysAllow = kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow}

// A new CA file replaces the bundle: the old CA's clients are refused, the
// new one's accepted; a file that cannot be used keeps the bundle.
func TestClientCAReload(t *testing.T) {
	oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
	oldClient, newClient := oldCA.client(t, "old-admin"), newCA.client(t, "new-admin")
	file := filepath.Join(t.TempDir(), "ca.crt")
	writeFile(t, file, oldCA.pem)
	c, err := newClientCA(file, clocktesting.NewFakeClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		name     string
		write    func()
		old, new string // the users of the old and new CAs' clients
	}{
		{"as read", func() {}, "old-admin", ""},
		{"new CA", func() { writeFile(t, file, newCA.pem) }, "", "new-admin"},
		{"empty file: kept", func() { writeFile(t, file, nil) }, "", "new-admin"},
		{"not a certificate: kept", func() { writeFile(t, file, []byte("junk")) }, "", "new-admin"},
		{"removed: kept", func() { os.Remove(file) }, "", "new-admin"},
		{"both CAs", func() { writeFile(t, file, append(append([]byte{}, oldCA.pem...), newCA.pem...)) }, "old-admin", "new-admin"},
		{"old CA again", func() { writeFile(t, file, oldCA.pem) }, "old-admin", ""},
	}
	for _, st := range steps {
		st.write()
		c.reload(ctx)
		if got := certUser(t, c, oldClient); got != st.old {
			t.Errorf("%s: the old CA's client is %q, want %q", st.name, got, st.old)
		}
		if got := certUser(t, c, newClient); got != st.new {
			t.Errorf("%s: the new CA's client is %q, want %q", st.name, got, st.new)
		}
	}
}

// runAuth runs a.Run until the test ends, and waits for it to return.
func runAuth(t *testing.T, a *Auth) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// awaitChange fails the test when ch is not closed soon.
func awaitChange(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("the client CA file was not reloaded %s", what)
	}
}

// Run reloads the client CA file of a running authenticator: on the
// periodic check, and as soon as its directory reports a change.
func TestClientCARun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
	}{
		{"periodic check", false},
		{"directory watch", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldCA, newCA := newTestCA(t, "old-ca"), newTestCA(t, "new-ca")
			oldClient, newClient := oldCA.client(t, "old-admin"), newCA.client(t, "new-admin")
			dir := t.TempDir()
			file := filepath.Join(dir, "ca.crt")
			writeFile(t, file, oldCA.pem)
			clk := clocktesting.NewFakeClock(time.Now())
			a, err := build(Options{
				Authentication: x509Only(file),
				Authorization:  alwaysAllow,
			}, clk, fastBackoff)
			if err != nil {
				t.Fatal(err)
			}
			a.clientCA.watch = tc.watch
			authn := func(cert tls.Certificate) string {
				resp, ok, err := a.Authenticator.AuthenticateRequest(peerRequest(t, "/pods", cert))
				if err != nil || !ok {
					return ""
				}
				return resp.User.GetName()
			}
			runAuth(t, a)
			// Run has read the file and waits on its ticker.
			deadline := time.Now().Add(10 * time.Second)
			for !clk.HasWaiters() {
				if time.Now().After(deadline) {
					t.Fatal("Run did not start its periodic check")
				}
				runtime.Gosched()
			}

			changed := a.clientCA.changes()
			if tc.watch {
				// Replaced as configuration tools do: a new file renamed
				// over the old one.
				tmp := filepath.Join(dir, ".ca.crt.tmp")
				writeFile(t, tmp, newCA.pem)
				if err := os.Rename(tmp, file); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, file, newCA.pem)
				clk.Step(caCheckInterval)
			}
			awaitChange(t, changed, "after it was replaced")
			if got := authn(oldClient); got != "" {
				t.Errorf("after the reload the old CA's client is %q, want refused", got)
			}
			if got := authn(newClient); got != "new-admin" {
				t.Errorf("after the reload the new CA's client is %q, want new-admin", got)
			}

			if tc.watch {
				// Written in place.
				changed = a.clientCA.changes()
				writeFile(t, file, oldCA.pem)
				awaitChange(t, changed, "after it was rewritten")
				if got := authn(oldClient); got != "old-admin" {
					t.Errorf("after the rewrite the old CA's client is %q, want old-admin", got)
				}
			}
		})
	}
}
