// Package auth authenticates and authorizes requests to heartlet's kubelet
// API (the HTTPS port) as the kubelet does: x509 client certificates,
// bearer tokens checked with TokenReviews, anonymous requests when enabled;
// AlwaysAllow or SubjectAccessReview authorization of node subresources.
// The request authenticators (client certificate, bearer token, union,
// anonymous) are k8s.io/apiserver's; the TokenReview authenticator, its
// cache, the client CA file reloader and the SubjectAccessReview
// authorizer are the package's own, on API server clients declared here,
// so that no client-go typed client (and its all-groups scheme) is linked.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// webhookRetryBackoff is the retry policy of TokenReviews and
// SubjectAccessReviews; the values are those of the apiserver library's
// DefaultAuthWebhookRetryBackoff, which the kubelet uses.
func webhookRetryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// TokenReviewer creates TokenReviews on the API server (POST
// /apis/authentication.k8s.io/v1/tokenreviews). Create returns the
// server's answer, whose Status says whether the token is valid and for
// whom, or an error: an API status error (k8s.io/apimachinery/pkg/api/errors)
// when the server refused the review, any other when it could not be
// reached. It is safe for concurrent use. client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// SubjectAccessReviewer creates SubjectAccessReviews on the API server
// (POST /apis/authorization.k8s.io/v1/subjectaccessreviews). Create
// returns the server's answer, whose Status says whether the review's
// user may do what it describes, or an error as TokenReviewer's. It is
// safe for concurrent use. client-go's
// AuthorizationV1().SubjectAccessReviews() satisfies it.
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Options configure Build.
type Options struct {
	// NodeName is the name authorization attributes carry.
	NodeName string
	// Authentication and Authorization are the KubeletConfiguration's.
	Authentication kubeletv1beta1.KubeletAuthentication
	Authorization  kubeletv1beta1.KubeletAuthorization
	// TokenReviews and SubjectAccessReviews are the API server clients of
	// the webhook modes; nil in standalone mode.
	TokenReviews         TokenReviewer
	SubjectAccessReviews SubjectAccessReviewer
}

// Auth is an authenticator, the node's attribute mapping and an
// authorizer.
type Auth struct {
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	NodeName      string
	// clientCA is the client CA bundle that Run keeps up to date with its
	// file; nil without authentication.x509.clientCAFile.
	clientCA *clientCA
}

// Build makes the authenticator and authorizer of a KubeletConfiguration.
// Webhook modes without an API server client are errors naming the field.
// It starts nothing: Run reloads the client CA file.
func Build(opts Options) (*Auth, error) {
	return build(opts, clock.RealClock{}, *webhookRetryBackoff())
}

// build is Build with the clock of the caches and of the client CA file
// checks, and the retry policy of the reviews.
func build(opts Options, clk clock.WithTicker, backoff wait.Backoff) (*Auth, error) {
	a := &Auth{NodeName: opts.NodeName}
	authn := opts.Authentication
	cfg := authnConfig{
		anonymous: authn.Anonymous.Enabled != nil && *authn.Anonymous.Enabled,
		cacheTTL:  authn.Webhook.CacheTTL.Duration,
		backoff:   backoff,
		clock:     clk,
	}
	if f := authn.X509.ClientCAFile; f != "" {
		ca, err := newClientCA(f, clk)
		if err != nil {
			return nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		a.clientCA = ca
		cfg.clientCA = ca
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if opts.TokenReviews == nil {
			return nil, errors.New("authentication.webhook.enabled: webhook authentication needs an API server client (--kubeconfig)")
		}
		cfg.tokenReviews = opts.TokenReviews
	}
	req, err := cfg.new()
	if err != nil {
		return nil, fmt.Errorf("authentication: %w", err)
	}
	a.Authenticator = req

	switch mode := opts.Authorization.Mode; mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
		a.Authorizer = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		})
	case kubeletv1beta1.KubeletAuthorizationModeWebhook:
		if opts.SubjectAccessReviews == nil {
			return nil, errors.New("authorization.mode: Webhook authorization needs an API server client (--kubeconfig)")
		}
		z := newSARAuthorizer(opts.SubjectAccessReviews,
			opts.Authorization.Webhook.CacheAuthorizedTTL.Duration, opts.Authorization.Webhook.CacheUnauthorizedTTL.Duration,
			backoff, clk)
		a.Authorizer = authorizer.AuthorizerFunc(z.Authorize)
	default:
		return nil, fmt.Errorf("authorization.mode: unsupported mode %q (AlwaysAllow or Webhook)", mode)
	}
	return a, nil
}

