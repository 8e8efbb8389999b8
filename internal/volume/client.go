package volume

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heartlet/heartlet/internal/kubeapi"
)

// KubeClient is the API group ConfigMaps, Secrets and tokens are read and asked with: a clientset (kubeclient's, or client-go's fake in
// tests).
type KubeClient interface {
	CoreV1() kubeapi.CoreV1Interface
}

// clientGetter is the Getter that reads through the API server. A node may
// read only the ConfigMaps and Secrets its pods reference and request
// tokens only for its pods' service accounts, which is all it asks for.
type clientGetter struct {
	kube KubeClient
}

// NewClientGetter returns a Getter that reads ConfigMaps and Secrets and
// requests tokens through kube.
func NewClientGetter(kube KubeClient) Getter {
	return clientGetter{kube: kube}
}

// GetConfigMap implements Getter.
func (g clientGetter) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return g.kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetSecret implements Getter.
func (g clientGetter) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return g.kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// RequestToken implements Getter.
func (g clientGetter) RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return g.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
}
