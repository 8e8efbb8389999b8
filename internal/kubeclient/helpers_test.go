package kubeclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key in PEM; server certificates are for
// the given IPs and DNS names, client certificates for cn and orgs.
func (ca *testCA) issue(t *testing.T, server bool, cn string, orgs []string, ips []net.IP, dns []string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// fakeAPI is an API server that answers /version and SelfSubjectReviews,
// or fails them with the configured status codes.
type fakeAPI struct {
	versionCode int // 0: 200
	reviewCode  int // 0: 200
	// requests records "METHOD path accept content-type user-agent".
	requests chan string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.requests != nil {
		select {
		case f.requests <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Accept") + " " + r.Header.Get("Content-Type") + " " + r.Header.Get("User-Agent"):
		default:
		}
	}
	user := "system:anonymous"
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		user = r.TLS.PeerCertificates[0].Subject.CommonName
	} else if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		user = "token:" + tok
	}
	switch {
	case r.URL.Path == "/version":
		if f.versionCode != 0 && f.versionCode != http.StatusOK {
			writeStatus(w, f.versionCode, "version")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	case r.Method == http.MethodPost && r.URL.Path == "/apis/authentication.k8s.io/v1/selfsubjectreviews":
		if f.reviewCode != 0 && f.reviewCode != http.StatusCreated {
			writeStatus(w, f.reviewCode, `User "`+user+`" cannot create resource "selfsubjectreviews"`)
			return
		}
		review := authenticationv1.SelfSubjectReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "SelfSubjectReview"},
			Status:   authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: user}},
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&review)
	default:
		writeStatus(w, http.StatusNotFound, "not found")
	}
}

func writeStatus(w http.ResponseWriter, code int, msg string) {
	reason := metav1.StatusReasonUnknown
	switch code {
	case http.StatusUnauthorized:
		reason, msg = metav1.StatusReasonUnauthorized, "Unauthorized"
	case http.StatusForbidden:
		reason = metav1.StatusReasonForbidden
	case http.StatusNotFound:
		reason = metav1.StatusReasonNotFound
	}
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&st)
}

// startTLS starts h on a TLS server with HTTP/2, presenting a certificate
// of ca for 127.0.0.1 (or for dnsOnly when set), and accepting client
// certificates of ca.
func startTLS(t *testing.T, ca *testCA, h http.Handler, dnsOnly string) *httptest.Server {
	t.Helper()
	var ips []net.IP
	var dns []string
	if dnsOnly != "" {
		dns = []string{dnsOnly}
	} else {
		ips = []net.IP{net.ParseIP("127.0.0.1")}
	}
	certPEM, keyPEM := ca.issue(t, true, "apiserver", nil, ips, dns)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// kubeconfig writes a kubeconfig for server and returns its path. user is
// the YAML of the user entry's body, indented by four spaces.
func writeKubeconfig(t *testing.T, dir, server string, caPEM []byte, user string) string {
	t.Helper()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
    certificate-authority: ca.crt
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
users:
- name: u
  user:
` + user
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// certUser writes a client certificate of ca for cn and returns the user
// entry referring to the files.
func certUser(t *testing.T, dir string, ca *testCA, cn string) string {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, false, cn, []string{"system:nodes"}, nil, nil)
	if err := os.WriteFile(filepath.Join(dir, "client.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return "    client-certificate: client.crt\n    client-key: client.key\n"
}
