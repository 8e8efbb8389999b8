// Package kubeapi is the part of the Kubernetes API heartlet calls: typed
// clients for the resources of the API groups it reads and writes, over
// REST, and the scheme of those groups alone.
//
// client-go's generated typed clients register every API group's types in
// one scheme when any of them is imported; with the apply configurations
// and discovery they bring, that is about a quarter of heartlet's binary
// and of its resident memory. The interfaces here have the methods and
// signatures of client-go's typed interfaces (a subset of them), so code
// calling kube.CoreV1().Pods(ns).Get(...) reads the same, and client-go's
// typed clients, the fake ones included, satisfy the resource interfaces;
// package kubeapifake adapts client-go's fake clientset to Interface for
// tests.
package kubeapi

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Interface is the API groups heartlet calls.
type Interface interface {
	CoreV1() CoreV1Interface
	CoordinationV1() CoordinationV1Interface
	StorageV1() StorageV1Interface
	NodeV1() NodeV1Interface
	CertificatesV1() CertificatesV1Interface
	AuthenticationV1() AuthenticationV1Interface
	AuthorizationV1() AuthorizationV1Interface
}

// Client is the verbs of a resource that has them all: T is the object,
// L its list. The methods and their semantics are client-go's typed
// clients': a returned object is meaningful only when the error is nil.
type Client[T, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// StatusClient is Client for a resource with a status subresource.
type StatusClient[T, L runtime.Object] interface {
	Client[T, L]
	// UpdateStatus replaces the object's status (PUT .../status).
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Creator is a resource that is only created: a review the server answers
// in the returned object.
type Creator[T runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// The resources heartlet calls, by the names of client-go's interfaces.
type (
	PodInterface                   = StatusClient[*corev1.Pod, *corev1.PodList]
	NodeInterface                  = StatusClient[*corev1.Node, *corev1.NodeList]
	PersistentVolumeClaimInterface = StatusClient[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]
	PersistentVolumeInterface      = StatusClient[*corev1.PersistentVolume, *corev1.PersistentVolumeList]
	NamespaceInterface             = StatusClient[*corev1.Namespace, *corev1.NamespaceList]
	ServiceInterface               = StatusClient[*corev1.Service, *corev1.ServiceList]
	SecretInterface                = Client[*corev1.Secret, *corev1.SecretList]
	ConfigMapInterface             = Client[*corev1.ConfigMap, *corev1.ConfigMapList]
	EventInterface                 = Client[*corev1.Event, *corev1.EventList]

	LeaseInterface = Client[*coordinationv1.Lease, *coordinationv1.LeaseList]

	CSINodeInterface          = Client[*storagev1.CSINode, *storagev1.CSINodeList]
	CSIDriverInterface        = Client[*storagev1.CSIDriver, *storagev1.CSIDriverList]
	VolumeAttachmentInterface = StatusClient[*storagev1.VolumeAttachment, *storagev1.VolumeAttachmentList]

	RuntimeClassInterface = Client[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]

	CertificateSigningRequestInterface = StatusClient[*certificatesv1.CertificateSigningRequest, *certificatesv1.CertificateSigningRequestList]

	TokenReviewInterface             = Creator[*authenticationv1.TokenReview]
	SelfSubjectReviewInterface       = Creator[*authenticationv1.SelfSubjectReview]
	SubjectAccessReviewInterface     = Creator[*authorizationv1.SubjectAccessReview]
	SelfSubjectAccessReviewInterface = Creator[*authorizationv1.SelfSubjectAccessReview]
)

// ServiceAccountInterface is the service accounts resource: its verbs and
// the token subresource.
type ServiceAccountInterface interface {
	Client[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	// CreateToken asks for a token of the named service account
	// (POST .../serviceaccounts/name/token).
	CreateToken(ctx context.Context, name string, req *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// CoreV1Interface is the core API group, version v1.
type CoreV1Interface interface {
	// RESTClient is the group's REST client, for requests the typed
	// clients do not make (e.g. GET /version) and for its rate limiter.
	RESTClient() rest.Interface
	Pods(namespace string) PodInterface
	Nodes() NodeInterface
	PersistentVolumeClaims(namespace string) PersistentVolumeClaimInterface
	PersistentVolumes() PersistentVolumeInterface
	Namespaces() NamespaceInterface
	Services(namespace string) ServiceInterface
	ServiceAccounts(namespace string) ServiceAccountInterface
	Secrets(namespace string) SecretInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Events(namespace string) EventInterface
}

// CoordinationV1Interface is coordination.k8s.io/v1.
type CoordinationV1Interface interface {
	RESTClient() rest.Interface
	Leases(namespace string) LeaseInterface
}

// StorageV1Interface is storage.k8s.io/v1.
type StorageV1Interface interface {
	CSINodes() CSINodeInterface
	CSIDrivers() CSIDriverInterface
	VolumeAttachments() VolumeAttachmentInterface
}

// NodeV1Interface is node.k8s.io/v1.
type NodeV1Interface interface {
	RuntimeClasses() RuntimeClassInterface
}

// CertificatesV1Interface is certificates.k8s.io/v1.
type CertificatesV1Interface interface {
	CertificateSigningRequests() CertificateSigningRequestInterface
}

// AuthenticationV1Interface is authentication.k8s.io/v1.
type AuthenticationV1Interface interface {
	TokenReviews() TokenReviewInterface
	SelfSubjectReviews() SelfSubjectReviewInterface
}

// AuthorizationV1Interface is authorization.k8s.io/v1.
type AuthorizationV1Interface interface {
	SubjectAccessReviews() SubjectAccessReviewInterface
	SelfSubjectAccessReviews() SelfSubjectAccessReviewInterface
}
