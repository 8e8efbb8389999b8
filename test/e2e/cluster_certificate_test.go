//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// The TLS bootstrap tests run against the control plane's own
// kube-controller-manager: its csrsigning controller signs with the cluster
// CA and its csrapproving controller approves node client certificates
// when the requester may create certificatesigningrequests/nodeclient
// (a bootstrap token) or .../selfnodeclient (a node renewing its own).
// What they set up is what kubeadm sets up (kubeadm's bootstrap token
// Secret and its kubeadm:kubelet-bootstrap,
// kubeadm:node-autoapprove-bootstrap and
// kubeadm:node-autoapprove-certificate-rotation bindings); the requests'
// shapes are upstream's (pkg/kubelet/certificate, client-go's
// util/certificate, k8s.io/kubernetes v1.37).

// bootstrapGroup is the extra group of the test's bootstrap token, as
// kubeadm's default node token.
const bootstrapGroup = "system:bootstrappers:kubeadm:default-node-token"

// setupBootstrapRBAC creates kubeadm's TLS bootstrap bindings once per
// control plane (they stay: other tests do not depend on their absence).
func setupBootstrapRBAC(t *testing.T) {
	t.Helper()
	for _, b := range []struct{ name, role, group string }{
		{"heartlet-e2e:kubelet-bootstrap", "system:node-bootstrapper", bootstrapGroup},
		{"heartlet-e2e:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstrapGroup},
		{"heartlet-e2e:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	} {
		if _, err := kubectl("get", "clusterrolebinding", b.name); err == nil {
			continue
		}
		mustKubectl(t, "create", "clusterrolebinding", b.name, "--clusterrole", b.role, "--group", b.group)
	}
}

// createBootstrapToken creates a bootstrap token Secret in kube-system (as
// kubeadm token create) and returns the token; it is deleted when the test
// ends.
func createBootstrapToken(t *testing.T) (id, token string) {
	t.Helper()
	b := make([]byte, 11)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(b)
	// Quoted in the manifest: a hex string may read as a YAML number
	// ("123456", "12e345").
	id, secret := h[:6], h[6:22]
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-%s
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: %q
  token-secret: %q
  expiration: %q
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: %s
`, id, id, secret, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), bootstrapGroup)
	if _, err := kubectlIn([]byte(manifest), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kubectl("delete", "secret", "-n", "kube-system", "bootstrap-token-"+id, "--ignore-not-found")
	})
	return id, id + "." + secret
}

// writeNodeKubeconfig writes a kubeconfig for the control plane's API
// server with the given user.
func writeNodeKubeconfig(t *testing.T, path string, user *clientcmdapi.AuthInfo) {
	t.Helper()
	admin, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster].Server
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthority: clusterCAFile()}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": user},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

// listCSRs returns the signing requests of a signer made by user.
func listCSRs(t *testing.T, signer, user string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	var list certificatesv1.CertificateSigningRequestList
	if err := getJSON(&list, "csr"); err != nil {
		t.Fatal(err)
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, c := range list.Items {
		if c.Spec.SignerName == signer && c.Spec.Username == user {
			out = append(out, c)
		}
	}
	return out
}

func deleteCSRsAtEnd(t *testing.T, signer, user string) {
	t.Cleanup(func() {
		for _, c := range listCSRs(t, signer, user) {
			_, _ = kubectl("delete", "csr", c.Name, "--ignore-not-found")
		}
	})
}

func csrCondition(c certificatesv1.CertificateSigningRequest, ct certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == ct {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// clusterCA loads the control plane's CA certificate.
func clusterCA(t *testing.T) *x509.Certificate {
	t.Helper()
	certs, err := certutil.CertsFromFile(clusterCAFile())
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// verifyIssued checks that cert was signed by the cluster CA for the node.
func verifyIssued(t *testing.T, cert *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(clusterCA(t))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Errorf("certificate %v not issued by the cluster CA for %v: %v", cert.Subject, usage, err)
	}
	if cert.Subject.CommonName != "system:node:"+clusterNode || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v, want CN=system:node:%s, O=system:nodes", cert.Subject, clusterNode)
	}
}

// readCurrentClientCert reads <cert-dir>/kubelet-client-current.pem, the
// symlink to kubelet-client-<timestamp>.pem.
func readCurrentClientCert(certDir string) (*x509.Certificate, string, error) {
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil {
		return nil, "", err
	}
	certs, err := certutil.CertsFromFile(current)
	if err != nil {
		return nil, "", err
	}
	return certs[0], target, nil
}

// waitLeaseRenewedAfter waits until the node's Lease is renewed after t0,
// by a heartlet that is still running.
func waitLeaseRenewedAfter(t *testing.T, h *heartlet, t0 time.Time, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("the node's Lease to be renewed after %s", t0.Format(time.RFC3339)), func() (bool, string) {
		if !h.running() {
			t.Fatalf("heartlet exited: %v", h.err)
		}
		l, err := getLease()
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		return l.Spec.RenewTime.After(t0), "renewTime " + l.Spec.RenewTime.Format(time.RFC3339Nano)
	})
}

// TestClusterTLSBootstrap: a node given only a bootstrap kubeconfig (a
// bootstrap token) gets its client certificate through an auto-approved
// kube-apiserver-client-kubelet request signed by the cluster signer,
// stores it in --cert-dir as upstream, writes its kubeconfig and becomes
// Ready; with serverTLSBootstrap its kubelet API serves nothing until the
// kubelet-serving request is approved with kubectl certificate approve,
// and then serves the issued certificate.
func TestClusterTLSBootstrap(t *testing.T) {
	requireCluster(t)
	setupBootstrapRBAC(t)
	tokenID, token := createBootstrapToken(t)
	bootUser := "system:bootstrap:" + tokenID
	deleteCSRsAtEnd(t, certificatesv1.KubeAPIServerClientKubeletSignerName, bootUser)
	deleteCSRsAtEnd(t, certificatesv1.KubeletServingSignerName, "system:node:"+clusterNode)

	h := newClusterHeartlet(t, clusterOptions{config: "rotateCertificates: true\nserverTLSBootstrap: true\n"})
	t.Cleanup(h.cleanup)
	kubeconfig := filepath.Join(h.dir, "kubelet.conf")
	bootKubeconfig := filepath.Join(h.dir, "bootstrap-kubelet.conf")
	writeNodeKubeconfig(t, bootKubeconfig, &clientcmdapi.AuthInfo{Token: token})
	certDir := filepath.Join(h.rootDir, "pki") // --cert-dir's default

	start := time.Now()
	h.run("cluster mode, TLS bootstrap", append(clusterArgs(h, kubeconfig), "--bootstrap-kubeconfig", bootKubeconfig)...)
	waitLeaseRenewedAfter(t, h, start, nodeReadyTimeout)
	waitNodeReady(t, h, "True", nodeReadyTimeout)

	// The client request: made with the token, auto-approved, issued.
	reqs := listCSRs(t, certificatesv1.KubeAPIServerClientKubeletSignerName, bootUser)
	if len(reqs) != 1 {
		t.Fatalf("%d client requests by %s, want 1", len(reqs), bootUser)
	}
	csr := reqs[0]
	if c := csrCondition(csr, certificatesv1.CertificateApproved); c == nil || c.Reason != "AutoApproved" {
		t.Errorf("client request %s not auto-approved: %+v", csr.Name, csr.Status.Conditions)
	}
	if !strings.HasPrefix(csr.Name, "node-csr-") || !slices.Contains(csr.Spec.Groups, bootstrapGroup) {
		t.Errorf("client request %s by groups %v", csr.Name, csr.Spec.Groups)
	}
	wantUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if !slices.Equal(csr.Spec.Usages, wantUsages) {
		t.Errorf("client request usages %v, want %v (an ECDSA key)", csr.Spec.Usages, wantUsages)
	}

	// The files, as upstream: kubelet-client-<timestamp>.pem and the
	// kubelet-client-current.pem symlink; the kubeconfig names it.
	cert, target, err := readCurrentClientCert(certDir)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`kubelet-client-\d{4}(-\d{2}){5}\.pem$`).MatchString(target) {
		t.Errorf("kubelet-client-current.pem -> %s", target)
	}
	verifyIssued(t, cert, x509.ExtKeyUsageClientAuth)
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("written kubeconfig: %v", err)
	}
	user := raw.AuthInfos[raw.Contexts[raw.CurrentContext].AuthInfo]
	if want := filepath.Join(certDir, "kubelet-client-current.pem"); user.ClientCertificate != want || user.ClientKey != want || user.Token != "" {
		t.Errorf("kubeconfig user %+v, want %s as certificate and key", user, want)
	}

	// The serving request waits for an administrator.
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(h.apiPort))
	var serving certificatesv1.CertificateSigningRequest
	waitFor(t, time.Minute, "a kubelet-serving request", func() (bool, string) {
		reqs := listCSRs(t, certificatesv1.KubeletServingSignerName, "system:node:"+clusterNode)
		for _, r := range reqs {
			if csrCondition(r, certificatesv1.CertificateApproved) == nil && csrCondition(r, certificatesv1.CertificateDenied) == nil {
				serving = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d serving requests, none pending", len(reqs))
	})
	if c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		c.Close()
		t.Errorf("the kubelet API completed a handshake before its serving certificate was issued")
	}
	block, _ := pem.Decode(serving.Spec.Request)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(req.DNSNames, clusterNode) || len(req.IPAddresses) == 0 {
		t.Errorf("serving request names %v, IPs %v, want the node name and its IPs", req.DNSNames, req.IPAddresses)
	}
	mustKubectl(t, "certificate", "approve", serving.Name)

	pool := x509.NewCertPool()
	pool.AddCert(clusterCA(t))
	var served *x509.Certificate
	waitFor(t, time.Minute, "the kubelet API to serve the issued certificate", func() (bool, string) {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: clusterNode})
		if err != nil {
			return false, err.Error()
		}
		defer c.Close()
		served = c.ConnectionState().PeerCertificates[0]
		return true, ""
	})
	verifyIssued(t, served, x509.ExtKeyUsageServerAuth)
	matches, _ := filepath.Glob(filepath.Join(certDir, "kubelet-server-*.pem"))
	if !slices.Contains(matches, filepath.Join(certDir, "kubelet-server-current.pem")) {
		t.Errorf("serving pair files %v, want kubelet-server-current.pem", matches)
	}
}

// TestClusterClientCertRotation: with rotateCertificates a client
// certificate past its rotation point (here one issued 20 minutes ago that
// expires 45 s after the start) is renewed at once through a
// selfnodeclient request, and heartlet goes on talking to the API server
// after the old certificate expired, without a restart.
func TestClusterClientCertRotation(t *testing.T) {
	requireCluster(t)
	setupBootstrapRBAC(t)
	nodeUser := "system:node:" + clusterNode
	deleteCSRsAtEnd(t, certificatesv1.KubeAPIServerClientKubeletSignerName, nodeUser)

	h := newClusterHeartlet(t, clusterOptions{config: "rotateCertificates: true\n"})
	t.Cleanup(h.cleanup)
	oldNotAfter := time.Now().Add(45 * time.Second)
	pairFile := filepath.Join(h.dir, "old-client.pem")
	writePrivateFile(t, pairFile, issueNodeClientPair(t, time.Now().Add(-20*time.Minute), oldNotAfter))
	kubeconfig := filepath.Join(h.dir, "kubelet.conf")
	writeNodeKubeconfig(t, kubeconfig, &clientcmdapi.AuthInfo{ClientCertificate: pairFile, ClientKey: pairFile})
	certDir := filepath.Join(h.rootDir, "pki")

	h.run("cluster mode, client certificate rotation", clusterArgs(h, kubeconfig)...)
	var renewed *x509.Certificate
	waitFor(t, 30*time.Second, "a renewed client certificate in the certificate directory", func() (bool, string) {
		c, _, err := readCurrentClientCert(certDir)
		if err != nil {
			return false, err.Error()
		}
		renewed = c
		return c.NotAfter.After(oldNotAfter.Add(time.Hour)), "notAfter " + c.NotAfter.String()
	})
	verifyIssued(t, renewed, x509.ExtKeyUsageClientAuth)
	reqs := listCSRs(t, certificatesv1.KubeAPIServerClientKubeletSignerName, nodeUser)
	if len(reqs) == 0 {
		t.Fatalf("no client request by %s", nodeUser)
	}
	if c := csrCondition(reqs[len(reqs)-1], certificatesv1.CertificateApproved); c == nil || c.Reason != "AutoApproved" {
		t.Errorf("renewal %s not auto-approved: %+v", reqs[len(reqs)-1].Name, reqs[len(reqs)-1].Status.Conditions)
	}

	// The old certificate expires: the Lease is still renewed, so the
	// clients present the new one.
	waitLeaseRenewedAfter(t, h, oldNotAfter.Add(5*time.Second), time.Minute+45*time.Second)
	// The TTL metric follows the renewed certificate.
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_certificate_manager_client_ttl_seconds"); !ok || v < time.Until(renewed.NotAfter).Seconds()-60 {
		t.Errorf("kubelet_certificate_manager_client_ttl_seconds = %v (present %v), want about %v", v, ok, time.Until(renewed.NotAfter).Seconds())
	}
	logData, err := os.ReadFile(h.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logData), "Certificate rotated") {
		t.Error("heartlet's log does not say the client certificate rotated")
	}
}

// issueNodeClientPair returns a certificate and key (PEM, one file) for
// the node, signed with the cluster CA's key, valid from notBefore to
// notAfter.
func issueNodeClientPair(t *testing.T, notBefore, notAfter time.Time) []byte {
	t.Helper()
	caKeyFile := strings.TrimSuffix(clusterCAFile(), ".crt") + ".key"
	caKey, err := keyutil.PrivateKeyFromFile(caKeyFile)
	if err != nil {
		t.Fatalf("cluster CA key: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + clusterNode, Organization: []string{"system:nodes"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, clusterCA(t), &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM...)
}

func writePrivateFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
