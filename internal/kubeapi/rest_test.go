package kubeapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"

	"github.com/heartlet/heartlet/internal/kubeapi"
	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
)

// Client-go's fake clientset, wrapped, is what the tests of heartlet's
// packages hand them, so it must stay an Interface and pass on that it
// cannot stream lists.
func TestFakeWrap(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}})
	kube := kubeapifake.Wrap(cs)
	if !watchlist.DoesClientNotSupportWatchListSemantics(kube) {
		t.Error("wrapped fake clientset claims watch-list support")
	}
	p, err := kube.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil || p.Name != "p" {
		t.Fatalf("Get through the wrapper: %v, %v", p, err)
	}
	if n := len(cs.Actions()); n != 1 {
		t.Errorf("%d actions recorded by the fake, want 1", n)
	}
}

// request is what the test server saw of one request.
type request struct {
	method, path, query, contentType, accept, userAgent string
	body                                                string
}

// server answers every request with reply(r) encoded as JSON and records
// the request.
func server(t *testing.T, reply func(r *http.Request) any) (*httptest.Server, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.UserAgent(), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(reply(r))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return append([]request(nil), seen...)
	}
}

// TestVerbs checks that each call reaches the path, method and query the
// API server expects, with the body encoded, and decodes the answer.
func TestVerbs(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	srv, seen := server(t, func(r *http.Request) any {
		switch {
		case strings.HasSuffix(r.URL.Path, "/token"):
			return &authenticationv1.TokenRequest{TypeMeta: metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"}, Status: authenticationv1.TokenRequestStatus{Token: "tok"}}
		case strings.HasSuffix(r.URL.Path, "/pods") && r.Method == http.MethodGet:
			return &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*pod}}
		case strings.Contains(r.URL.Path, "/leases/"):
			return &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		case strings.HasSuffix(r.URL.Path, "/subjectaccessreviews"):
			return &authorizationv1.SubjectAccessReview{TypeMeta: metav1.TypeMeta{Kind: "SubjectAccessReview", APIVersion: "authorization.k8s.io/v1"}, Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}
		case r.Method == http.MethodDelete:
			return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
		}
		return pod
	})
	kube, err := kubeapi.NewForConfig(&rest.Config{Host: srv.URL, UserAgent: "heartlet-test", ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(what string, err error, ok bool) {
		t.Helper()
		if err != nil || !ok {
			t.Errorf("%s: err %v, decoded answer wrong", what, err)
		}
	}
	p, err := kube.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{ResourceVersion: "0"})
	check("get", err, p.UID == "u1")
	l, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n"})
	check("list", err, len(l.Items) == 1 && l.Items[0].Name == "p")
	p, err = kube.CoreV1().Pods("ns").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	check("update status", err, p.UID == "u1")
	p, err = kube.CoreV1().Pods("ns").Patch(ctx, "p", types.StrategicMergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status")
	check("patch status", err, p.UID == "u1")
	err = kube.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{})
	check("delete", err, true)
	tr, err := kube.CoreV1().ServiceAccounts("ns").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	check("create token", err, tr.Status.Token == "tok")
	le, err := kube.CoordinationV1().Leases("kube-node-lease").Update(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.UpdateOptions{})
	check("update lease", err, le.Name == "n")
	sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{}, metav1.CreateOptions{})
	check("create review", err, sar.Status.Allowed)
	_, _ = kube.StorageV1().CSINodes().Get(ctx, "n", metav1.GetOptions{})
	_, _ = kube.NodeV1().RuntimeClasses().Get(ctx, "r", metav1.GetOptions{})
	_, _ = kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{}, metav1.CreateOptions{})
	_, _ = kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})

	want := []request{
		{method: "GET", path: "/api/v1/namespaces/ns/pods/p", query: "resourceVersion=0"},
		{method: "GET", path: "/api/v1/pods", query: "fieldSelector=spec.nodeName%3Dn"},
		{method: "PUT", path: "/api/v1/namespaces/ns/pods/p/status", body: `"uid":"u1"`},
		{method: "PATCH", path: "/api/v1/namespaces/ns/pods/p/status", contentType: "application/strategic-merge-patch+json", body: `{"status":{}}`},
		{method: "DELETE", path: "/api/v1/namespaces/ns/pods/p"},
		{method: "POST", path: "/api/v1/namespaces/ns/serviceaccounts/sa/token", body: `"kind":"TokenRequest"`},
		{method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n", body: `"kind":"Lease"`},
		{method: "POST", path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", body: `"kind":"SubjectAccessReview"`},
		{method: "GET", path: "/apis/storage.k8s.io/v1/csinodes/n"},
		{method: "GET", path: "/apis/node.k8s.io/v1/runtimeclasses/r"},
		{method: "POST", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests"},
		{method: "POST", path: "/apis/authentication.k8s.io/v1/selfsubjectreviews"},
	}
	got := seen()
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || (w.query != "" && g.query != w.query) {
			t.Errorf("request %d: %s %s?%s, want %s %s?%s", i, g.method, g.path, g.query, w.method, w.path, w.query)
		}
		if w.contentType != "" && g.contentType != w.contentType {
			t.Errorf("request %d: content type %q, want %q", i, g.contentType, w.contentType)
		}
		if !strings.Contains(g.body, w.body) {
			t.Errorf("request %d: body %q lacks %q", i, g.body, w.body)
		}
		if g.userAgent != "heartlet-test" {
			t.Errorf("request %d: user agent %q", i, g.userAgent)
		}
	}
}

// TestProtobuf checks that protobuf, heartlet's default encoding, is what
// the clients send and ask for when the config says so, for every group
// of the scheme.
func TestProtobuf(t *testing.T) {
	srv, seen := server(t, func(*http.Request) any {
		return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	})
	kube, err := kubeapi.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = kube.CoreV1().Nodes().UpdateStatus(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.UpdateOptions{})
	_, _ = kube.CoordinationV1().Leases("l").Create(ctx, &coordinationv1.Lease{}, metav1.CreateOptions{})
	_, _ = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	got := seen()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3", len(got))
	}
	for _, r := range got {
		if r.contentType != "application/vnd.kubernetes.protobuf" || !strings.HasPrefix(r.body, "k8s\x00") {
			t.Errorf("%s %s: content type %q, body %q: not protobuf", r.method, r.path, r.contentType, r.body)
		}
		if !strings.HasPrefix(r.accept, "application/vnd.kubernetes.protobuf") {
			t.Errorf("%s %s: accept %q", r.method, r.path, r.accept)
		}
	}
}

