package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/fake"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// client-go's typed clients are API server clients of the package.
var (
	_ TokenReviewer         = authenticationclient.TokenReviewInterface(nil)
	_ SubjectAccessReviewer = authorizationclient.SubjectAccessReviewInterface(nil)
	_ TokenReviewer         = fake.NewClientset().AuthenticationV1().TokenReviews()
)

// fakeTokenReviews answers TokenReviews with answer and records them.
type fakeTokenReviews struct {
	mu     sync.Mutex
	specs  []authenticationv1.TokenReviewSpec
	answer func(context.Context, authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error)
}

func (f *fakeTokenReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.mu.Lock()
	f.specs = append(f.specs, *tr.Spec.DeepCopy())
	answer := f.answer
	f.mu.Unlock()
	st, err := answer(ctx, tr.Spec)
	if err != nil {
		return nil, err
	}
	out := tr.DeepCopy()
	out.Status = st
	return out, nil
}

func (f *fakeTokenReviews) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

// tokenPolicy authenticates good-token as bob (groups devs, extra
// scopes) and no other token.
func tokenPolicy(_ context.Context, s authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
	if s.Token != "good-token" {
		return authenticationv1.TokenReviewStatus{}, nil
	}
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
		Username: "bob", UID: "bob-uid", Groups: []string{"devs"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}},
	}}, nil
}

var fastBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}

// A token's answer is the API server's for that very token, kept no
// longer than the cache TTL: authenticated and unauthenticated answers
// alike are kept; errors never are.
func TestTokenCache(t *testing.T) {
	const ttl = 2 * time.Minute
	failing := errors.New("dial tcp: connection refused")
	reviews := &fakeTokenReviews{answer: func(ctx context.Context, s authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
		switch s.Token {
		case "unreachable":
			return authenticationv1.TokenReviewStatus{}, failing
		case "revoked":
			return authenticationv1.TokenReviewStatus{Error: "token revoked"}, nil
		}
		return tokenPolicy(ctx, s)
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTokenCache(&tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}, ttl, clk)
	audCtx := authenticator.WithAudiences(context.Background(), authenticator.Audiences{"api"})

	steps := []struct {
		name       string
		ctx        context.Context
		token      string
		step       time.Duration
		wantUser   string // "" for unauthenticated
		wantErr    bool
		newReviews int
	}{
		{"good token: asked", nil, "good-token", 0, "bob", false, 1},
		{"good token within the TTL: kept", nil, "good-token", time.Minute, "bob", false, 0},
		{"unknown token: asked, unauthenticated", nil, "bad-token", 0, "", false, 1},
		{"unknown token within the TTL: kept", nil, "bad-token", time.Minute - time.Second, "", false, 0},
		{"good token at the TTL: asked again", nil, "good-token", time.Second, "bob", false, 1},
		{"unknown token just before its TTL: kept", nil, "bad-token", time.Minute - time.Second, "", false, 0},
		{"unknown token at its TTL: asked again", nil, "bad-token", time.Second, "", false, 1},
		{"good token under audiences: another key", audCtx, "good-token", 0, "", false, 1},
		{"good token under audiences again: kept", audCtx, "good-token", 0, "", false, 0},
		{"review that fails: error", nil, "unreachable", 0, "", true, 1},
		{"review that fails again: not kept", nil, "unreachable", 0, "", true, 1},
		{"answer with an error: error", nil, "revoked", 0, "", true, 1},
		{"answer with an error again: not kept", nil, "revoked", 0, "", true, 1},
	}
	for _, st := range steps {
		clk.Step(st.step)
		ctx := st.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		before := reviews.count()
		resp, ok, err := c.AuthenticateToken(ctx, st.token)
		if (err != nil) != st.wantErr {
			t.Errorf("%s: error %v, want error %v", st.name, err, st.wantErr)
		}
		switch {
		case st.wantUser == "" && ok:
			t.Errorf("%s: authenticated as %s, want unauthenticated", st.name, resp.User.GetName())
		case st.wantUser != "" && (!ok || resp.User.GetName() != st.wantUser):
			t.Errorf("%s: %+v, %v; want %s", st.name, resp, ok, st.wantUser)
		}
		if n := reviews.count() - before; n != st.newReviews {
			t.Errorf("%s: %d TokenReviews, want %d", st.name, n, st.newReviews)
		}
	}

	t.Run("TTL 0 keeps nothing", func(t *testing.T) {
		reviews := &fakeTokenReviews{answer: tokenPolicy}
		c := newTokenCache(&tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}, 0, clk)
		for _, token := range []string{"good-token", "good-token", "bad-token", "bad-token"} {
			if _, _, err := c.AuthenticateToken(context.Background(), token); err != nil {
				t.Fatal(err)
			}
		}
		if n := reviews.count(); n != 4 {
			t.Errorf("%d TokenReviews with a TTL of 0, want 4", n)
		}
	})
}

