package kubeapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Scheme holds the types of the API groups Interface calls, and nothing
// else. Event recorders resolve object references with it.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(coordinationv1.AddToScheme(Scheme))
	utilruntime.Must(storagev1.AddToScheme(Scheme))
	utilruntime.Must(nodev1.AddToScheme(Scheme))
	utilruntime.Must(certificatesv1.AddToScheme(Scheme))
	utilruntime.Must(authenticationv1.AddToScheme(Scheme))
	utilruntime.Must(authorizationv1.AddToScheme(Scheme))
}

// NewForConfig builds an Interface over REST for c the way client-go's
// NewForConfig builds its clientset: the default user agent when c names
// none, one HTTP client shared by the groups, and one token bucket of c's
// QPS and Burst shared by them when c has no rate limiter.
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
	for _, g := range []struct {
		gv  schema.GroupVersion
		out *rest.Interface
	}{
		{corev1.SchemeGroupVersion, &cs.core},
		{coordinationv1.SchemeGroupVersion, &cs.coordination},
		{storagev1.SchemeGroupVersion, &cs.storage},
		{nodev1.SchemeGroupVersion, &cs.node},
		{certificatesv1.SchemeGroupVersion, &cs.certificates},
		{authenticationv1.SchemeGroupVersion, &cs.authentication},
		{authorizationv1.SchemeGroupVersion, &cs.authorization},
	} {
		rc, err := groupClient(cfg, httpClient, g.gv)
		if err != nil {
			return nil, fmt.Errorf("%s client: %w", g.gv, err)
		}
		*g.out = rc
	}
	return &cs, nil
}

// groupClient is the REST client of one group version, configured as
// client-go's generated clients configure theirs.
func groupClient(cfg rest.Config, httpClient *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
	return rest.RESTClientForConfigAndClient(&cfg, httpClient)
}

// clientset is Interface over REST: one REST client per group, all sharing
// one HTTP client and one rate limiter.
type clientset struct {
	core, coordination, storage, node, certificates, authentication, authorization rest.Interface
}

func (c *clientset) CoreV1() CoreV1Interface                 { return coreV1{c.core} }
func (c *clientset) CoordinationV1() CoordinationV1Interface { return coordinationV1{c.coordination} }
func (c *clientset) StorageV1() StorageV1Interface           { return storageV1{c.storage} }
func (c *clientset) NodeV1() NodeV1Interface                 { return nodeV1{c.node} }
func (c *clientset) CertificatesV1() CertificatesV1Interface { return certificatesV1{c.certificates} }
func (c *clientset) AuthenticationV1() AuthenticationV1Interface {
	return authenticationV1{c.authentication}
}
func (c *clientset) AuthorizationV1() AuthorizationV1Interface {
	return authorizationV1{c.authorization}
}

type coreV1 struct{ rc rest.Interface }

func (g coreV1) RESTClient() rest.Interface { return g.rc }
func (g coreV1) Pods(ns string) PodInterface {
	return newResource[corev1.Pod, corev1.PodList](g.rc, "pods", ns)
}
func (g coreV1) Nodes() NodeInterface {
	return newResource[corev1.Node, corev1.NodeList](g.rc, "nodes", "")
}
func (g coreV1) PersistentVolumeClaims(ns string) PersistentVolumeClaimInterface {
	return newResource[corev1.PersistentVolumeClaim, corev1.PersistentVolumeClaimList](g.rc, "persistentvolumeclaims", ns)
}
func (g coreV1) PersistentVolumes() PersistentVolumeInterface {
	return newResource[corev1.PersistentVolume, corev1.PersistentVolumeList](g.rc, "persistentvolumes", "")
}
func (g coreV1) Namespaces() NamespaceInterface {
	return newResource[corev1.Namespace, corev1.NamespaceList](g.rc, "namespaces", "")
}
func (g coreV1) Services(ns string) ServiceInterface {
	return newResource[corev1.Service, corev1.ServiceList](g.rc, "services", ns)
}
func (g coreV1) ServiceAccounts(ns string) ServiceAccountInterface {
	return serviceAccounts{newResource[corev1.ServiceAccount, corev1.ServiceAccountList](g.rc, "serviceaccounts", ns)}
}
func (g coreV1) Secrets(ns string) SecretInterface {
	return newResource[corev1.Secret, corev1.SecretList](g.rc, "secrets", ns)
}
func (g coreV1) ConfigMaps(ns string) ConfigMapInterface {
	return newResource[corev1.ConfigMap, corev1.ConfigMapList](g.rc, "configmaps", ns)
}
func (g coreV1) Events(ns string) EventInterface {
	return newResource[corev1.Event, corev1.EventList](g.rc, "events", ns)
}

type serviceAccounts struct {
	*resource[*corev1.ServiceAccount, *corev1.ServiceAccountList]
}

