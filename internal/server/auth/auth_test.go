package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestSubresources(t *testing.T) {
	// Expected values: upstream pkg/kubelet/server/auth.go
	// GetRequestAttributes with KubeletFineGrainedAuthz (GA since 1.36).
	tests := []struct {
		path string
		want []string
	}{
		{"/pods", []string{"pods", "proxy"}},
		{"/pods/", []string{"pods", "proxy"}},
		{"/podsx", []string{"proxy"}},
		{"/runningpods/", []string{"pods", "proxy"}},
		{"/healthz", []string{"healthz", "proxy"}},
		{"/healthz/pleg", []string{"healthz", "proxy"}},
		{"/configz", []string{"configz", "proxy"}},
		{"/stats/summary", []string{"stats"}},
		{"/stats", []string{"stats"}},
		{"/metrics", []string{"metrics"}},
		{"/metrics/cadvisor", []string{"metrics"}},
		{"/metrics/resource", []string{"metrics"}},
		{"/logs/syslog", []string{"log"}},
		{"/debug/pods/default/web/journal", []string{"proxy"}},
		{"/node", []string{"proxy"}},
		{"/node/data", []string{"proxy"}},
		{"/logs/", []string{"log"}},
		{"/debug/pprof/heap", []string{"proxy"}},
		{"/debug/flags/v", []string{"proxy"}},
		{"/checkpoint/ns/pod/c", []string{"checkpoint"}},
		{"/statusz", []string{"statusz"}},
		{"/flagz", []string{"configz"}},
		{"/containerLogs/ns/pod/c", []string{"proxy"}},
		{"/exec/ns/pod/c", []string{"proxy"}},
		{"/attach/ns/pod/c", []string{"proxy"}},
		{"/portForward/ns/pod", []string{"proxy"}},
		{"/run/ns/pod/c", []string{"proxy"}},
		{"/", []string{"proxy"}},
	}
	for _, tt := range tests {
		if got := Subresources(tt.path); strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("Subresources(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestAttributes(t *testing.T) {
	a := &Auth{NodeName: "node-a"}
	u := &user.DefaultInfo{Name: "alice"}
	for method, verb := range map[string]string{
		http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete", http.MethodHead: "",
	} {
		r := httptest.NewRequest(method, "/pods", nil)
		attrs := a.Attributes(u, r)
		if len(attrs) != 2 {
			t.Fatalf("%s /pods: %d attributes, want 2", method, len(attrs))
		}
		for i, at := range attrs {
			if at.GetVerb() != verb || at.GetResource() != "nodes" || at.GetName() != "node-a" ||
				at.GetAPIVersion() != "v1" || at.GetAPIGroup() != "" || at.GetNamespace() != "" ||
				!at.IsResourceRequest() || at.GetUser().GetName() != "alice" || at.GetPath() != "/pods" {
				t.Errorf("%s /pods attribute %d = %+v", method, i, at)
			}
		}
		if attrs[0].GetSubresource() != "pods" || attrs[1].GetSubresource() != "proxy" {
			t.Errorf("%s /pods subresources = %s,%s", method, attrs[0].GetSubresource(), attrs[1].GetSubresource())
		}
	}
}

func TestFilter(t *testing.T) {
	alice := &authenticator.Response{User: &user.DefaultInfo{Name: "alice"}}
	authnOK := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return alice, true, nil })
	authnNone := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) { return nil, false, nil })
	authnErr := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return nil, false, errors.New("boom")
	})
	allowSub := func(subs ...string) authorizer.Authorizer {
		return authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			for _, s := range subs {
				if a.GetSubresource() == s {
					return authorizer.DecisionAllow, "", nil
				}
			}
			return authorizer.DecisionNoOpinion, "", nil
		})
	}
	authzErr := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("webhook down")
	})
	// Status codes and messages: upstream pkg/kubelet/server/server.go
	// InstallAuthFilter.
	tests := []struct {
		name   string
		authn  authenticator.Request
		authz  authorizer.Authorizer
		method string
		path   string
		code   int
		body   string
	}{
		{"no credentials", authnNone, allowSub("proxy"), "GET", "/pods", 401, "Unauthorized\n"},
		{"authentication error", authnErr, allowSub("proxy"), "GET", "/pods", 401, "Unauthorized\n"},
		{"pods allowed by pods", authnOK, allowSub("pods"), "GET", "/pods", 200, "served"},
		{"pods allowed by proxy fallback", authnOK, allowSub("proxy"), "GET", "/pods", 200, "served"},
		{"pods forbidden", authnOK, allowSub("metrics"), "GET", "/pods", 403,
			"Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"},
		{"metrics allowed", authnOK, allowSub("metrics"), "GET", "/metrics", 200, "served"},
		{"metrics not by proxy", authnOK, allowSub("proxy"), "GET", "/metrics", 403,
			"Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[metrics])\n"},
		{"exec needs proxy create", authnOK, allowSub("pods"), "POST", "/exec/ns/p/c", 403,
			"Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])\n"},
		{"authorizer error", authnOK, authzErr, "GET", "/configz", 500,
			"Authorization error (user=alice, verb=get, resource=nodes, subresource=configz)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Auth{Authenticator: tt.authn, Authorizer: tt.authz, NodeName: "n"}
			h := a.Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "served") }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	notCA := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notCA, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"webhook authentication without client", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{Webhook: kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		}, "authentication.webhook.enabled"},
		{"webhook authorization without client", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		}, "authorization.mode"},
		{"unknown mode", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: "RBAC"},
		}, "authorization.mode"},
		{"missing client CA file", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{X509: kubeletv1beta1.KubeletX509Authentication{ClientCAFile: "/nonexistent/ca.crt"}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		}, "authentication.x509.clientCAFile"},
		{"client CA file without certificates", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{X509: kubeletv1beta1.KubeletX509Authentication{ClientCAFile: notCA}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		}, "authentication.x509.clientCAFile"},
		{"no authentication method", Options{
			Authentication: kubeletv1beta1.KubeletAuthentication{Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)}},
			Authorization:  kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
		}, "anonymous.enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Build: %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) client(t *testing.T, cn string, groups ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestBuildMatrix runs the authenticators and authorizers that Build
