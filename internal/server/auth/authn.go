package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// authnConfig is what the request authenticator is made of: the methods
// of the KubeletConfiguration's authentication section.
type authnConfig struct {
	anonymous    bool
	clientCA     *clientCA     // nil: client certificates authenticate nobody
	tokenReviews TokenReviewer // nil: bearer tokens authenticate nobody
	cacheTTL     time.Duration // how long a TokenReview's answer is kept
	backoff      wait.Backoff  // the retries of a failed TokenReview
	clock        clock.PassiveClock
}

// new makes the request authenticator the kubelet makes (the apiserver's
// delegating authenticator):
//
//   - a client certificate that verifies against the client CA bundle is
//     the user of its common name, in the groups of its organizations;
//   - else a bearer token, from the Authorization header or from a
//     websocket subprotocol, is the user a TokenReview says, the answer
//     kept for cacheTTL;
//
// a user so authenticated is also in the group system:authenticated.
// With anonymous requests enabled, a request that carries no credentials
// is system:anonymous, in the group system:unauthenticated; one whose
// credentials fail (a certificate of another CA, an unknown token) is
// refused, not made anonymous.
func (c authnConfig) new() (authenticator.Request, error) {
	var methods []authenticator.Request
	if c.clientCA != nil {
		methods = append(methods, x509request.NewDynamic(c.clientCA.VerifyOptions, x509request.CommonNameUserConversion))
	}
	if c.tokenReviews != nil {
		tokens := newTokenCache(&tokenReviewAuthenticator{reviews: c.tokenReviews, backoff: c.backoff}, c.cacheTTL, c.clock)
		methods = append(methods, bearertoken.New(tokens), websocket.NewProtocolAuthenticator(tokens))
	}
	if len(methods) == 0 {
		if c.anonymous {
			return anonymous.NewAuthenticator(nil), nil
		}
		return nil, errors.New("no method enabled: anonymous.enabled, x509.clientCAFile and webhook.enabled are all unset")
	}
	// union.New tries each method in turn and fails with their errors when
	// none authenticates; the anonymous authenticator is reached only when
	// that union reports no error, that is when no credentials were given.
	req := group.NewAuthenticatedGroupAdder(union.New(methods...))
	if c.anonymous {
		req = union.NewFailOnError(req, anonymous.NewAuthenticator(nil))
	}
	return req, nil
}

// tokenReviewAuthenticator checks bearer tokens with TokenReviews, as the
// apiserver's webhook token authenticator does:
//
//   - the review carries the token and the audiences the request's context
//     is limited to (authenticator.WithAudiences), none when it is not;
//   - a review that fails with a transient error (transientReviewError) is
//     asked again with backoff; one that still fails is an error;
//   - an authenticated answer is the user it names (name, UID, groups,
//     extra); an unauthenticated one is no user, an error when the answer
//     carries one;
//   - when the context is audience-limited, the answer's audiences must
//     meet the context's, and the user gets those in common.
type tokenReviewAuthenticator struct {
	reviews TokenReviewer
	backoff wait.Backoff
}

