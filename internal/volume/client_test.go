package volume

import (
	"context"
	"errors"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

func TestClientGetter(t *testing.T) {
	kube := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg"}, Data: map[string]string{"k": "v"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "creds"}, Data: map[string][]byte{"p": []byte("x")}},
	)
	var tokenAction k8stesting.CreateAction
	kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		tokenAction = ca
		tr := ca.GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status.Token = "jwt"
		return true, tr, nil
	})
	g := NewClientGetter(kubeapifake.Wrap(kube))
	ctx := context.Background()

	cm, err := g.GetConfigMap(ctx, "ns1", "cfg")
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("GetConfigMap = %v, %v", cm, err)
	}
	s, err := g.GetSecret(ctx, "ns1", "creds")
	if err != nil || string(s.Data["p"]) != "x" {
		t.Fatalf("GetSecret = %v, %v", s, err)
	}
	if _, err := g.GetSecret(ctx, "ns1", "absent"); !isNotFound(err) {
		t.Fatalf("GetSecret(absent) = %v, want not found", err)
	}
	exp := int64(600)
	tr, err := g.RequestToken(ctx, "ns1", "sa1", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}})
	if err != nil || tr.Status.Token != "jwt" {
		t.Fatalf("RequestToken = %v, %v", tr, err)
	}
	if tokenAction == nil || tokenAction.GetNamespace() != "ns1" {
		t.Fatalf("token request not sent as create serviceaccounts/token in ns1: %v", tokenAction)
	}
	if name := tokenAction.(k8stesting.CreateActionImpl).Name; name != "sa1" {
		t.Errorf("token requested for service account %q, want sa1", name)
	}
}

func TestLookupErrorNotFoundSentinel(t *testing.T) {
	// A Getter may report a missing object with ErrMissingObject instead of
	// an API error.
	err := lookupError(kindSecret, "ns", "s", false, errors.New("wrapped: "+ErrMissingObject.Error()))
	if errors.Is(err, ErrMissingObject) {
		t.Fatalf("a plain error was taken for a missing object: %v", err)
	}
	err = lookupError(kindSecret, "ns", "s", false, &MissingObjectError{Kind: kindSecret, Name: "s"})
	if !errors.Is(err, ErrMissingObject) {
		t.Fatalf("lookupError = %v, want ErrMissingObject", err)
	}
}
