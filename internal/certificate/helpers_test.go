package certificate

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/keyutil"
)

// testCA is a throwaway certificate authority.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-24 * time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
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

var serial int64 = 100

// sign issues a certificate for pub with the request's subject and names,
// valid from notBefore to notAfter.
func (ca *testCA) sign(t *testing.T, req *x509.CertificateRequest, pub crypto.PublicKey, notBefore, notAfter time.Time) []byte {
	t.Helper()
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      req.Subject,
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPAddresses,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// pair returns a certificate and key in PEM for the subject.
func (ca *testCA) pair(t *testing.T, subject pkix.Name, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.sign(t, &x509.CertificateRequest{Subject: subject}, &key.PublicKey, notBefore, notAfter), keyPEM
}

// signer answers CertificateSigningRequests created through a fake
// clientset: approve decides whether each is approved and issued (with a
// lifetime of one hour) or left pending; issueFor, when set, replaces the
// public key the certificate is issued for (an attack: a certificate that
// does not match the requester's key).
type signer struct {
	t        *testing.T
	ca       *testCA
	approve  bool
	deny     bool
	issueFor crypto.PublicKey

	// now is the issuing time; nil is time.Now.
	now func() time.Time

	mu      sync.Mutex
	created []*certificatesv1.CertificateSigningRequest
	// onCreate, when set, is called after each create.
	onCreate func()
}

func newSigner(t *testing.T, ca *testCA) (*signer, *fake.Clientset) {
	s := &signer{t: t, ca: ca, approve: true}
	client := fake.NewClientset()
	client.PrependReactor("create", "certificatesigningrequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		csr := action.(clienttesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest).DeepCopy()
		s.mu.Lock()
		s.created = append(s.created, csr.DeepCopy())
		approve, deny, issueFor := s.approve, s.deny, s.issueFor
		s.mu.Unlock()
		if csr.Name == "" {
			csr.Name = csr.GenerateName + "x" + big.NewInt(int64(len(s.created))).String()
		}
		csr.UID = types.UID("uid-" + csr.Name)
		switch {
		case deny:
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Test"})
		case approve:
			block, _ := pem.Decode(csr.Spec.Request)
			req, err := x509.ParseCertificateRequest(block.Bytes)
			if err != nil {
				t.Errorf("parse request: %v", err)
				return true, nil, err
			}
			pub := req.PublicKey
			if issueFor != nil {
				pub = issueFor
			}
			now := time.Now()
			if s.now != nil {
				now = s.now()
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
			csr.Status.Certificate = s.ca.sign(t, req, pub, now.Add(-time.Minute), now.Add(time.Hour))
		}
		if err := client.Tracker().Create(certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests"), csr, ""); err != nil {
			return true, nil, err
		}
		if s.onCreate != nil {
			s.onCreate()
		}
		return true, csr, nil
	})
	// The fake clientset ignores field selectors; the API server does not,
	// and a request is waited for by name, so list and watch keep only
	// the request named.
	csrs := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	client.PrependReactor("list", "certificatesigningrequests", func(action clienttesting.Action) (bool, runtime.Object, error) {
		name, ok := action.(clienttesting.ListAction).GetListRestrictions().Fields.RequiresExactMatch("metadata.name")
		if !ok {
			return false, nil, nil
		}
		obj, err := client.Tracker().List(csrs, certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "")
		if err != nil {
			return true, nil, err
		}
		list := obj.(*certificatesv1.CertificateSigningRequestList)
		list.Items = slices.DeleteFunc(list.Items, func(c certificatesv1.CertificateSigningRequest) bool { return c.Name != name })
		return true, list, nil
	})
	client.PrependWatchReactor("certificatesigningrequests", func(action clienttesting.Action) (bool, watch.Interface, error) {
		name, ok := action.(clienttesting.WatchAction).GetWatchRestrictions().Fields.RequiresExactMatch("metadata.name")
		if !ok {
			return false, nil, nil
		}
		w, err := client.Tracker().Watch(csrs, "")
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			c, ok := e.Object.(*certificatesv1.CertificateSigningRequest)
			return e, !ok || c.Name == name
		}), nil
	})
	return s, client
}

func (s *signer) setDeny(deny bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = deny
}

func (s *signer) requests() []*certificatesv1.CertificateSigningRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*certificatesv1.CertificateSigningRequest(nil), s.created...)
}

// parseRequest decodes a CSR's request.
func parseRequest(t *testing.T, csr *certificatesv1.CertificateSigningRequest) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		t.Fatal("no PEM in the request")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// writeKubeconfigFile writes a kubeconfig for server with either a token
// or a client certificate and key in files.
func writeKubeconfigFile(t *testing.T, path string, caPEM []byte, token, certFile, keyFile string) {
	t.Helper()
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: "https://127.0.0.1:6443", CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: token, ClientCertificate: certFile, ClientKey: keyFile}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

var metav1ListAll = metav1.ListOptions{}
