package kubeclient

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadKubeconfigErrors(t *testing.T) {
	const ctxBlock = "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n"
	const clusterBlock = "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n"
	const userBlock = "users:\n- name: u\n  user:\n    token: abc\n"
	tests := []struct {
		name    string
		content *string // nil: the file does not exist
		opts    func(*Options)
		want    []string
	}{
		{name: "missing file", want: []string{"kubeconfig ", "/missing: open ", "no such file or directory"}},
		{name: "not yaml", content: ptr("{{{"), want: []string{"kubeconfig ", "parsing"}},
		{name: "no current context", content: ptr("apiVersion: v1\nkind: Config\n" + clusterBlock + ctxBlock + userBlock),
			want: []string{"no current-context set"}},
		{name: "unknown context", content: ptr("apiVersion: v1\nkind: Config\ncurrent-context: other\n" + clusterBlock + ctxBlock + userBlock),
			want: []string{`current-context "other" is not defined`}},
		{name: "unknown cluster", content: ptr("apiVersion: v1\nkind: Config\ncurrent-context: ctx\n" + ctxBlock + userBlock),
			want: []string{`names cluster "c", which is not defined`}},
		{name: "no server", content: ptr("apiVersion: v1\nkind: Config\ncurrent-context: ctx\nclusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: true\n" + ctxBlock + userBlock),
			want: []string{`cluster "c" has no server`}},
		{name: "unknown user", content: ptr("apiVersion: v1\nkind: Config\ncurrent-context: ctx\n" + clusterBlock + ctxBlock),
			want: []string{`names user "u", which is not defined`}},
		{name: "bad content type", content: ptr("apiVersion: v1\nkind: Config\ncurrent-context: ctx\n" + clusterBlock + ctxBlock + userBlock),
			opts: func(o *Options) { o.ContentType = "text/plain" }, want: []string{`content type "text/plain"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "missing")
			if tc.content != nil {
				path = filepath.Join(dir, "kubeconfig")
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			opts := Options{Kubeconfig: path, PreflightTimeout: time.Second}
			if tc.opts != nil {
				tc.opts(&opts)
			}
			_, err := Load(context.Background(), opts)
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			if !strings.HasPrefix(err.Error(), "kubeconfig "+path+": ") {
				t.Errorf("error %q does not start with %q", err, "kubeconfig "+path+": ")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestLoadPreflight(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	otherCA := newTestCA(t, "other-ca")
	const node = "system:node:worker-1"

	// A listener that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	// A port nobody listens on.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	_ = closed.Close()

	plain := httptest.NewServer(&fakeAPI{})
	t.Cleanup(plain.Close)

	tests := []struct {
		name     string
		server   func(t *testing.T) string // returns the server URL
		kubeCA   *testCA
		user     func(t *testing.T, dir string) string
		kind     error
		want     []string
		identity string
	}{
		{
			name:     "ok with client certificate",
			server:   func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{}, "").URL },
			identity: node,
		},
		{
			name:     "ok with token",
			server:   func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{}, "").URL },
			user:     func(t *testing.T, dir string) string { return "    token: secret\n" },
			identity: "token:secret",
		},
		{
			name:     "server without SelfSubjectReview",
			server:   func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{reviewCode: http.StatusNotFound}, "").URL },
			identity: node,
		},
		{
			name:   "unknown authority",
			server: func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{}, "").URL },
			kubeCA: otherCA,
			kind:   ErrTLS,
			want:   []string{"TLS connection to API server https://127.0.0.1:", "not signed by the kubeconfig's certificate-authority", "x509"},
		},
		{
			name:   "certificate for another name",
			server: func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{}, "apiserver.example").URL },
			kind:   ErrTLS,
			want:   []string{"not valid for the server's address"},
		},
		{
			name:   "not a TLS server",
			server: func(t *testing.T) string { return strings.Replace(plain.URL, "http://", "https://", 1) },
			kind:   ErrTLS,
			want:   []string{"does not speak TLS"},
		},
		{
			name:   "connection refused",
			server: func(t *testing.T) string { return "https://" + closedAddr },
			kind:   ErrUnreachable,
			want:   []string{"API server https://" + closedAddr + " is unreachable", "connection refused"},
		},
		{
			name:   "no answer",
			server: func(t *testing.T) string { return "https://" + silent.Addr().String() },
			kind:   ErrUnreachable,
			want:   []string{"API server https://" + silent.Addr().String() + " did not answer within 300ms"},
		},
		{
			name: "credentials rejected",
			server: func(t *testing.T) string {
				return startTLS(t, ca, &fakeAPI{versionCode: http.StatusUnauthorized}, "").URL
			},
			kind: ErrUnauthorized,
			want: []string{"rejected the credentials of " + node, "provide credentials"},
		},
		{
			name: "token rejected",
			server: func(t *testing.T) string {
				return startTLS(t, ca, &fakeAPI{versionCode: http.StatusUnauthorized}, "").URL
			},
			user: func(t *testing.T, dir string) string { return "    token: secret\n" },
			kind: ErrUnauthorized,
			want: []string{"rejected the credentials of the bearer token"},
		},
		{
			name:   "forbidden",
			server: func(t *testing.T) string { return startTLS(t, ca, &fakeAPI{reviewCode: http.StatusForbidden}, "").URL },
			kind:   ErrForbidden,
			want:   []string{node + " is not allowed to create selfsubjectreviews.authentication.k8s.io at API server https://127.0.0.1:", "cannot create resource"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			server := tc.server(t)
			kubeCA := ca
			if tc.kubeCA != nil {
				kubeCA = tc.kubeCA
			}
			user := certUser(t, dir, ca, node)
			if tc.user != nil {
				user = tc.user(t, dir)
			}
			path := writeKubeconfig(t, dir, server, kubeCA.certPEM, user)
			c, err := Load(context.Background(), Options{Kubeconfig: path, PreflightTimeout: 300 * time.Millisecond})
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if c.Identity != tc.identity {
					t.Errorf("Identity = %q, want %q", c.Identity, tc.identity)
				}
				if c.ServerVersion != "v1.37.2" {
					t.Errorf("ServerVersion = %q, want v1.37.2", c.ServerVersion)
				}
				if c.Server != server || c.Path != path {
					t.Errorf("Server, Path = %q, %q; want %q, %q", c.Server, c.Path, server, path)
				}
				return
			}
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %q is not %v", err, tc.kind)
			}
			var pe *PreflightError
			if !errors.As(err, &pe) || pe.Server != server || pe.Kubeconfig != path {
				t.Errorf("error %#v is not a PreflightError for server %s and kubeconfig %s", err, server, path)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "kubeconfig "+path+": ") {
				t.Errorf("error %q does not name the kubeconfig first", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestLoadClientSettings(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	api := &fakeAPI{requests: make(chan string, 10)}
	srv := startTLS(t, ca, api, "")
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, srv.URL, ca.certPEM, certUser(t, dir, ca, "system:node:n"))

	tests := []struct {
		name       string
		opts       Options
		qps        float32
		burst      int
		accept     string
		reviewType string
	}{
		{name: "defaults", opts: Options{}, qps: 50, burst: 100,
			accept: "application/vnd.kubernetes.protobuf,application/json", reviewType: "application/vnd.kubernetes.protobuf"},
		{name: "json", opts: Options{ContentType: "application/json", QPS: 5, Burst: 10, UserAgent: "test-agent/1"}, qps: 5, burst: 10,
			accept: "application/json", reviewType: "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Kubeconfig = path
			c, err := Load(context.Background(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.Rest.QPS != tc.qps || c.Rest.Burst != tc.burst {
				t.Errorf("QPS, Burst = %v, %v; want %v, %v", c.Rest.QPS, c.Rest.Burst, tc.qps, tc.burst)
			}
			wantUA := tc.opts.UserAgent
			if wantUA == "" {
				wantUA = "heartlet/"
			}
			var sawReview bool
			for len(api.requests) > 0 {
				req := <-api.requests
				if !strings.Contains(req, wantUA) {
					t.Errorf("request %q lacks user agent %q", req, wantUA)
				}
				if strings.HasPrefix(req, "POST /apis/authentication.k8s.io/v1/selfsubjectreviews ") {
					sawReview = true
					if !strings.Contains(req, " "+tc.accept+" "+tc.reviewType+" ") {
						t.Errorf("review request %q: want Accept %q and Content-Type %q", req, tc.accept, tc.reviewType)
					}
				}
			}
			if !sawReview {
				t.Error("no SelfSubjectReview request")
			}
			// The heartbeat client reaches the same server.
			if _, err := c.Heartbeat.CoreV1().RESTClient().Get().AbsPath("/version").Do(context.Background()).Raw(); err != nil {
				t.Errorf("heartbeat client: %v", err)
			}
			for len(api.requests) > 0 {
				<-api.requests
			}
		})
	}
}

func TestCredentialIdentity(t *testing.T) {
	ca := newTestCA(t, "ca")
	certPEM, _ := ca.issue(t, false, "system:node:a", []string{"system:nodes"}, nil, nil)
	tests := []struct {
		name string
		user string
		want string
	}{
		{"client certificate data", "    client-certificate-data: " + base64.StdEncoding.EncodeToString(certPEM) + "\n    client-key-data: " + base64.StdEncoding.EncodeToString([]byte("k")) + "\n", "system:node:a"},
		{"token", "    token: x\n", "the bearer token"},
		{"token file", "    tokenFile: TOKENFILE\n", "the bearer token in TOKENFILE"},
		{"exec", "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/cred\n      interactiveMode: Never\n", "the credentials of exec plugin /bin/cred"},
		{"basic", "    username: bob\n    password: p\n", "bob"},
		{"none", "    {}\n", "system:anonymous"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tokenFile := filepath.Join(dir, "token")
			if err := os.WriteFile(tokenFile, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			user := strings.ReplaceAll(tc.user, "TOKENFILE", tokenFile)
			want := strings.ReplaceAll(tc.want, "TOKENFILE", tokenFile)
			path := writeKubeconfig(t, dir, "https://127.0.0.1:1", ca.certPEM, user)
			cfg, err := restConfig(Options{Kubeconfig: path})
			if err != nil {
				t.Fatal(err)
			}
			if got := credentialIdentity(cfg); got != want {
				t.Errorf("credentialIdentity = %q, want %q", got, want)
			}
		})
	}
}
