package agent

import (
	"testing"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heartlet/heartlet/internal/kubeapi/kubeapifake"
	"github.com/heartlet/heartlet/internal/kubeclient"
)

// The getter reads RuntimeClasses from the API and keeps NotFound
// recognizable through its wrapping, which podsync's contract needs; there
// is none in standalone mode.
func TestRuntimeClassGetter(t *testing.T) {
	if runtimeClasses(nil) != nil {
		t.Fatal("standalone mode has a RuntimeClass getter")
	}
	kube := fake.NewClientset(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"})
	g := runtimeClasses(&kubeclient.Client{Kube: kubeapifake.Wrap(kube)})
	rc, err := g.GetRuntimeClass(t.Context(), "gvisor")
	if err != nil || rc.Handler != "runsc" {
		t.Fatalf("GetRuntimeClass(gvisor) = %+v, %v; want handler runsc", rc, err)
	}
	if _, err := g.GetRuntimeClass(t.Context(), "missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("GetRuntimeClass(missing) = %v, want NotFound", err)
	}
}
