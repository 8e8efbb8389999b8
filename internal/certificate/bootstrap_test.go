package certificate

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/kubeclient"
)

type bootstrapEnv struct {
	dir, kubeconfig, bootKubeconfig, certDir string
	ca                                       *testCA
	signer                                   *signer
	opts                                     BootstrapOptions
	clientCfgs                               []*rest.Config
}

func newBootstrapEnv(t *testing.T) *bootstrapEnv {
	dir := t.TempDir()
	e := &bootstrapEnv{
		dir:            dir,
		kubeconfig:     filepath.Join(dir, "kubelet.conf"),
		bootKubeconfig: filepath.Join(dir, "bootstrap-kubelet.conf"),
		certDir:        filepath.Join(dir, "pki"),
		ca:             newTestCA(t),
	}
	s, client := newSigner(t, e.ca)
	e.signer = s
	writeKubeconfigFile(t, e.bootKubeconfig, e.ca.certPEM, "abcdef.0123456789abcdef", "", "")
	e.opts = BootstrapOptions{
		Kubeconfig:          e.kubeconfig,
		BootstrapKubeconfig: e.bootKubeconfig,
		CertDir:             e.certDir,
		NodeName:            "node-1",
		NewClient: func(c *rest.Config) (kubeclient.Interface, error) {
			e.clientCfgs = append(e.clientCfgs, c)
			return kubeapifake.Wrap(client), nil
		},
	}
	return e
}

// TestBootstrapRequestsClientCertificate checks the whole TLS bootstrap as
// upstream's kubelet does it (pkg/kubelet/certificate/bootstrap and
// client-go's certificate store, looked up in k8s.io/kubernetes v1.37):
// the request's signer, subject and usages, the files in the certificate
// directory and the kubeconfig written.
func TestBootstrapRequestsClientCertificate(t *testing.T) {
	e := newBootstrapEnv(t)
	if err := Bootstrap(context.Background(), e.opts); err != nil {
		t.Fatal(err)
	}

	reqs := e.signer.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d signing requests, want 1", len(reqs))
	}
	csr := reqs[0]
	if csr.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" {
		t.Errorf("signerName %q", csr.Spec.SignerName)
	}
	if !strings.HasPrefix(csr.Name, "node-csr-") {
		t.Errorf("name %q, want node-csr-...", csr.Name)
	}
	// An ECDSA key: no key encipherment (client-go's
	// DefaultKubeletClientGetUsages).
	wantUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	if !slices.Equal(csr.Spec.Usages, wantUsages) {
		t.Errorf("usages %v, want %v", csr.Spec.Usages, wantUsages)
	}
	if csr.Spec.ExpirationSeconds != nil {
		t.Errorf("expirationSeconds %d, want unset as upstream", *csr.Spec.ExpirationSeconds)
	}
	req := parseRequest(t, csr)
	if req.Subject.CommonName != "system:node:node-1" || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject %v", req.Subject)
	}
	if len(req.DNSNames) != 0 || len(req.IPAddresses) != 0 {
		t.Errorf("client request with names %v %v", req.DNSNames, req.IPAddresses)
	}
	if _, ok := req.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("key %T, want ECDSA", req.PublicKey)
	}
	// The request was made with the bootstrap credentials.
	if len(e.clientCfgs) != 1 || e.clientCfgs[0].BearerToken != "abcdef.0123456789abcdef" {
		t.Errorf("client configurations %+v, want the bootstrap token's", e.clientCfgs)
	}

	// kubelet-client-<timestamp>.pem and the symlink kubelet-client-current.pem.
	current := filepath.Join(e.certDir, "kubelet-client-current.pem")
	target, err := os.Readlink(current)
	if err != nil {
		t.Fatalf("kubelet-client-current.pem: %v", err)
	}
	if !regexp.MustCompile(`^kubelet-client-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}\.pem$`).MatchString(filepath.Base(target)) {
		t.Errorf("symlink target %q, want kubelet-client-<timestamp>.pem", target)
	}
	fi, err := os.Stat(current)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("pair file mode %v, want 0600 (it holds the key)", fi.Mode().Perm())
	}
	pemData, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := certutil.ParseCertsPEM(pemData)
	if err != nil || certs[0].Subject.CommonName != "system:node:node-1" {
		t.Errorf("stored certificate %v %v", certs, err)
	}
	if !strings.Contains(string(pemData), "PRIVATE KEY") {
		t.Error("stored pair has no key")
	}
	if _, err := os.Stat(filepath.Join(e.certDir, "kubelet-client.key.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the request's temporary key is left behind: %v", err)
	}

	// The kubeconfig: the bootstrap server and CA, the pair as credentials.
	raw, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := raw.Contexts[raw.CurrentContext]
	cluster, user := raw.Clusters[kctx.Cluster], raw.AuthInfos[kctx.AuthInfo]
	if cluster.Server != "https://127.0.0.1:6443" || string(cluster.CertificateAuthorityData) != string(e.ca.certPEM) {
		t.Errorf("cluster %+v", cluster)
	}
	if user.ClientCertificate != current || user.ClientKey != current || user.Token != "" {
		t.Errorf("user %+v, want %s as certificate and key and no token", user, current)
	}
	if valid, err := kubeconfigValid(e.kubeconfig, time.Now()); !valid || err != nil {
		t.Errorf("written kubeconfig not valid: %v %v", valid, err)
	}
}

