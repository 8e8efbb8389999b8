package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// defaultTokenExpirationSeconds is the lifetime asked for when a
	// serviceAccountToken projection does not say (the API's default).
	defaultTokenExpirationSeconds = 3600
	// tokenMaxAge is the age after which a token is renewed whatever its
	// lifetime.
	tokenMaxAge = 24 * time.Hour
	// tokenRefreshPercent: a token is renewed once this share of its
	// lifetime has passed.
	tokenRefreshPercent = 80
	// newPodWindow is how long after its creation a pod's first token
	// request is retried at once when the API server does not know the
	// pod yet (see unseenPodRetries).
	newPodWindow = 30 * time.Second
)

// unseenPodRetries are the waits before each new request of a new pod's
// first token when the API server answered that it does not know the pod
// (NotFound) or that the node may not ask for it (Forbidden: the node
// authorizer has not linked the pod to the node yet). The node's watch
// can deliver a pod before the server's own caches have it; without these
// the pod's sync failed, was retried a second later and a FailedMount
// warning was recorded for it.
var unseenPodRetries = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}

// tokenCache keeps the service account tokens of the pods' projected
// volumes and renews them when due.
type tokenCache struct {
	clk clock.Clock

	mu      sync.Mutex
	entries map[string]*tokenEntry
}

type tokenEntry struct {
	pod types.UID
	tr  *authenticationv1.TokenRequest
}

func newTokenCache(clk clock.Clock) *tokenCache {
	return &tokenCache{clk: clk, entries: map[string]*tokenEntry{}}
}

// get returns the token for the pod's projection, asking request for a new
// one when none is cached or the cached one is due. When a renewal fails
// and the cached token has not expired, the cached one is returned.
func (c *tokenCache) get(ctx context.Context, g Getter, pod *v1.Pod, tp *v1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(defaultTokenExpirationSeconds)
	if tp.ExpirationSeconds != nil {
		exp = *tp.ExpirationSeconds
	}
	var auds []string
	if tp.Audience != "" {
		auds = []string{tp.Audience}
	}
	key := fmt.Sprintf("%s/%s/%s/%d/%s", pod.Namespace, sa, strings.Join(auds, ","), exp, pod.UID)

	c.mu.Lock()
	cached := c.entries[key]
	c.mu.Unlock()
	if cached != nil && !c.due(cached.tr) {
		return cached.tr.Status.Token, nil
	}

	req := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         auds,
			ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1",
				Kind:       "Pod",
				Name:       pod.Name,
				UID:        pod.UID,
			},
		},
	}
	tr, err := g.RequestToken(ctx, pod.Namespace, sa, req)
	if cached == nil && c.clk.Since(pod.CreationTimestamp.Time) < newPodWindow {
		for _, d := range unseenPodRetries {
			if !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
				break
			}
			klog.FromContext(ctx).V(2).Info("The API server does not know the new pod yet, requesting its token again",
				"pod", klog.KObj(pod), "podUID", pod.UID, "retryAfter", d, "err", err)
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("request token for service account %s/%s: %w", pod.Namespace, sa, errors.Join(err, ctx.Err()))
			case <-c.clk.After(d):
			}
			tr, err = g.RequestToken(ctx, pod.Namespace, sa, req)
		}
	}
	if err == nil && (tr == nil || tr.Status.Token == "") {
		err = fmt.Errorf("empty token in the response")
	}
	if err != nil {
		switch {
		case cached == nil:
			return "", fmt.Errorf("request token for service account %s/%s: %w", pod.Namespace, sa, err)
		case c.expired(cached.tr):
			return "", fmt.Errorf("token for service account %s/%s expired and its renewal failed: %w", pod.Namespace, sa, err)
		}
		klog.FromContext(ctx).Error(err, "Couldn't renew service account token, keeping the current one",
			"pod", klog.KObj(pod), "podUID", pod.UID, "serviceAccount", sa)
		return cached.tr.Status.Token, nil
	}
	tr = tr.DeepCopy()
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = &exp
	}
	if tr.Status.ExpirationTimestamp.IsZero() {
		tr.Status.ExpirationTimestamp.Time = c.clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)
	}
	c.mu.Lock()
	c.entries[key] = &tokenEntry{pod: pod.UID, tr: tr}
	c.mu.Unlock()
	return tr.Status.Token, nil
}

// due reports whether a token must be renewed: 80% of its lifetime or 24
// hours have passed since it was issued.
func (c *tokenCache) due(tr *authenticationv1.TokenRequest) bool {
	now := c.clk.Now()
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	if !now.Before(issued.Add(tokenMaxAge)) {
		return true
	}
	return !now.Before(issued.Add(ttl * tokenRefreshPercent / 100))
}

func (c *tokenCache) expired(tr *authenticationv1.TokenRequest) bool {
	return !c.clk.Now().Before(tr.Status.ExpirationTimestamp.Time)
}

// forget drops the tokens of a pod.
func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.pod == uid {
			delete(c.entries, k)
		}
	}
}