// AuthenticateToken implements authenticator.Token.
func (t *tokenReviewAuthenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	wantAuds, checkAuds := authenticator.AudiencesFrom(ctx)
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: wantAuds}}
	var got *authenticationv1.TokenReview
	err := retryReview(ctx, t.backoff, transientReviewError, func() error {
		var err error
		got, err = t.reviews.Create(ctx, review, metav1.CreateOptions{})
		if err == nil && got == nil {
			err = errors.New("no TokenReview in the answer")
		}
		return err
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "TokenReview failed")
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	st := got.Status
	var auds authenticator.Audiences
	if checkAuds {
		if auds = wantAuds.Intersect(st.Audiences); len(auds) == 0 {
			return nil, false, nil
		}
	}
	if !st.Authenticated {
		if st.Error != "" {
			return nil, false, fmt.Errorf("token review: %s", st.Error)
		}
		return nil, false, nil
	}
	var extra map[string][]string
	if st.User.Extra != nil {
		extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{
		User: &user.DefaultInfo{
			Name:   st.User.Username,
			UID:    st.User.UID,
			Groups: st.User.Groups,
			Extra:  extra,
		},
		Audiences: auds,
	}, true, nil
}

// transientReviewError tells whether a failed TokenReview is worth asking
// again, as the apiserver's webhooks decide: a connection reset or a lost
// HTTP/2 connection, an internal error, a timeout or too many requests
// from the API server, or any answer that asks to retry after a delay.
func transientReviewError(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, retry := apierrors.SuggestsClientDelay(err)
	return retry
}

// tokenCache keeps the answers of a token authenticator for ttl, as the
// apiserver's cached token authenticator does for the kubelet:
//
//   - authenticated and unauthenticated answers alike are kept; errors
//     (a review that failed, an answer carrying an error) are not, and
//     the next request asks again; a ttl of 0 keeps nothing;
//   - answers are keyed by an HMAC, under a key drawn when the cache is
//     made, of the token and the context's audiences: the cache holds no
//     token, and the answer for one token or audience set is never taken
//     for another;
//   - concurrent requests with the same key share one lookup, which runs
//     detached from the first request's cancellation, for at most
//     tokenLookupTimeout; a request whose context ends stops waiting.
type tokenCache struct {
	tokens authenticator.Token
	ttl    time.Duration
	clk    clock.PassiveClock
	hashes sync.Pool // of hash.Hash, HMAC-SHA256 under the cache's key
	group  singleflight.Group

	mu      sync.Mutex
	answers map[string]tokenAnswer
}

// tokenAnswer is a kept answer.
type tokenAnswer struct {
	resp    *authenticator.Response
	ok      bool
	expires time.Time
}

func (a tokenAnswer) expiry() time.Time { return a.expires }

// maxTokenCache bounds the kept answers: past it, expired ones are
// dropped first and then, if still full, every one.
const maxTokenCache = 8192

// tokenLookupTimeout bounds a lookup shared by several requests.
const tokenLookupTimeout = 30 * time.Second

func newTokenCache(tokens authenticator.Token, ttl time.Duration, clk clock.PassiveClock) *tokenCache {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read does not fail: it aborts the program instead
	c := &tokenCache{tokens: tokens, ttl: ttl, clk: clk, answers: map[string]tokenAnswer{}}
	c.hashes.New = func() any { return hmac.New(sha256.New, key) }
	return c
}

// AuthenticateToken implements authenticator.Token.
func (c *tokenCache) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	key := c.key(ctx, token)
	if a, ok := c.get(key); ok {
		return a.resp, a.ok, nil
	}
	ch := c.group.DoChan(key, func() (any, error) { return c.lookup(ctx, key, token) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, false, r.Err
		}
		a := r.Val.(tokenAnswer)
		return a.resp, a.ok, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// lookup asks the token authenticator and keeps its answer.
func (c *tokenCache) lookup(ctx context.Context, key, token string) (a tokenAnswer, err error) {
	// A lookup shared by requests that raced past get: the first may
	// already have kept its answer.
	if a, ok := c.get(key); ok {
		return a, nil
	}
	// The lookup runs in singleflight's goroutine, where a panic would
	// end the program.
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Token authentication panicked", "panic", r, "stack", string(debug.Stack()))
			err = errors.New("token authentication failed unexpectedly")
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenLookupTimeout)
	defer cancel()
	resp, ok, err := c.tokens.AuthenticateToken(ctx, token)
	if err != nil {
		return tokenAnswer{}, err
	}
	a = tokenAnswer{resp: resp, ok: ok}
	if c.ttl > 0 {
		c.put(key, a)
	}
	return a, nil
}

// key is the cache key of token under ctx's audiences.
func (c *tokenCache) key(ctx context.Context, token string) string {
	auds, limited := authenticator.AudiencesFrom(ctx)
	h := c.hashes.Get().(hash.Hash)
	defer c.hashes.Put(h)
	h.Reset()
	// Every field is length-prefixed, so that no two inputs write the
	// same bytes.
	var n [8]byte
	writeString := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	writeString(token)
	count := -1 // not audience-limited
	if limited {
		count = len(auds)
	}
	binary.BigEndian.PutUint64(n[:], uint64(count))
	h.Write(n[:])
	for _, aud := range auds {
		writeString(aud)
	}
	return string(h.Sum(nil))
}

// get returns the unexpired answer kept under key.
func (c *tokenCache) get(key string) (tokenAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.answers[key]
	if !ok {
		return tokenAnswer{}, false
	}
	if !c.clk.Now().Before(a.expires) {
		delete(c.answers, key)
		return tokenAnswer{}, false
	}
	return a, true
}

// put keeps a under key for the cache's ttl.
func (c *tokenCache) put(key string, a tokenAnswer) {
	now := c.clk.Now()
	a.expires = now.Add(c.ttl)
	c.mu.Lock()
	defer c.mu.Unlock()
	putBounded(c.answers, key, a, now, maxTokenCache)
}