// TestBootstrapKeepsValidKubeconfig: a kubeconfig with a valid client
// certificate (or none) is used as it is, and nothing is asked.
func TestBootstrapKeepsValidKubeconfig(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name          string
		from, to      time.Duration
		token         bool
		wantRequested bool
	}{
		{name: "valid certificate", from: -time.Hour, to: time.Hour},
		{name: "token, no certificate", token: true},
		{name: "expired certificate", from: -2 * time.Hour, to: -time.Hour, wantRequested: true},
		{name: "certificate not yet valid", from: time.Hour, to: 2 * time.Hour, wantRequested: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBootstrapEnv(t)
			if tc.token {
				writeKubeconfigFile(t, e.kubeconfig, e.ca.certPEM, "node-token", "", "")
			} else {
				c, k := e.ca.pair(t, NodeSubject("node-1"), now.Add(tc.from), now.Add(tc.to))
				certFile, keyFile := filepath.Join(e.dir, "c.pem"), filepath.Join(e.dir, "k.pem")
				writeFile(t, certFile, c)
				writeFile(t, keyFile, k)
				writeKubeconfigFile(t, e.kubeconfig, e.ca.certPEM, "", certFile, keyFile)
			}
			before, err := os.ReadFile(e.kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if err := Bootstrap(context.Background(), e.opts); err != nil {
				t.Fatal(err)
			}
			if got := len(e.signer.requests()) > 0; got != tc.wantRequested {
				t.Errorf("requested a certificate: %v, want %v", got, tc.wantRequested)
			}
			after, err := os.ReadFile(e.kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			if changed := string(before) != string(after); changed != tc.wantRequested {
				t.Errorf("kubeconfig rewritten: %v, want %v", changed, tc.wantRequested)
			}
		})
	}
}

// TestBootstrapUsesPairInCertDir: a valid pair already in the certificate
// directory (a kubeconfig lost, say) is used without a new request.
func TestBootstrapUsesPairInCertDir(t *testing.T) {
	e := newBootstrapEnv(t)
	if err := Bootstrap(context.Background(), e.opts); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(e.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := Bootstrap(context.Background(), e.opts); err != nil {
		t.Fatal(err)
	}
	if n := len(e.signer.requests()); n != 1 {
		t.Errorf("%d requests, want the first one only", n)
	}
	if valid, _ := kubeconfigValid(e.kubeconfig, time.Now()); !valid {
		t.Error("kubeconfig not written again")
	}
}

// TestBootstrapRefusesBadIssues attacks the bootstrap: a denied request,
// and an issued certificate that is not for the requester's key, leave no
// client credentials behind.
func TestBootstrapRefusesBadIssues(t *testing.T) {
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(*signer)
		want  string
	}{
		{"denied", func(s *signer) { s.deny = true }, "denied"},
		{"certificate for another key", func(s *signer) { s.issueFor = &other.PublicKey }, "private key does not match public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBootstrapEnv(t)
			tc.setup(e.signer)
			err := Bootstrap(context.Background(), e.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Bootstrap = %v, want an error with %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(e.certDir, "kubelet-client-current.pem")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("kubelet-client-current.pem exists after a refused issue: %v", err)
			}
			if _, err := os.Stat(e.kubeconfig); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("kubeconfig written after a refused issue: %v", err)
			}
		})
	}
}