// A request that stops waiting does not cancel the review it shares with
// others: the answer is still kept.
func TestTokenCacheDetachedLookup(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var reviewCtxErr error
	reviews := &fakeTokenReviews{answer: func(ctx context.Context, s authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
		close(started)
		<-release
		reviewCtxErr = ctx.Err()
		return tokenPolicy(ctx, s)
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTokenCache(&tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}, time.Minute, clk)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, _, err := c.AuthenticateToken(ctx, "good-token")
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled request: %v, want context.Canceled", err)
	}
	close(release)
	// The next request joins the lookup or finds its answer kept.
	resp, ok, err := c.AuthenticateToken(context.Background(), "good-token")
	if err != nil || !ok || resp.User.GetName() != "bob" {
		t.Fatalf("after the shared review: %+v, %v, %v", resp, ok, err)
	}
	if reviewCtxErr != nil {
		t.Errorf("the review's context ended with the first request: %v", reviewCtxErr)
	}
	if n := reviews.count(); n != 1 {
		t.Errorf("%d TokenReviews, want 1", n)
	}
}

// The user is the one the API server names, with what it says; the
// review carries the token and the request's audiences; transient
// failures are asked again, others not, and a failure is no user.
func TestTokenReviewAuthenticator(t *testing.T) {
	t.Run("answer", func(t *testing.T) {
		reviews := &fakeTokenReviews{answer: tokenPolicy}
		a := &tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}
		resp, ok, err := a.AuthenticateToken(context.Background(), "good-token")
		if err != nil || !ok {
			t.Fatalf("good token: %v, %v", ok, err)
		}
		u := resp.User
		if u.GetName() != "bob" || u.GetUID() != "bob-uid" || !slices.Equal(u.GetGroups(), []string{"devs"}) ||
			!slices.Equal(u.GetExtra()["scopes"], []string{"a", "b"}) || resp.Audiences != nil {
			t.Errorf("user %+v, audiences %v", u, resp.Audiences)
		}
		if s := reviews.specs[0]; s.Token != "good-token" || s.Audiences != nil {
			t.Errorf("review spec %+v, want the token and no audiences", s)
		}
		if _, ok, err := a.AuthenticateToken(context.Background(), "bad-token"); ok || err != nil {
			t.Errorf("unknown token: %v, %v; want unauthenticated without error", ok, err)
		}
	})

	t.Run("audiences", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			want   authenticator.Audiences
			answer []string
			ok     bool
			got    authenticator.Audiences
		}{
			{"answer meets the request's", authenticator.Audiences{"api", "other"}, []string{"api"}, true, authenticator.Audiences{"api"}},
			{"answer misses the request's", authenticator.Audiences{"api"}, []string{"vault"}, false, nil},
			{"answer names none", authenticator.Audiences{"api"}, nil, false, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				reviews := &fakeTokenReviews{answer: func(ctx context.Context, s authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
					st, err := tokenPolicy(ctx, s)
					st.Audiences = tc.answer
					return st, err
				}}
				a := &tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}
				resp, ok, err := a.AuthenticateToken(authenticator.WithAudiences(context.Background(), tc.want), "good-token")
				if err != nil || ok != tc.ok {
					t.Fatalf("%v, %v; want %v", ok, err, tc.ok)
				}
				if ok && !slices.Equal(resp.Audiences, tc.got) {
					t.Errorf("audiences %v, want %v", resp.Audiences, tc.got)
				}
				if s := reviews.specs[0]; !slices.Equal(s.Audiences, tc.want) {
					t.Errorf("review audiences %v, want %v", s.Audiences, tc.want)
				}
			})
		}
	})

	t.Run("failures", func(t *testing.T) {
		gr := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
		for _, tc := range []struct {
			name      string
			err       error
			wantCalls int
		}{
			{"internal error: retried", apierrors.NewInternalError(errors.New("etcd down")), 3},
			{"too many requests: retried", apierrors.NewTooManyRequests("slow down", 1), 3},
			{"timeout: retried", apierrors.NewTimeoutError("slow", 1), 3},
			{"server timeout: retried", apierrors.NewServerTimeout(gr, "create", 1), 3},
			{"unavailable: not retried", apierrors.NewServiceUnavailable("later"), 1},
			{"connection refused: not retried", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}, 1},
			{"connection reset: retried", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}, 3},
			{"forbidden: not retried", apierrors.NewForbidden(gr, "", errors.New("no")), 1},
			{"bad request: not retried", apierrors.NewBadRequest("no"), 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				reviews := &fakeTokenReviews{answer: func(context.Context, authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
					return authenticationv1.TokenReviewStatus{}, tc.err
				}}
				a := &tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}
				if resp, ok, err := a.AuthenticateToken(context.Background(), "good-token"); ok || resp != nil || !errors.Is(err, tc.err) {
					t.Errorf("failed review: %+v, %v, %v; want no user and the review's error", resp, ok, err)
				}
				if n := reviews.count(); n != tc.wantCalls {
					t.Errorf("%d TokenReviews, want %d", n, tc.wantCalls)
				}
			})
		}
	})

	t.Run("recovers after a transient failure", func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		reviews := &fakeTokenReviews{answer: func(ctx context.Context, s authenticationv1.TokenReviewSpec) (authenticationv1.TokenReviewStatus, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				return authenticationv1.TokenReviewStatus{}, apierrors.NewInternalError(errors.New("etcd down"))
			}
			return tokenPolicy(ctx, s)
		}}
		a := &tokenReviewAuthenticator{reviews: reviews, backoff: fastBackoff}
		if resp, ok, err := a.AuthenticateToken(context.Background(), "good-token"); err != nil || !ok || resp.User.GetName() != "bob" {
			t.Errorf("%+v, %v, %v; want bob after a retry", resp, ok, err)
		}
	})
}

