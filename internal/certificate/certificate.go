// Package certificate gets and keeps heartlet's certificates as the kubelet
// does: the client certificate through TLS bootstrap (a
// CertificateSigningRequest made with the bootstrap kubeconfig's
// credentials), its rotation before expiry (rotateCertificates), the serving
// certificate through a kubelet-serving CertificateSigningRequest
// (serverTLSBootstrap), and a serving certificate from files that is read
// again when the files change.
//
// The signing requests and their wait (csr.go), the certificate directory's
// files (store.go), the rotation deadlines (renewer.go) and the reloading
// of serving files (files.go) behave as upstream's kubelet's, which uses
// client-go's util/certificate and the API server's dynamiccertificates
// for them; they are written here against the CertificateSigningRequest
// client only, so that the binary does not link client-go's clientset and
// its scheme of every API group.
package certificate

import (
	"crypto/x509/pkix"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// File name prefixes in the certificate directory, as upstream's: the
// client pair is kubelet-client-<timestamp>.pem with the symlink
// kubelet-client-current.pem, the serving pair kubelet-server-*.pem.
const (
	ClientPairPrefix = "kubelet-client"
	ServerPairPrefix = "kubelet-server"
	// CurrentClientFile is the client pair's symlink in the certificate
	// directory; the kubeconfig written by Bootstrap names it.
	CurrentClientFile = ClientPairPrefix + "-current.pem"
	// bootstrapKeyFile holds the private key of a client signing request
	// while it waits, so that a restart asks again with the same key and
	// finds its earlier request.
	bootstrapKeyFile = ClientPairPrefix + ".key.tmp"
)

// The signers heartlet asks, as upstream's kubelet.
const (
	ClientSigner  = certificatesv1.KubeAPIServerClientKubeletSignerName
	ServingSigner = certificatesv1.KubeletServingSignerName
)

// NodeSubject is the subject of the node's certificates, client and
// serving: CN=system:node:<node name>, O=system:nodes.
func NodeSubject(nodeName string) pkix.Name {
	return pkix.Name{
		CommonName:   fmt.Sprintf("system:node:%s", nodeName),
		Organization: []string{"system:nodes"},
	}
}
