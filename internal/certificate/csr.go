package certificate

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// csrClient is the part of the certificates.k8s.io/v1
// CertificateSigningRequests client this package calls; callers pass
// kube.CertificatesV1().CertificateSigningRequests().
//
// Contract: the API server's. Create makes the object (or fails with an
// AlreadyExists status error when the name is taken); Get reads it; List
// and Watch honour the field selector metadata.name=<name> and Watch
// starts after the list's resource version. Errors from the server are
// status errors (apierrors), which the renewer judges the server's health
// by.
//
// Only v1 is used: the v1beta1 CertificateSigningRequest API, which
// client-go's helpers fell back to, was removed in Kubernetes 1.22.
type csrClient interface {
	Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// csrRetryInterval is how long waitForCertificate waits before it lists
// again after a failed list or watch, or a watch the server closed.
const csrRetryInterval = time.Second

// kubeletClientUsages is what the kubelet's client certificate is asked
// for with, as upstream's: digital signature, key encipherment for an RSA
// key only (a key exchange over it), client auth.
func kubeletClientUsages(privateKey any) []certificatesv1.KeyUsage {
	if _, ok := privateKey.(*rsa.PrivateKey); ok {
		return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	}
	return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
}

// kubeletServingUsages is kubeletClientUsages for the serving
// certificate: server auth instead of client auth.
func kubeletServingUsages(privateKey any) []certificatesv1.KeyUsage {
	if _, ok := privateKey.(*rsa.PrivateKey); ok {
		return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
	}
	return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
}

// csrRequest is one CertificateSigningRequest to make.
type csrRequest struct {
	// name is the object's name; empty makes the server name it
	// (generateName "csr-").
	name string
	// request is the PEM-encoded x509 certificate request.
	request    []byte
	signerName string
	usages     []certificatesv1.KeyUsage
	// key is the request's private key: an existing object of the same
	// name is reused only when its request was signed with it.
	key crypto.Signer
}

// requestCertificate creates the CertificateSigningRequest and returns its
// name and UID. When a name is given and an object of that name exists
// (an earlier run asked and did not see the answer), that object is used
// instead if it is compatible: the same subject, the same signer, a
// request signed by the same key, and no issued certificate that has
// expired at clk's now.
func requestCertificate(ctx context.Context, clk clock.PassiveClock, client csrClient, r csrRequest) (string, types.UID, error) {
	logger := klog.FromContext(ctx)
	obj := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    r.request,
			SignerName: r.signerName,
			Usages:     r.usages,
		},
	}
	if r.name == "" {
		obj.GenerateName = "csr-"
	}
	created, err := client.Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case err == nil:
		logger.V(2).Info("Certificate signing request created", "csr", created.Name)
		return created.Name, created.UID, nil
	case r.name == "" || !apierrors.IsAlreadyExists(err):
		return "", "", fmt.Errorf("create certificate signing request: %w", err)
	}
	logger.Info("Certificate signing request already exists, checking whether it can be reused", "csr", r.name)
	existing, err := client.Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("get the existing certificate signing request %s: %w", r.name, err)
	}
	if err := compatible(existing, obj, r.key, clk.Now()); err != nil {
		return "", "", fmt.Errorf("existing certificate signing request %s cannot be reused: %w", r.name, err)
	}
	logger.Info("Reusing the existing certificate signing request", "csr", existing.Name)
	return existing.Name, existing.UID, nil
}