// TestBootstrapResumesRequest: a restart while the request waits for
// approval finds the same request again (same key, same name) instead of
// making another.
func TestBootstrapResumesRequest(t *testing.T) {
	e := newBootstrapEnv(t)
	e.signer.approve = false
	ctx, cancel := context.WithCancel(context.Background())
	e.signer.onCreate = cancel // the first run gives up once it has asked
	if err := Bootstrap(ctx, e.opts); err == nil {
		t.Fatal("Bootstrap succeeded without an issued certificate")
	}
	if _, err := os.Stat(filepath.Join(e.certDir, "kubelet-client.key.tmp")); err != nil {
		t.Fatalf("the waiting request's key is not kept: %v", err)
	}
	reqs := e.signer.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	// The request is approved while heartlet is down.
	client, err := e.opts.NewClient(nil)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), reqs[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	stored.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: "True"}}
	stored.Status.Certificate = e.ca.sign(t, parseRequest(t, stored), parseRequest(t, stored).PublicKey, now.Add(-time.Minute), now.Add(time.Hour))
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateStatus(context.Background(), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.signer.onCreate = nil
	if err := Bootstrap(context.Background(), e.opts); err != nil {
		t.Fatal(err)
	}
	list, err := client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != reqs[0].Name {
		t.Errorf("requests after the restart: %d, want the one %s", len(list.Items), reqs[0].Name)
	}
	if valid, _ := kubeconfigValid(e.kubeconfig, time.Now()); !valid {
		t.Error("no valid kubeconfig after the resumed request was issued")
	}
}

func TestBootstrapNeedsPaths(t *testing.T) {
	for _, o := range []BootstrapOptions{
		{Kubeconfig: "/x/kubelet.conf"},
		{BootstrapKubeconfig: "/x/bootstrap.conf"},
	} {
		if err := Bootstrap(context.Background(), o); err == nil {
			t.Errorf("Bootstrap(%+v) = nil, want an error", o)
		}
	}
	e := newBootstrapEnv(t)
	e.opts.BootstrapKubeconfig = filepath.Join(e.dir, "missing.conf")
	if err := Bootstrap(context.Background(), e.opts); err == nil || !strings.Contains(err.Error(), "--bootstrap-kubeconfig") {
		t.Errorf("missing bootstrap kubeconfig: %v", err)
	}
}

// TestRequestName: the name depends on the key and the node only.
func TestRequestName(t *testing.T) {
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	a1, err := requestName(&k1.PublicKey, "n")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := requestName(&k1.PublicKey, "n")
	b, _ := requestName(&k2.PublicKey, "n")
	c, _ := requestName(&k1.PublicKey, "m")
	if a1 != a2 || a1 == b || a1 == c {
		t.Errorf("names %s %s %s %s", a1, a2, b, c)
	}
	if len(a1) > 253 || !regexp.MustCompile(`^node-csr-[A-Za-z0-9_-]+$`).MatchString(a1) {
		t.Errorf("name %q is not a valid object name", a1)
	}
}

// TestBootstrapGivesUp: a request that is not issued is waited for one hour
// (upstream's bound, pkg/kubelet/certificate/bootstrap), then Bootstrap
// fails so that heartlet exits and is started again.
func TestBootstrapGivesUp(t *testing.T) {
	e := newBootstrapEnv(t)
	e.signer.approve = false
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e.opts.Clock = clk
	done := make(chan error, 1)
	go func() { done <- Bootstrap(context.Background(), e.opts) }()
	deadline := time.Now().Add(waitFor)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("Bootstrap does not wait on the clock")
		}
		runtime.Gosched()
	}
	clk.Step(BootstrapWaitTimeout - time.Second)
	select {
	case err := <-done:
		t.Fatalf("Bootstrap ended before the hour: %v", err)
	default:
	}
	clk.Step(time.Second)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not issued within 1h0m0s") {
			t.Fatalf("Bootstrap = %v, want the timeout", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Bootstrap did not give up after the hour")
	}
	if len(e.signer.requests()) != 1 {
		t.Errorf("%d requests, want 1", len(e.signer.requests()))
	}
}
