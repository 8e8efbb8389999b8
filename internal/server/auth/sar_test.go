package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeReviews answers SubjectAccessReviews with answer and records them.
type fakeReviews struct {
	mu     sync.Mutex
	specs  []authorizationv1.SubjectAccessReviewSpec
	answer func(authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error)
}

func (f *fakeReviews) client() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.mu.Lock()
		f.specs = append(f.specs, sar.Spec)
		answer := f.answer
		f.mu.Unlock()
		st, err := answer(sar.Spec)
		if err != nil {
			return true, nil, err
		}
		sar.Status = st
		return true, sar, nil
	})
	return cs
}

func (f *fakeReviews) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func nodeAttrs(name string, groups ...string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: name, UID: name + "-uid", Groups: groups, Extra: map[string][]string{"scopes": {"a"}}},
		Verb: "get", APIVersion: "v1", Resource: "nodes", Subresource: "proxy", Name: "node-a", ResourceRequest: true,
	}
}

// Who may do what is the API server's answer for that very user and
// request, kept no longer than the TTLs: an answer for one user, group set
// or subresource is never taken for another, a denial is asked again after
// the shorter TTL, and a review that fails never allows.
func TestSARAuthorizer(t *testing.T) {
	ctx := context.Background()
	reviews := &fakeReviews{answer: func(s authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
		allowed := s.User == "admin" || (len(s.Groups) == 1 && s.Groups[0] == "ops")
		return authorizationv1.SubjectAccessReviewStatus{Allowed: allowed, Denied: s.User == "mallory", Reason: "policy"}, nil
	}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	z := newSARAuthorizer(reviews.client().AuthorizationV1().SubjectAccessReviews(), 5*time.Minute, 30*time.Second,
		wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}, clk)

	steps := []struct {
		name       string
		attrs      authorizer.AttributesRecord
		step       time.Duration
		want       authorizer.Decision
		newReviews int
	}{
		{"admin allowed", nodeAttrs("admin"), 0, authorizer.DecisionAllow, 1},
		{"admin again: kept", nodeAttrs("admin"), time.Minute, authorizer.DecisionAllow, 0},
		{"bob, same request: asked, not allowed", nodeAttrs("bob"), 0, authorizer.DecisionNoOpinion, 1},
		{"bob in group ops: asked anew, allowed", nodeAttrs("bob", "ops"), 0, authorizer.DecisionAllow, 1},
		{"bob without the group again: kept as not allowed", nodeAttrs("bob"), 0, authorizer.DecisionNoOpinion, 0},
		{"mallory denied", nodeAttrs("mallory"), 0, authorizer.DecisionDeny, 1},
		{"bob after the deny TTL: asked again", nodeAttrs("bob"), 31 * time.Second, authorizer.DecisionNoOpinion, 1},
		{"admin within the allow TTL: kept", nodeAttrs("admin"), 0, authorizer.DecisionAllow, 0},
		{"admin after the allow TTL: asked again", nodeAttrs("admin"), 5 * time.Minute, authorizer.DecisionAllow, 1},
	}
	for _, st := range steps {
		clk.Step(st.step)
		before := reviews.count()
		got, reason, err := z.Authorize(ctx, st.attrs)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got != st.want {
			t.Errorf("%s: decision %v, want %v", st.name, got, st.want)
		}
		if reason != "policy" {
			t.Errorf("%s: reason %q, want the API server's", st.name, reason)
		}
		if n := reviews.count() - before; n != st.newReviews {
			t.Errorf("%s: %d reviews, want %d", st.name, n, st.newReviews)
		}
	}

	// The review names the user and the request as they are.
	reviews.mu.Lock()
	s := reviews.specs[0]
	reviews.mu.Unlock()
	ra := s.ResourceAttributes
	if s.User != "admin" || s.UID != "admin-uid" || len(s.Extra["scopes"]) != 1 || ra == nil ||
		ra.Verb != "get" || ra.Version != "v1" || ra.Resource != "nodes" || ra.Subresource != "proxy" || ra.Name != "node-a" {
		t.Errorf("review spec %+v (resource %+v)", s, ra)
	}
}

func TestSARAuthorizerFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls int
	}{
		{"API server error: retried", apierrors.NewInternalError(errors.New("etcd down")), 3},
		{"too many requests: retried", apierrors.NewTooManyRequests("slow down", 1), 3},
		{"connection failure: retried", errors.New("dial tcp: connection refused"), 3},
		{"the node may not ask: not retried", apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fail := true
			reviews := &fakeReviews{answer: func(authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
				if fail {
					return authorizationv1.SubjectAccessReviewStatus{}, tc.err
				}
				return authorizationv1.SubjectAccessReviewStatus{Allowed: true}, nil
			}}
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			z := newSARAuthorizer(reviews.client().AuthorizationV1().SubjectAccessReviews(), 5*time.Minute, 30*time.Second,
				wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}, clk)
			got, _, err := z.Authorize(ctx, nodeAttrs("admin"))
			if err == nil || got == authorizer.DecisionAllow {
				t.Fatalf("failed review: decision %v, error %v; want an error and no allow", got, err)
			}
			if n := reviews.count(); n != tc.wantCalls {
				t.Errorf("%d reviews, want %d", n, tc.wantCalls)
			}
			// The failure is not kept: the next request asks again.
			reviews.mu.Lock()
			fail = false
			reviews.mu.Unlock()
			if got, _, err := z.Authorize(ctx, nodeAttrs("admin")); err != nil || got != authorizer.DecisionAllow {
				t.Errorf("after the API server recovered: %v, %v", got, err)
			}
		})
	}
}

// Without TTLs nothing is kept.
func TestSARAuthorizerNoCache(t *testing.T) {
	reviews := &fakeReviews{answer: func(authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}, nil
	}}
	z := newSARAuthorizer(reviews.client().AuthorizationV1().SubjectAccessReviews(), 0, 0, wait.Backoff{Steps: 1}, clocktesting.NewFakeClock(time.Now()))
	for range 3 {
		if got, _, err := z.Authorize(context.Background(), nodeAttrs("admin")); err != nil || got != authorizer.DecisionAllow {
			t.Fatalf("Authorize = %v, %v", got, err)
		}
	}
	if n := reviews.count(); n != 3 {
		t.Errorf("%d reviews with TTLs of 0, want 3", n)
	}
}