// TestWatch checks that a watch asks for one and decodes its events.
func TestWatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" || r.URL.Path != "/api/v1/nodes" {
			http.Error(w, "not a watch of nodes: "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}}` + "\n"))
	}))
	defer srv.Close()
	kube, err := kubeapi.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := <-w.ResultChan()
	if n, ok := ev.Object.(*corev1.Node); ev.Type != watch.Added || !ok || n.Name != "n1" {
		t.Errorf("event %v %#v, want ADDED node n1", ev.Type, ev.Object)
	}
}

// TestNewForConfigRateLimit checks that a QPS without a burst is refused
// as client-go's NewForConfig refuses it, and that the groups share the
// config's rate limiter.
func TestNewForConfigRateLimit(t *testing.T) {
	if _, err := kubeapi.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5}); err == nil {
		t.Error("QPS 5 without burst: no error")
	}
	kube, err := kubeapi.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 7})
	if err != nil {
		t.Fatal(err)
	}
	core := kube.CoreV1().RESTClient().GetRateLimiter()
	if core == nil {
		t.Fatal("core/v1 client has no rate limiter")
	}
	if core != kube.CoordinationV1().RESTClient().GetRateLimiter() {
		t.Error("core/v1 and coordination/v1 do not share the rate limiter")
	}
	if core.QPS() != 5 {
		t.Errorf("QPS %v, want 5", core.QPS())
	}
}