// peerRequest is a request to path over TLS from a client that presented
// chain (leaf first).
func peerRequest(t *testing.T, path string, chain ...tls.Certificate) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if len(chain) == 0 {
		return r
	}
	r.TLS = &tls.ConnectionState{}
	for _, c := range chain {
		for _, der := range c.Certificate {
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			r.TLS.PeerCertificates = append(r.TLS.PeerCertificates, cert)
		}
	}
	return r
}

// The methods are tried in the kubelet's order: a client certificate,
// then a bearer token; a request without credentials alone is anonymous,
// one whose credentials fail is refused (401) even with anonymous
// requests enabled.
func TestAuthenticatorUnion(t *testing.T) {
	ca, foreign := newTestCA(t, "cluster-ca"), newTestCA(t, "foreign-ca")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	admin, foreignAdmin := ca.client(t, "admin", "ops"), foreign.client(t, "admin", "ops")
	wsToken := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("good-token"))
	wsBadToken := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("bad-token"))

	type request struct {
		cert     *tls.Certificate
		token    string
		wsProto  string
		wantCode int
		// wantUser is "name groups..." of the authenticated user.
		wantUser string
		// wantReviews are the TokenReviews the request makes.
		wantReviews int
	}
	tests := []struct {
		name      string
		anonymous bool
		x509      bool
		webhook   bool
		requests  map[string]request
	}{
		{"every method, anonymous enabled", true, true, true, map[string]request{
			"no credentials":                  {wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
			"unknown token":                   {token: "bad-token", wantCode: 401, wantReviews: 1},
			"good token":                      {token: "good-token", wantCode: 200, wantUser: "bob [devs system:authenticated]", wantReviews: 1},
			"client certificate":              {cert: &admin, wantCode: 200, wantUser: "admin [ops system:authenticated]"},
			"certificate first, token unused": {cert: &admin, token: "bad-token", wantCode: 200, wantUser: "admin [ops system:authenticated]"},
			"foreign certificate":             {cert: &foreignAdmin, wantCode: 401},
			"foreign certificate, good token": {cert: &foreignAdmin, token: "good-token", wantCode: 200, wantUser: "bob [devs system:authenticated]", wantReviews: 1},
			"websocket token":                 {wsProto: wsToken + ", v5.channel.k8s.io", wantCode: 200, wantUser: "bob [devs system:authenticated]", wantReviews: 1},
			"websocket unknown token":         {wsProto: wsBadToken + ", v5.channel.k8s.io", wantCode: 401, wantReviews: 1},
			"websocket without a subprotocol": {wsProto: "v5.channel.k8s.io", wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
		}},
		{"every method, anonymous disabled", false, true, true, map[string]request{
			"no credentials":     {wantCode: 401},
			"unknown token":      {token: "bad-token", wantCode: 401, wantReviews: 1},
			"good token":         {token: "good-token", wantCode: 200, wantUser: "bob [devs system:authenticated]", wantReviews: 1},
			"client certificate": {cert: &admin, wantCode: 200, wantUser: "admin [ops system:authenticated]"},
		}},
		{"anonymous only", true, false, false, map[string]request{
			"no credentials":     {wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
			"token ignored":      {token: "good-token", wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
			"certificate unused": {cert: &admin, wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
		}},
		{"client certificates only, anonymous enabled", true, true, false, map[string]request{
			"client certificate":  {cert: &admin, wantCode: 200, wantUser: "admin [ops system:authenticated]"},
			"foreign certificate": {cert: &foreignAdmin, wantCode: 401},
			"token not checked":   {token: "good-token", wantCode: 200, wantUser: "system:anonymous [system:unauthenticated]"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reviews := &fakeTokenReviews{answer: tokenPolicy}
			opts := Options{
				Authentication: kubeletv1beta1.KubeletAuthentication{
					Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(tt.anonymous)},
					Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(tt.webhook)},
				},
				Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow},
				TokenReviews:  reviews,
			}
			if tt.x509 {
				opts.Authentication.X509.ClientCAFile = caFile
			}
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			a, err := build(opts, clk, fastBackoff)
			if err != nil {
				t.Fatal(err)
			}
			// The handler answers the user Filter authenticated.
			var authenticated user.Info
			built := a.Authenticator
			a.Authenticator = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
				resp, ok, err := built.AuthenticateRequest(r)
				if ok {
					authenticated = resp.User
				}
				return resp, ok, err
			})
			h := a.Filter(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				io.WriteString(w, userString(authenticated))
			}))
			for name, rq := range tt.requests {
				t.Run(name, func(t *testing.T) {
					var r *http.Request
					if rq.cert != nil {
						r = peerRequest(t, "/pods", *rq.cert)
					} else {
						r = peerRequest(t, "/pods")
					}
					if rq.token != "" {
						r.Header.Set("Authorization", "Bearer "+rq.token)
					}
					if rq.wsProto != "" {
						r.Header.Set("Connection", "Upgrade")
						r.Header.Set("Upgrade", "websocket")
						r.Header.Set("Sec-WebSocket-Protocol", rq.wsProto)
					}
					authenticated = nil
					before := reviews.count()
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, r)
					if rec.Code != rq.wantCode {
						t.Errorf("status %d (%q), want %d", rec.Code, rec.Body.String(), rq.wantCode)
					}
					if rq.wantCode == 200 && rec.Body.String() != rq.wantUser {
						t.Errorf("user %q, want %q", rec.Body.String(), rq.wantUser)
					}
					if n := reviews.count() - before; n != rq.wantReviews {
						t.Errorf("%d TokenReviews, want %d", n, rq.wantReviews)
					}
					// Every token is looked up once: forget the kept answers.
					clk.Step(time.Hour)
				})
			}
		})
	}
}

// userString is "name [groups]" of u.
func userString(u user.Info) string {
	if u == nil {
		return "<nil>"
	}
	var b []byte
	b = append(b, u.GetName()...)
	b = append(b, " ["...)
	for i, g := range u.GetGroups() {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, g...)
	}
	return string(append(b, ']'))
}
