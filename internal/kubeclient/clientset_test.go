package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"
)

// Client-go's fake Clientset is what the tests of heartlet's packages hand
// them, so it must stay an Interface.
var _ Interface = fake.NewClientset()

// TestCSRClientWatchList checks that the CSR adapter passes on whether the
// client streams lists: client-go's CSR wait hangs on a fake Clientset
// that is asked to.
func TestCSRClientWatchList(t *testing.T) {
	if !watchlist.DoesClientNotSupportWatchListSemantics(CSRClient(fake.NewClientset())) {
		t.Error("fake Clientset: the adapter claims watch-list support")
	}
	kube, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if watchlist.DoesClientNotSupportWatchListSemantics(CSRClient(kube)) {
		t.Error("REST client: the adapter denies watch-list support")
	}
}

// TestNewForConfigGroups checks that every group client of NewForConfig
// reaches the configured server under its own API path, with the user
// agent of the config.
func TestNewForConfigGroups(t *testing.T) {
	var mu sync.Mutex
	var paths, agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()

	kube, err := NewForConfig(&rest.Config{Host: srv.URL, UserAgent: "heartlet-test", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := metav1.GetOptions{}
	_, _ = kube.CoreV1().Nodes().Get(ctx, "n", get)
	_, _ = kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, "n", get)
	_, _ = kube.StorageV1().CSINodes().Get(ctx, "n", get)
	_, _ = kube.NodeV1().RuntimeClasses().Get(ctx, "r", get)
	_, _ = kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "c", get)
	_, _ = kube.CertificatesV1beta1().CertificateSigningRequests().Get(ctx, "c", get)
	_, _ = CSRClient(kube).CertificatesV1().CertificateSigningRequests().Get(ctx, "d", get)
	_, _ = CSRClient(kube).CertificatesV1beta1().CertificateSigningRequests().Get(ctx, "d", get)

	want := []string{
		"/api/v1/nodes/n",
		"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n",
		"/apis/storage.k8s.io/v1/csinodes/n",
		"/apis/node.k8s.io/v1/runtimeclasses/r",
		"/apis/certificates.k8s.io/v1/certificatesigningrequests/c",
		"/apis/certificates.k8s.io/v1beta1/certificatesigningrequests/c",
		"/apis/certificates.k8s.io/v1/certificatesigningrequests/d",
		"/apis/certificates.k8s.io/v1beta1/certificatesigningrequests/d",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(paths, want) {
		t.Errorf("paths\n got %q\nwant %q", paths, want)
	}
	for _, a := range agents {
		if a != "heartlet-test" {
			t.Errorf("user agent %q, want heartlet-test", a)
		}
	}
}

// TestNewForConfigRateLimit checks that a QPS without a burst is refused
// as client-go's NewForConfig refuses it, and that the groups share the
// config's rate limiter.
func TestNewForConfigRateLimit(t *testing.T) {
	if _, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5}); err == nil {
		t.Error("QPS 5 without burst: no error")
	}
	kube, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 7})
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
