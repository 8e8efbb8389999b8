package kubeclient

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1beta1 "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1 "k8s.io/client-go/kubernetes/typed/node/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/watchlist"
)

// Interface is the part of the Kubernetes API heartlet calls: the typed
// clients of the API groups it reads and writes, and nothing else. The
// all-groups client-go Clientset links the typed clients, apply
// configurations and discovery of every API group (about 9 MiB of resident
// binary); heartlet builds only these. client-go's fake Clientset satisfies
// it, so tests keep using that.
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	StorageV1() storagev1.StorageV1Interface
	NodeV1() nodev1.NodeV1Interface
	CertificatesV1() certificatesv1.CertificatesV1Interface
	// CertificatesV1beta1 is where client-go's CSR helpers look for a
	// request the v1 API does not know.
	CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
}

// clientset is Interface over REST: one typed client per group, all sharing
// one HTTP client and one rate limiter, as client-go's Clientset does.
type clientset struct {
	core                *corev1.CoreV1Client
	coordination        *coordinationv1.CoordinationV1Client
	storage             *storagev1.StorageV1Client
	node                *nodev1.NodeV1Client
	certificates        *certificatesv1.CertificatesV1Client
	certificatesV1beta1 *certificatesv1beta1.CertificatesV1beta1Client
	authentication      *authenticationv1.AuthenticationV1Client
	authorization       *authorizationv1.AuthorizationV1Client
}

func (c *clientset) CoreV1() corev1.CoreV1Interface { return c.core }
func (c *clientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return c.coordination
}
func (c *clientset) StorageV1() storagev1.StorageV1Interface { return c.storage }
func (c *clientset) NodeV1() nodev1.NodeV1Interface          { return c.node }
func (c *clientset) CertificatesV1() certificatesv1.CertificatesV1Interface {
	return c.certificates
}
func (c *clientset) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.certificatesV1beta1
}
func (c *clientset) AuthenticationV1() authenticationv1.AuthenticationV1Interface {
	return c.authentication
}
func (c *clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface {
	return c.authorization
}

// NewForConfig builds an Interface for c the way client-go's
// NewForConfig builds its Clientset: the default user agent when
// c names none, one HTTP client shared by the groups, and one token bucket
// of c's QPS and Burst shared by them when c has no rate limiter.
func NewForConfig(c *rest.Config) (Interface, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("HTTP client: %w", err)
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst is required to be greater than 0 when RateLimiter is not set and QPS is set to greater than 0")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	var cs clientset
	if cs.core, err = corev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("core/v1 client: %w", err)
	}
	if cs.coordination, err = coordinationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("coordination/v1 client: %w", err)
	}
	if cs.storage, err = storagev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("storage/v1 client: %w", err)
	}
	if cs.node, err = nodev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("node/v1 client: %w", err)
	}
	if cs.certificates, err = certificatesv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("certificates/v1 client: %w", err)
	}
	if cs.certificatesV1beta1, err = certificatesv1beta1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("certificates/v1beta1 client: %w", err)
	}
	if cs.authentication, err = authenticationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("authentication/v1 client: %w", err)
	}
	if cs.authorization, err = authorizationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("authorization/v1 client: %w", err)
	}
	return &cs, nil
}

// CSRClient adapts kube to the all-groups client-go Interface that
// client-go's certificate manager and CSR helpers take. Those call only the
// certificates groups; any other group is nil, so a call to one panics
// rather than reaching a client heartlet does not build.
func CSRClient(kube Interface) kubernetes.Interface {
	return csrClient{kube: kube}
}

type csrClient struct {
	kubernetes.Interface // nil
	kube                 Interface
}

func (c csrClient) CertificatesV1() certificatesv1.CertificatesV1Interface {
	return c.kube.CertificatesV1()
}

func (c csrClient) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.kube.CertificatesV1beta1()
}

// IsWatchListSemanticsUnSupported passes on kube's answer, if it has one,
// to the informer of client-go's CSR wait: client-go's fake Clientset
// cannot stream a list, and says so with this method.
func (c csrClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.kube)
}