// Run reloads the client CA file when it changes until ctx is done, and
// returns then with nothing left running. Without a client CA file it
// returns at once.
func (a *Auth) Run(ctx context.Context) {
	if a.clientCA != nil {
		a.clientCA.Run(ctx)
	}
}

// verbs maps HTTP methods to API verbs, as the kubelet does.
var verbs = map[string]string{
	http.MethodGet:    "get",
	http.MethodPost:   "create",
	http.MethodPut:    "update",
	http.MethodPatch:  "patch",
	http.MethodDelete: "delete",
}

// isSubpath reports whether p is path itself or below it.
func isSubpath(p, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return p == path || (strings.HasPrefix(p, path) && p[len(path)] == '/')
}

// Subresources returns the node subresources a request to path is
// authorized against, in order; the request is allowed when any is.
// The mapping is the kubelet's with fine-grained authorization (GA and
// locked on since 1.36, pkg/kubelet/server/auth.go): /pods, /runningpods,
// /healthz and /configz check their own subresource, then proxy; /stats,
// /metrics, /logs, /checkpoint, /statusz and /flagz their own only;
// everything else (containerLogs, exec, attach, portForward, run) proxy.
func Subresources(path string) []string {
	var subs []string
	switch {
	case isSubpath(path, "/pods"), isSubpath(path, "/runningpods"):
		subs = append(subs, "pods")
	case isSubpath(path, "/healthz"):
		subs = append(subs, "healthz")
	case isSubpath(path, "/configz"):
		subs = append(subs, "configz")
	}
	switch {
	case isSubpath(path, "/stats"):
		subs = append(subs, "stats")
	case isSubpath(path, "/metrics"):
		subs = append(subs, "metrics")
	case isSubpath(path, "/logs"):
		subs = append(subs, "log")
	case isSubpath(path, "/checkpoint"):
		subs = append(subs, "checkpoint")
	case isSubpath(path, "/statusz"):
		subs = append(subs, "statusz")
	case isSubpath(path, "/flagz"):
		subs = append(subs, "configz")
	default:
		subs = append(subs, "proxy")
	}
	return subs
}

// Attributes are the authorization attributes of a request by u: resource
// nodes, name the node, verb from the HTTP method, one record per
// subresource of Subresources.
func (a *Auth) Attributes(u user.Info, r *http.Request) []authorizer.Attributes {
	var attrs []authorizer.Attributes
	for _, sub := range Subresources(r.URL.Path) {
		attrs = append(attrs, authorizer.AttributesRecord{
			User:            u,
			Verb:            verbs[r.Method],
			APIVersion:      "v1",
			Resource:        "nodes",
			Subresource:     sub,
			Name:            a.NodeName,
			ResourceRequest: true,
			Path:            r.URL.Path,
		})
	}
	return attrs
}

// Filter authenticates and authorizes every request before next: 401
// "Unauthorized" without valid credentials, 403 naming the user, verb,
// resource and subresources when not allowed, 500 when the authorizer
// fails, as the kubelet answers.
func (a *Auth) Filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		resp, ok, err := a.Authenticator.AuthenticateRequest(r)
		if err != nil {
			logger.V(2).Info("Unable to authenticate the request", "err", err)
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := a.Attributes(resp.User, r)
		var subs []string
		for _, attr := range attrs {
			subs = append(subs, attr.GetSubresource())
			decision, _, err := a.Authorizer.Authorize(r.Context(), attr)
			if err != nil {
				logger.Error(err, "Authorization error", "user", resp.User.GetName(), "verb", attr.GetVerb(), "resource", attr.GetResource(), "subresource", attr.GetSubresource())
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					resp.User.GetName(), attr.GetVerb(), attr.GetResource(), attr.GetSubresource()), http.StatusInternalServerError)
				return
			}
			if decision == authorizer.DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
		}
		logger.V(2).Info("Forbidden", "user", resp.User.GetName(), "verb", verbs[r.Method], "resource", "nodes", "subresources", subs)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)",
			resp.User.GetName(), verbs[r.Method], subs), http.StatusForbidden)
	})
}