func (c serviceAccounts) CreateToken(ctx context.Context, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error) {
	out := &authenticationv1.TokenRequest{}
	err := c.request(c.rc.Post()).Name(name).SubResource("token").
		VersionedParams(&opts, parameterCodec).Body(req).Do(ctx).Into(out)
	return out, err
}

type coordinationV1 struct{ rc rest.Interface }

func (g coordinationV1) RESTClient() rest.Interface { return g.rc }
func (g coordinationV1) Leases(ns string) LeaseInterface {
	return newResource[coordinationv1.Lease, coordinationv1.LeaseList](g.rc, "leases", ns)
}

type storageV1 struct{ rc rest.Interface }

func (g storageV1) CSINodes() CSINodeInterface {
	return newResource[storagev1.CSINode, storagev1.CSINodeList](g.rc, "csinodes", "")
}
func (g storageV1) CSIDrivers() CSIDriverInterface {
	return newResource[storagev1.CSIDriver, storagev1.CSIDriverList](g.rc, "csidrivers", "")
}
func (g storageV1) VolumeAttachments() VolumeAttachmentInterface {
	return newResource[storagev1.VolumeAttachment, storagev1.VolumeAttachmentList](g.rc, "volumeattachments", "")
}

type nodeV1 struct{ rc rest.Interface }

func (g nodeV1) RuntimeClasses() RuntimeClassInterface {
	return newResource[nodev1.RuntimeClass, nodev1.RuntimeClassList](g.rc, "runtimeclasses", "")
}

type certificatesV1 struct{ rc rest.Interface }

func (g certificatesV1) CertificateSigningRequests() CertificateSigningRequestInterface {
	return newResource[certificatesv1.CertificateSigningRequest, certificatesv1.CertificateSigningRequestList](g.rc, "certificatesigningrequests", "")
}

type authenticationV1 struct{ rc rest.Interface }

func (g authenticationV1) TokenReviews() TokenReviewInterface {
	return creator[authenticationv1.TokenReview, *authenticationv1.TokenReview]{g.rc, "tokenreviews"}
}
func (g authenticationV1) SelfSubjectReviews() SelfSubjectReviewInterface {
	return creator[authenticationv1.SelfSubjectReview, *authenticationv1.SelfSubjectReview]{g.rc, "selfsubjectreviews"}
}

type authorizationV1 struct{ rc rest.Interface }

func (g authorizationV1) SubjectAccessReviews() SubjectAccessReviewInterface {
	return creator[authorizationv1.SubjectAccessReview, *authorizationv1.SubjectAccessReview]{g.rc, "subjectaccessreviews"}
}
func (g authorizationV1) SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface {
	return creator[authorizationv1.SelfSubjectAccessReview, *authorizationv1.SelfSubjectAccessReview]{g.rc, "selfsubjectaccessreviews"}
}

// object is what the generic clients handle: an API object with metadata.
type object interface {
	runtime.Object
	GetName() string
}

// resource is StatusClient over REST for one resource of a group in one
// namespace ("" for cluster-scoped resources or all namespaces).
type resource[T object, L runtime.Object] struct {
	rc       rest.Interface
	resource string
	ns       string
	newT     func() T
	newL     func() L
}

// newResource returns the client of resource name in namespace ns, for
// objects of type *E and lists of type *LE.
func newResource[E, LE any, T interface {
	*E
	object
}, L interface {
	*LE
	runtime.Object
}](rc rest.Interface, name, ns string) *resource[T, L] {
	return &resource[T, L]{rc: rc, resource: name, ns: ns,
		newT: func() T { return T(new(E)) }, newL: func() L { return L(new(LE)) }}
}

// request points r at the resource and its namespace, with protobuf
// preferred as client-go's clients of built-in types prefer it.
func (c *resource[T, L]) request(r *rest.Request) *rest.Request {
	return r.UseProtobufAsDefaultIfPreferred(true).NamespaceIfScoped(c.ns, c.ns != "").Resource(c.resource)
}

func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds != nil {
		return time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return 0
}

func (c *resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := c.newT()
	err := c.request(c.rc.Get()).Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := c.newL()
	err := c.request(c.rc.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (c *resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.request(c.rc.Get()).VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

func (c *resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := c.newT()
	err := c.request(c.rc.Post()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := c.newT()
	err := c.request(c.rc.Put()).Name(obj.GetName()).VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *resource[T, L]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := c.newT()
	err := c.request(c.rc.Put()).Name(obj.GetName()).SubResource("status").VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.request(c.rc.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := c.newT()
	err := c.request(c.rc.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, parameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// creator is Creator over REST for a cluster-scoped review resource.
type creator[E any, T interface {
	*E
	runtime.Object
}] struct {
	rc       rest.Interface
	resource string
}

func (c creator[E, T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := T(new(E))
	err := c.rc.Post().UseProtobufAsDefaultIfPreferred(true).Resource(c.resource).
		VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}