// assembles behind a TLS server: client certificates against the
// client CA, bearer tokens by TokenReview and authorization by
// SubjectAccessReview against a fake API server client, and anonymous
// requests.
func TestBuildMatrix(t *testing.T) {
	ca, foreign := newTestCA(t, "cluster-ca"), newTestCA(t, "foreign-ca")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}

	// A fake API server answering TokenReviews and SubjectAccessReviews,
	// reached through client-go's typed clients as the agent passes them.
	var (
		mu      sync.Mutex
		reviews int
		sars    []authorizationv1.SubjectAccessReviewSpec
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var out any
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			reviews++
			var tr authenticationv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			if tr.Spec.Token == "good-token" {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "bob"}}
			}
			out = &tr
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			sars = append(sars, sar.Spec)
			ra := sar.Spec.ResourceAttributes
			// bob may get nodes/metrics of node-a; the admin everything.
			sar.Status.Allowed = sar.Spec.User == "admin" ||
				(sar.Spec.User == "bob" && ra != nil && ra.Verb == "get" && ra.Resource == "nodes" && ra.Subresource == "metrics" && ra.Name == "node-a")
			// As the API server answers: with its kind.
			sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
			out = &sar
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(api.Close)
	// The fake server speaks JSON only.
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	lastSAR := func() (int, string) {
		mu.Lock()
		defer mu.Unlock()
		if len(sars) == 0 {
			return 0, ""
		}
		return len(sars), sars[len(sars)-1].User
	}

	webhook := func(anonymous bool) Options {
		return Options{
			NodeName: "node-a",
			Authentication: kubeletv1beta1.KubeletAuthentication{
				X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: caFile},
				Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: metav1.Duration{Duration: time.Minute}},
				Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(anonymous)},
			},
			Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
				Webhook: kubeletv1beta1.KubeletWebhookAuthorization{CacheAuthorizedTTL: metav1.Duration{Duration: time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: time.Minute}}},
			TokenReviews:         kube.AuthenticationV1().TokenReviews(),
			SubjectAccessReviews: kube.AuthorizationV1().SubjectAccessReviews(),
		}
	}
	alwaysAllowAnonymous := Options{
		NodeName: "node-a",
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(true)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
	}

	serve := func(t *testing.T, opts Options) string {
		a, err := Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		runAuth(t, a)
		srv := httptest.NewUnstartedServer(a.Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "served")
		})))
		srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	get := func(t *testing.T, url string, cert *tls.Certificate, token string) int {
		t.Helper()
		cfg := &tls.Config{InsecureSkipVerify: true}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	admin, admin2 := ca.client(t, "admin"), foreign.client(t, "admin")
	bobCert := ca.client(t, "bob")
	url := serve(t, webhook(false))
	tests := []struct {
		name  string
		path  string
		cert  *tls.Certificate
		token string
		want  int
	}{
		{"no credentials", "/pods", nil, "", 401},
		{"client CA admin", "/pods", &admin, "", 200},
		{"foreign CA admin", "/pods", &admin2, "", 401},
		{"unknown token", "/pods", nil, "bad-token", 401},
		{"token bob metrics", "/metrics", nil, "good-token", 200},
		{"token bob pods", "/pods", nil, "good-token", 403},
		{"cert bob metrics", "/metrics/cadvisor", &bobCert, "", 200},
		{"cert bob logs", "/containerLogs/ns/p/c", &bobCert, "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(t, url+tt.path, tt.cert, tt.token); got != tt.want {
				t.Errorf("GET %s = %d, want %d", tt.path, got, tt.want)
			}
		})
	}
	mu.Lock()
	for _, s := range sars {
		if ra := s.ResourceAttributes; ra == nil || ra.Resource != "nodes" || ra.Name != "node-a" || ra.Version != "v1" {
			t.Errorf("SubjectAccessReview attributes %+v, want resource nodes, name node-a, version v1", ra)
		}
	}
	before := reviews
	mu.Unlock()
	// The token answer is cached (cacheTTL).
	get(t, url+"/metrics", nil, "good-token")
	mu.Lock()
	if reviews != before {
		t.Errorf("a repeated token caused %d new TokenReviews, want 0 (cached)", reviews-before)
	}
	mu.Unlock()

	t.Run("anonymous allowed by AlwaysAllow", func(t *testing.T) {
		if got := get(t, serve(t, alwaysAllowAnonymous)+"/pods", nil, ""); got != 200 {
			t.Errorf("anonymous GET /pods = %d, want 200", got)
		}
	})
	t.Run("anonymous with Webhook is system:anonymous", func(t *testing.T) {
		n, _ := lastSAR()
		if got := get(t, serve(t, webhook(true))+"/healthz", nil, ""); got != 403 {
			t.Errorf("anonymous GET /healthz = %d, want 403", got)
		}
		if m, u := lastSAR(); m == n || u != user.Anonymous {
			t.Errorf("no SubjectAccessReview for %s", user.Anonymous)
		}
	})
}
