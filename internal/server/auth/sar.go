package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/clock"
)

// sarAuthorizer asks the API server with a SubjectAccessReview whether a
// request's user may do what the request does, as the kubelet's
// delegating webhook authorizer: the review names the user (name, UID,
// groups, extra) and the resource or non-resource attributes; an allowed
// answer is kept for allowTTL, any other for denyTTL (a TTL of 0 keeps
// none), under the whole review spec, so that no answer is shared between
// users or attributes; a failed call is retried with backoff and, when
// it still fails, the request is not authorized and the error returned.
type sarAuthorizer struct {
	reviews  SubjectAccessReviewer
	allowTTL time.Duration
	denyTTL  time.Duration
	backoff  wait.Backoff
	clk      clock.PassiveClock

	mu    sync.Mutex
	cache map[string]sarAnswer
}

// sarAnswer is a kept answer.
type sarAnswer struct {
	decision authorizer.Decision
	reason   string
	expires  time.Time
}

func (a sarAnswer) expiry() time.Time { return a.expires }

// putBounded keeps v under key in m, a cache bounded to max answers:
// when it is full, the answers expired at now are dropped first and, if
// it is still full, every answer.
func putBounded[V interface{ expiry() time.Time }](m map[string]V, key string, v V, now time.Time, max int) {
	if len(m) >= max {
		for k, old := range m {
			if !now.Before(old.expiry()) {
				delete(m, k)
			}
		}
		if len(m) >= max {
			clear(m)
		}
	}
	m[key] = v
}

// maxSARCache bounds the kept answers: past it, expired ones are dropped
// first and then, if still full, every one.
const maxSARCache = 8192

func newSARAuthorizer(reviews SubjectAccessReviewer, allowTTL, denyTTL time.Duration, backoff wait.Backoff, clk clock.PassiveClock) *sarAuthorizer {
	return &sarAuthorizer{reviews: reviews, allowTTL: allowTTL, denyTTL: denyTTL, backoff: backoff, clk: clk, cache: map[string]sarAnswer{}}
}

// Authorize implements authorizer.Authorizer.
func (z *sarAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := reviewSpec(a)
	keyBytes, err := json.Marshal(spec)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
	}
	key := string(keyBytes)
	now := z.clk.Now()
	z.mu.Lock()
	if c, ok := z.cache[key]; ok && now.Before(c.expires) {
		z.mu.Unlock()
		return c.decision, c.reason, nil
	}
	z.mu.Unlock()

	var got *authorizationv1.SubjectAccessReview
	err = z.retry(ctx, func() error {
		var err error
		got, err = z.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authorizer.DecisionNoOpinion, "", fmt.Errorf("subject access review: %w", err)
	}
	decision, ttl := authorizer.DecisionNoOpinion, z.denyTTL
	switch {
	case got.Status.Allowed:
		decision, ttl = authorizer.DecisionAllow, z.allowTTL
	case got.Status.Denied:
		decision = authorizer.DecisionDeny
	}
	if ttl > 0 {
		z.mu.Lock()
		putBounded(z.cache, key, sarAnswer{decision: decision, reason: got.Status.Reason, expires: now.Add(ttl)}, now, maxSARCache)
		z.mu.Unlock()
	}
	return decision, got.Status.Reason, nil
}

// retry calls f until it succeeds, fails for good, or the backoff's steps
// are spent. Failures worth another try are those of the connection, the
// server's 5xx and 429: a review the API server refused (bad request,
// forbidden) is not asked again.
func (z *sarAuthorizer) retry(ctx context.Context, f func() error) error {
	return retryReview(ctx, z.backoff, retriable, f)
}

// retryReview calls f, with backoff's delays between calls, until it
// succeeds, fails with an error that shouldRetry refuses, the steps are
// spent or ctx is done. It returns nil after a success, else f's last
// error, or the wait's (ctx's) when f was never called.
func retryReview(ctx context.Context, backoff wait.Backoff, shouldRetry func(error) bool, f func() error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		last = f()
		switch {
		case last == nil:
			return true, nil
		case shouldRetry(last):
			return false, nil
		default:
			return false, last
		}
	})
	if wait.Interrupted(err) && last != nil {
		return last
	}
	return err
}

// retriable tells whether a failed review is worth asking again: any
// failure without an API status (the connection), a 5xx or a 429.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code >= 500 || code == 429
	}
	return true
}

// reviewSpec is the SubjectAccessReview of a request's attributes.
func reviewSpec(a authorizer.Attributes) authorizationv1.SubjectAccessReviewSpec {
	var spec authorizationv1.SubjectAccessReviewSpec
	if u := a.GetUser(); u != nil {
		spec.User = u.GetName()
		spec.UID = u.GetUID()
		spec.Groups = u.GetGroups()
		if extra := u.GetExtra(); len(extra) > 0 {
			spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
			for k, v := range extra {
				spec.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
	}
	if a.IsResourceRequest() {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace:   a.GetNamespace(),
			Verb:        a.GetVerb(),
			Group:       a.GetAPIGroup(),
			Version:     a.GetAPIVersion(),
			Resource:    a.GetResource(),
			Subresource: a.GetSubresource(),
			Name:        a.GetName(),
		}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.GetPath(), Verb: a.GetVerb()}
	}
	return spec
}