// compatible says why the existing object does not answer the request
// wanted (nil when it does).
func compatible(existing, wanted *certificatesv1.CertificateSigningRequest, key crypto.Signer, now time.Time) error {
	have, err := parseCertificateRequest(existing.Spec.Request)
	if err != nil {
		return fmt.Errorf("its spec.request: %w", err)
	}
	want, err := parseCertificateRequest(wanted.Spec.Request)
	if err != nil {
		return fmt.Errorf("the new spec.request: %w", err)
	}
	if !reflect.DeepEqual(have.Subject, want.Subject) {
		return fmt.Errorf("subject %q, want %q", have.Subject.String(), want.Subject.String())
	}
	if existing.Spec.SignerName != "" && wanted.Spec.SignerName != "" && existing.Spec.SignerName != wanted.Spec.SignerName {
		return fmt.Errorf("signerName %q, want %q", existing.Spec.SignerName, wanted.Spec.SignerName)
	}
	// Its request must carry the signature of our key: its public key is
	// replaced by ours before the signature is checked.
	have.PublicKey = key.Public()
	if err := have.CheckSignature(); err != nil {
		return fmt.Errorf("not signed by this key: %w", err)
	}
	if len(existing.Status.Certificate) > 0 {
		certs, err := certutil.ParseCertsPEM(existing.Status.Certificate)
		if err != nil {
			return fmt.Errorf("its status.certificate: %w", err)
		}
		for _, c := range certs {
			if now.After(c.NotAfter) {
				return fmt.Errorf("its issued certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
			}
		}
	}
	return nil
}

func parseCertificateRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != certutil.CertificateRequestBlockType {
		return nil, errors.New("no CERTIFICATE REQUEST PEM block")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// errCSRWatchEnded ends one list-and-watch round of waitForCertificate
// so that it lists again.
var errCSRWatchEnded = errors.New("watch ended")

// waitForCertificate waits until the CertificateSigningRequest name (with
// this UID) is approved and has its certificate, and returns the
// certificate (PEM). It fails when the request is denied or failed (the
// error names the condition, its reason and message), deleted, replaced by
// another of the same name, or when ctx ends (the error wraps ctx's cause).
//
// It lists the object by name and watches it from the list's resource
// version; when the list or the watch fails, or the server closes the
// watch, it waits csrRetryInterval on clk and lists again.
func waitForCertificate(ctx context.Context, clk clock.Clock, client csrClient, name string, uid types.UID) ([]byte, error) {
	logger := klog.FromContext(ctx).WithValues("csr", name)
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	seen := false
	for {
		cert, err := waitRound(ctx, client, name, uid, selector, &seen)
		if cert != nil || (err != nil && !errors.Is(err, errCSRWatchEnded)) {
			return cert, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for certificate signing request %s: %w", name, context.Cause(ctx))
		}
		logger.V(2).Info("Watching the certificate signing request ended; listing it again", "reason", err, "after", csrRetryInterval)
		t := clk.NewTimer(csrRetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for certificate signing request %s: %w", name, context.Cause(ctx))
		case <-t.C():
		}
	}
}

// waitRound is one list and watch of waitForCertificate: the certificate,
// or the final error, or an error wrapping errCSRWatchEnded when the round
// ended without an answer. seen records whether the object was ever seen,
// so that its absence from a later list means it was deleted.
func waitRound(ctx context.Context, client csrClient, name string, uid types.UID, selector string, seen *bool) ([]byte, error) {
	logger := klog.FromContext(ctx)
	list, err := client.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", errCSRWatchEnded, err)
	}
	found := false
	for i := range list.Items {
		if list.Items[i].Name != name {
			continue
		}
		found = true
		if cert, err := issued(logger, &list.Items[i], uid); cert != nil || err != nil {
			return cert, err
		}
	}
	if *seen && !found {
		return nil, fmt.Errorf("certificate signing request %s was deleted", name)
	}
	*seen = *seen || found
	w, err := client.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, fmt.Errorf("%w: watch: %w", errCSRWatchEnded, err)
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil, errCSRWatchEnded
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil, fmt.Errorf("%w: closed by the server", errCSRWatchEnded)
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
		case watch.Deleted:
			return nil, fmt.Errorf("certificate signing request %s was deleted", name)
		case watch.Error:
			return nil, fmt.Errorf("%w: %w", errCSRWatchEnded, apierrors.FromObject(ev.Object))
		default:
			continue
		}
		csr, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !isCSR {
			return nil, fmt.Errorf("watch of certificate signing request %s: unexpected %T", name, ev.Object)
		}
		if csr.Name != name {
			continue
		}
		*seen = true
		if cert, err := issued(logger, csr, uid); cert != nil || err != nil {
			return cert, err
		}
	}
}

// issued looks at one state of the request: its certificate when it is
// approved and issued, an error when it is denied, failed or another
// object (another UID), else nothing (waiting on).
func issued(logger klog.Logger, csr *certificatesv1.CertificateSigningRequest, uid types.UID) ([]byte, error) {
	if csr.UID != uid {
		return nil, fmt.Errorf("certificate signing request %s was replaced: UID %s, want %s", csr.Name, csr.UID, uid)
	}
	approved := false
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return nil, fmt.Errorf("certificate signing request %s is %s (reason %q): %s", csr.Name, conditionWord(c.Type), c.Reason, c.Message)
		case certificatesv1.CertificateApproved:
			approved = true
		}
	}
	if !approved {
		return nil, nil
	}
	if len(csr.Status.Certificate) == 0 {
		logger.V(2).Info("Certificate signing request is approved, waiting for it to be issued", "csr", csr.Name)
		return nil, nil
	}
	logger.V(2).Info("Certificate signing request is issued", "csr", csr.Name)
	return csr.Status.Certificate, nil
}

func conditionWord(t certificatesv1.RequestConditionType) string {
	if t == certificatesv1.CertificateDenied {
		return "denied"
	}
	return "failed"
}
