// Package kubeapifake adapts a client-go clientset, typically client-go's
// fake clientset, to kubeapi.Interface, for tests: the clientset's typed
// clients serve kubeapi's resource interfaces as they are, so reactors,
// recorded actions and the object tracker of a fake clientset work as
// usual. heartlet's binary must not import this package: client-go's
// clientset links every API group.
package kubeapifake

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/watchlist"

	"github.com/heartlet/heartlet/internal/kubeapi"
)

// Wrap returns cs as a kubeapi.Interface.
func Wrap(cs kubernetes.Interface) kubeapi.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

// IsWatchListSemanticsUnSupported passes on the clientset's answer to
// client-go's reflectors: a fake clientset cannot stream a list, and says
// so with this method.
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}

func (c clientset) CoreV1() kubeapi.CoreV1Interface { return coreV1{c} }
func (c clientset) CoordinationV1() kubeapi.CoordinationV1Interface {
	return coordinationV1{c}
}
func (c clientset) StorageV1() kubeapi.StorageV1Interface { return storageV1{c} }
func (c clientset) NodeV1() kubeapi.NodeV1Interface       { return nodeV1{c} }
func (c clientset) CertificatesV1() kubeapi.CertificatesV1Interface {
	return certificatesV1{c}
}
func (c clientset) AuthenticationV1() kubeapi.AuthenticationV1Interface {
	return authenticationV1{c}
}
func (c clientset) AuthorizationV1() kubeapi.AuthorizationV1Interface {
	return authorizationV1{c}
}

type coreV1 struct{ clientset }

func (g coreV1) RESTClient() rest.Interface          { return g.cs.CoreV1().RESTClient() }
func (g coreV1) Pods(ns string) kubeapi.PodInterface { return g.cs.CoreV1().Pods(ns) }
func (g coreV1) Nodes() kubeapi.NodeInterface        { return g.cs.CoreV1().Nodes() }
func (g coreV1) PersistentVolumes() kubeapi.PersistentVolumeInterface {
	return g.cs.CoreV1().PersistentVolumes()
}
func (g coreV1) PersistentVolumeClaims(ns string) kubeapi.PersistentVolumeClaimInterface {
	return g.cs.CoreV1().PersistentVolumeClaims(ns)
}
func (g coreV1) Namespaces() kubeapi.NamespaceInterface { return g.cs.CoreV1().Namespaces() }
func (g coreV1) Services(ns string) kubeapi.ServiceInterface {
	return g.cs.CoreV1().Services(ns)
}
func (g coreV1) ServiceAccounts(ns string) kubeapi.ServiceAccountInterface {
	return g.cs.CoreV1().ServiceAccounts(ns)
}
func (g coreV1) Secrets(ns string) kubeapi.SecretInterface { return g.cs.CoreV1().Secrets(ns) }
func (g coreV1) ConfigMaps(ns string) kubeapi.ConfigMapInterface {
	return g.cs.CoreV1().ConfigMaps(ns)
}
func (g coreV1) Events(ns string) kubeapi.EventInterface { return g.cs.CoreV1().Events(ns) }

type coordinationV1 struct{ clientset }

func (g coordinationV1) RESTClient() rest.Interface { return g.cs.CoordinationV1().RESTClient() }
func (g coordinationV1) Leases(ns string) kubeapi.LeaseInterface {
	return g.cs.CoordinationV1().Leases(ns)
}

type storageV1 struct{ clientset }

func (g storageV1) CSINodes() kubeapi.CSINodeInterface     { return g.cs.StorageV1().CSINodes() }
func (g storageV1) CSIDrivers() kubeapi.CSIDriverInterface { return g.cs.StorageV1().CSIDrivers() }
func (g storageV1) VolumeAttachments() kubeapi.VolumeAttachmentInterface {
	return g.cs.StorageV1().VolumeAttachments()
}

type nodeV1 struct{ clientset }

func (g nodeV1) RuntimeClasses() kubeapi.RuntimeClassInterface {
	return g.cs.NodeV1().RuntimeClasses()
}

type certificatesV1 struct{ clientset }

func (g certificatesV1) CertificateSigningRequests() kubeapi.CertificateSigningRequestInterface {
	return g.cs.CertificatesV1().CertificateSigningRequests()
}

type authenticationV1 struct{ clientset }

func (g authenticationV1) TokenReviews() kubeapi.TokenReviewInterface {
	return g.cs.AuthenticationV1().TokenReviews()
}
func (g authenticationV1) SelfSubjectReviews() kubeapi.SelfSubjectReviewInterface {
	return g.cs.AuthenticationV1().SelfSubjectReviews()
}

type authorizationV1 struct{ clientset }

func (g authorizationV1) SubjectAccessReviews() kubeapi.SubjectAccessReviewInterface {
	return g.cs.AuthorizationV1().SubjectAccessReviews()
}
func (g authorizationV1) SelfSubjectAccessReviews() kubeapi.SelfSubjectAccessReviewInterface {
	return g.cs.AuthorizationV1().SelfSubjectAccessReviews()
}
