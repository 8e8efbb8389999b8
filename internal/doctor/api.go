package doctor

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/heartlet/heartlet/internal/kubeclient"
	"github.com/heartlet/heartlet/internal/podspec"
)

const standalone = "standalone mode (no --kubeconfig)"

// kubeconfig loads the kubeconfig and checks the server as heartlet does at
// start: the file, the server's address and TLS, the credentials.
func (c checker) kubeconfig(ctx context.Context) []Result {
	if c.in.Connect == nil {
		return []Result{ok("%s: heartlet runs only static pods", standalone)}
	}
	api, err := c.in.Connect(ctx)
	if err != nil {
		return []Result{fail(kubeconfigFix(err), "%v", err)}
	}
	if api.Bootstrap {
		return []Result{ok("%s does not exist yet: heartlet makes it by TLS bootstrap with %s: API server %s (%s), TLS verified, authenticated as %s",
			c.in.Opts.Kubeconfig, api.Kubeconfig, api.Server, api.ServerVersion, api.Identity)}
	}
	return []Result{ok("%s: API server %s (%s), TLS verified, authenticated as %s", api.Kubeconfig, api.Server, api.ServerVersion, api.Identity)}
}

// kubeconfigFix says what to do about a failure of kubeclient.Load.
func kubeconfigFix(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "give the node's kubeconfig with --kubeconfig (kubeadm writes /etc/kubernetes/kubelet.conf), or leave --kubeconfig out for standalone mode"
	case errors.Is(err, fs.ErrPermission):
		return "run as root, or make the kubeconfig readable by heartlet's user"
	case errors.Is(err, kubeclient.ErrUnreachable):
		return "check the kubeconfig's server address, that kube-apiserver runs, and the network and firewall between this node and it"
	case errors.Is(err, kubeclient.ErrTLS):
		return "the kubeconfig's certificate-authority must have signed the server's certificate, and the certificate must name the server's address; check the client certificate too"
	case errors.Is(err, kubeclient.ErrUnauthorized):
		return "renew the kubeconfig's client certificate or token (kubeadm: kubeadm kubeconfig user, or join the node again)"
	case errors.Is(err, kubeclient.ErrForbidden):
		return "give the identity a node's permissions (a node certificate CN=system:node:<node>, O=system:nodes with the Node authorizer)"
	}
	return "fix the kubeconfig (kubectl --kubeconfig FILE config view shows what it says)"
}

// connected returns the API connection, or the result a check reports
// without one.
func (c checker) connected(ctx context.Context) (*API, []Result) {
	if c.in.Connect == nil {
		return nil, []Result{skip("%s", standalone)}
	}
	api, err := c.in.Connect(ctx)
	if err != nil {
		return nil, []Result{skip("the API server is not usable (see kubeconfig)")}
	}
	return api, nil
}

// nodeConnected is connected for the checks that need the node's own
// identity: with bootstrap credentials they wait for the kubeconfig TLS
// bootstrap makes.
func (c checker) nodeConnected(ctx context.Context) (*API, []Result) {
	api, rs := c.connected(ctx)
	if api != nil && api.Bootstrap {
		return nil, []Result{skip("only bootstrap credentials until TLS bootstrap writes %s; run heartlet doctor again then", c.in.Opts.Kubeconfig)}
	}
	return api, rs
}

// identity compares who the server says heartlet is with the node name:
// the Node authorizer and NodeRestriction let system:node:<name> act on
// node <name> only.
func (c checker) identity(ctx context.Context) []Result {
	api, rs := c.connected(ctx)
	if api == nil {
		return rs
	}
	node := c.in.Opts.NodeName
	want := "system:node:" + node
	if api.Bootstrap {
		return []Result{ok("bootstrap identity %s; the client certificate heartlet asks for is for %s", api.Identity, want)}
	}
	got, isNode := strings.CutPrefix(api.Identity, "system:node:")
	switch {
	case api.Identity == want:
		return []Result{ok("%s matches node name %s", api.Identity, node)}
	case isNode:
		return []Result{fail(fmt.Sprintf("run with --hostname-override %s, or use a kubeconfig issued for %s", got, want),
			"the kubeconfig's identity %s is for node %s, but the node name is %s: the Node authorizer and NodeRestriction will refuse heartlet's writes", api.Identity, got, node)}
	}
	return []Result{warn(fmt.Sprintf("use a node identity (certificate CN=%s, O=system:nodes, e.g. from kubeadm join or TLS bootstrap)", want),
		"%s is not a node identity: the Node authorizer does not apply, RBAC alone decides what heartlet may do", api.Identity)}
}

// access is one thing a node does through the API.
type access struct {
	what string
	attr authorizationv1.ResourceAttributes
}

func (c checker) nodeAccess() []access {
	node := c.in.Opts.NodeName
	kc := c.in.Opts.Config
	ownPods := &authorizationv1.FieldSelectorAttributes{RawSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()}
	as := []access{
		{"get its Node", authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: node}},
		{"patch its Node's status", authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status", Name: node}},
		{"get its Lease", authorizationv1.ResourceAttributes{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: v1.NamespaceNodeLease, Name: node}},
		{"update its Lease", authorizationv1.ResourceAttributes{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: v1.NamespaceNodeLease, Name: node}},
		{"create its Lease", authorizationv1.ResourceAttributes{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: v1.NamespaceNodeLease}},
		// The Node authorizer lets a node list and watch only its own
		// pods, by field selector, as heartlet's informer does.
		{"list its pods", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", FieldSelector: ownPods}},
		{"watch its pods", authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods", FieldSelector: ownPods}},
		{"patch pods/status", authorizationv1.ResourceAttributes{Verb: "patch", Resource: "pods", Subresource: "status"}},
		{"create mirror pods", authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods"}},
		{"delete pods", authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods"}},
		{"create events", authorizationv1.ResourceAttributes{Verb: "create", Resource: "events"}},
		{"patch events", authorizationv1.ResourceAttributes{Verb: "patch", Resource: "events"}},
		{"create service account tokens (tokenrequests)", authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token"}},
	}
	if kc.RegisterNode == nil || *kc.RegisterNode {
		as = append(as, access{"create its Node", authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"}})
	}
	if kc.Authentication.Webhook.Enabled != nil && *kc.Authentication.Webhook.Enabled {
		as = append(as, access{"create tokenreviews (authentication.webhook)", authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}})
	}
	if kc.Authorization.Mode == "Webhook" {
		as = append(as, access{"create subjectaccessreviews (authorization.mode Webhook)", authorizationv1.ResourceAttributes{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}})
	}
	return as
}

// graphScoped reports whether a denial comes from the Node authorizer
// scoping the request to objects related to the node (service account
// tokens of pods bound to it): asked without such an object, it answers
// no, yet the node may make the request for its pods.
func graphScoped(a access, identity string, st authorizationv1.SubjectAccessReviewStatus) bool {
	return strings.HasPrefix(identity, "system:node:") && a.attr.Resource == "serviceaccounts" &&
		(strings.Contains(st.Reason, "relationship") || strings.Contains(st.Reason, "no object name") || strings.Contains(strings.ToLower(st.Reason), "node"))
}

// permissions asks the server, with SelfSubjectAccessReviews, whether
// heartlet's identity may do what a node does.
func (c checker) permissions(ctx context.Context) []Result {
	api, rs := c.connected(ctx)
	if api == nil {
		return rs
	}
	if api.Bootstrap {
		return c.bootstrapPermissions(ctx, api)
	}
	as := c.nodeAccess()
	var denied, scoped []string
	for _, a := range as {
		attr := a.attr
		review, err := api.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
		if err != nil {
			return []Result{fail("see the API server's log", "asking whether %s may %s: %v", api.Identity, a.what, err)}
		}
		switch {
		case review.Status.Allowed:
		case graphScoped(a, api.Identity, review.Status):
			scoped = append(scoped, a.what)
		default:
			denied = append(denied, a.what)
		}
	}
	if len(denied) > 0 {
		return []Result{fail(fmt.Sprintf("use a node identity (CN=system:node:%s, O=system:nodes) with the API server's Node authorizer (--authorization-mode=Node,RBAC), or bind %s to the ClusterRole system:node", c.in.Opts.NodeName, api.Identity),
			"%s may not %s (%d of %d node permissions denied)", api.Identity, strings.Join(denied, ", "), len(denied), len(as))}
	}
	found := fmt.Sprintf("%s may do all %d things a node does", api.Identity, len(as))
	if len(scoped) > 0 {
		found = fmt.Sprintf("%s may do %d of %d things a node does; %s only for its pods (Node authorizer)", api.Identity, len(as)-len(scoped), len(as), strings.Join(scoped, ", "))
	}
	return []Result{ok("%s", found)}
}

// bootstrapPermissions asks whether the bootstrap credentials may do what
// TLS bootstrap does: create its CertificateSigningRequest and get, list
// and watch it (kubeadm binds system:bootstrappers to the ClusterRole
// system:node-bootstrapper), and whether the controller manager's approver
// will approve it (create certificatesigningrequests/nodeclient, kubeadm's
// binding to system:certificates.k8s.io:certificatesigningrequests:nodeclient).
func (c checker) bootstrapPermissions(ctx context.Context, api *API) []Result {
	csr := func(verb, sub string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: sub}
	}
	var denied []string
	verbs := []string{"create", "get", "list", "watch"}
	for _, verb := range verbs {
		allowed, err := c.selfAllowed(ctx, api, csr(verb, ""))
		if err != nil {
			return []Result{fail("see the API server's log", "asking whether %s may %s certificatesigningrequests: %v", api.Identity, verb, err)}
		}
		if !allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		return []Result{fail(fmt.Sprintf("kubectl create clusterrolebinding kubeadm:kubelet-bootstrap --clusterrole system:node-bootstrapper --group system:bootstrappers (or bind %s)", api.Identity),
			"%s may not %s certificatesigningrequests: TLS bootstrap cannot ask for the node's client certificate", api.Identity, strings.Join(denied, ", "))}
	}
	rs := []Result{ok("%s may create, get, list and watch certificatesigningrequests (TLS bootstrap)", api.Identity)}
	allowed, err := c.selfAllowed(ctx, api, csr("create", "nodeclient"))
	switch {
	case err != nil:
		rs = append(rs, warn("see the API server's log", "asking whether %s's requests are approved automatically: %v", api.Identity, err))
	case allowed:
		rs = append(rs, ok("%s's client certificate requests are approved automatically (certificatesigningrequests/nodeclient)", api.Identity))
	default:
		rs = append(rs, warn("kubectl certificate approve the request when it appears, or kubectl create clusterrolebinding kubeadm:node-autoapprove-bootstrap --clusterrole system:certificates.k8s.io:certificatesigningrequests:nodeclient --group system:bootstrappers",
			"%s may not create certificatesigningrequests/nodeclient: its request waits for a manual approval (heartlet gives up after an hour)", api.Identity))
	}
	return rs
}

// selfAllowed asks with a SelfSubjectAccessReview whether api's identity
// may do attr.
func (c checker) selfAllowed(ctx context.Context, api *API, attr authorizationv1.ResourceAttributes) (bool, error) {
	review, err := api.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attr}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SelfSubjectAccessReview: %w", err)
	}
	return review.Status.Allowed, nil
}

// certWarning is how long before expiry a certificate is reported.
const certWarning = 30 * 24 * time.Hour

// certificates reports when the kubeconfig's client certificate, the
// kubelet API's serving certificate and the client CA expire.
func (c checker) certificates(ctx context.Context) []Result {
	var rs []Result
	if c.in.Connect != nil {
		if api, err := c.in.Connect(ctx); err == nil && api.Bootstrap {
			rs = append(rs, ok("client certificate: none yet; TLS bootstrap asks for one (signer %s) and stores it in %s", certificatesv1.KubeAPIServerClientKubeletSignerName, c.in.Opts.CertDir))
		} else if err == nil && len(api.ClientCert) > 0 {
			rs = append(rs, c.certResult("client certificate", api.ClientCertSource, api.ClientCert,
				"renew the node's client certificate (kubeadm certs renew, or rotateCertificates with TLS bootstrap) and restart heartlet"))
		}
	}
	kc := c.in.Opts.Config
	serving, made := kc.TLSCertFile, false
	if serving == "" {
		serving, made = filepath.Join(c.in.Opts.CertDir, "kubelet.crt"), true
	}
	if kc.ServerTLSBootstrap {
		// The pair from the kubelet-serving signer; tlsCertFile, if given,
		// serves until it is issued.
		issued := filepath.Join(c.in.Opts.CertDir, "kubelet-server-current.pem")
		data, err := c.in.Host.ReadFile(issued)
		switch {
		case err == nil:
			return append(append(rs, c.certResult("serving certificate", issued, data,
				"heartlet renews it with a kubelet-serving CertificateSigningRequest: approve the pending one (kubectl certificate approve)")), c.clientCA()...)
		case !errors.Is(err, fs.ErrNotExist):
			return append(append(rs, fail("fix the permissions of --cert-dir", "serving certificate %s: %v", issued, err)), c.clientCA()...)
		case made:
			return append(append(rs, ok("serving certificate %s: not yet issued; heartlet asks for it with a kubelet-serving CertificateSigningRequest at start (approve it with kubectl certificate approve)", issued)), c.clientCA()...)
		}
	}
	data, err := c.in.Host.ReadFile(serving)
	switch {
	case err == nil:
		rs = append(rs, c.certResult("serving certificate", serving, data, "replace tlsCertFile/tlsPrivateKeyFile, or remove the self-signed kubelet.crt and kubelet.key so heartlet makes new ones"))
	case made && errors.Is(err, fs.ErrNotExist):
		rs = append(rs, ok("serving certificate %s: not yet made; heartlet makes a self-signed one at start", serving))
	default:
		rs = append(rs, fail("fix tlsCertFile (--tls-cert-file)", "serving certificate %s: %v", serving, err))
	}
	return append(rs, c.clientCA()...)
}

// clientCA reports when authentication.x509.clientCAFile expires.
func (c checker) clientCA() []Result {
	ca := c.in.Opts.Config.Authentication.X509.ClientCAFile
	if ca == "" {
		return nil
	}
	data, err := c.in.Host.ReadFile(ca)
	if err != nil {
		return []Result{fail("fix authentication.x509.clientCAFile (--client-ca-file)", "client CA %s: %v", ca, err)}
	}
	return []Result{c.certResult("client CA", ca, data, "replace the CA bundle with the cluster's current CA")}
}

// certResult checks the first certificate of a PEM bundle.
func (c checker) certResult(what, source string, data []byte, fix string) Result {
	var cert *x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			var err error
			if cert, err = x509.ParseCertificate(block.Bytes); err != nil {
				return fail(fix, "%s %s: %v", what, source, err)
			}
			break
		}
	}
	if cert == nil {
		return fail(fix, "%s %s: no PEM certificate", what, source)
	}
	now := c.in.Host.Now()
	left := cert.NotAfter.Sub(now)
	found := fmt.Sprintf("%s %s (%s) expires %s", what, source, cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case now.Before(cert.NotBefore):
		return fail("check this machine's clock, or issue the certificate again", "%s is not valid before %s", found, cert.NotBefore.UTC().Format(time.RFC3339))
	case left <= 0:
		return fail(fix, "%s: expired %s ago", found, (-left).Round(time.Minute))
	case left < certWarning:
		return warn(fix, "%s, in %s", found, left.Round(time.Hour))
	}
	return ok("%s, in %d days", found, int(left.Hours()/24))
}

// Clock skew limits: the Date header has a resolution of one second.
const (
	skewWarning = 2 * time.Second
	skewError   = 30 * time.Second
)

// clock compares this machine's clock with the API server's.
func (c checker) clock(ctx context.Context) []Result {
	api, rs := c.connected(ctx)
	if api == nil {
		return rs
	}
	server, sent, received, err := api.ServerTime(ctx)
	if err != nil {
		return []Result{warn("check the API server's time by hand", "asking the API server for its time: %v", err)}
	}
	// The Date header is cut to the second: compare with the middle of
	// that second.
	mid := sent.Add(received.Sub(sent) / 2)
	skew := server.Add(500 * time.Millisecond).Sub(mid)
	abs := skew.Abs()
	found := fmt.Sprintf("this machine's clock is %s %s the API server's (round trip %s)", abs.Round(100*time.Millisecond), map[bool]string{true: "behind", false: "ahead of"}[skew > 0], received.Sub(sent).Round(time.Millisecond))
	fix := "synchronize the clocks with NTP (timedatectl set-ntp true; chronyc tracking): leases, certificates and tokens depend on them"
	switch {
	case abs > skewError:
		return []Result{fail(fix, "%s", found)}
	case abs > skewWarning:
		return []Result{warn(fix, "%s", found)}
	}
	return []Result{ok("%s", found)}
}

// pods compares maxPods with the pods the API server has bound to this
// node that have not finished.
func (c checker) pods(ctx context.Context) []Result {
	api, rs := c.nodeConnected(ctx)
	if api == nil {
		return rs
	}
	node, maxPods := c.in.Opts.NodeName, int(c.in.Opts.Config.MaxPods)
	list, err := api.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return []Result{fail("give the identity a node's permissions (see permissions)", "listing the pods bound to %s: %v", node, err)}
	}
	active := 0
	for _, p := range list.Items {
		if !podspec.IsTerminalPhase(p.Status.Phase) {
			active++
		}
	}
	switch {
	case active > maxPods:
		return []Result{fail(fmt.Sprintf("raise maxPods (--max-pods) to at least %d, or move pods off the node (kubectl drain %s)", active, node),
			"%d pods are bound to %s, more than maxPods %d: %d would be rejected (OutOfpods)", active, node, maxPods, active-maxPods)}
	case active == maxPods:
		return []Result{warn("raise maxPods (--max-pods) if the node should take more pods", "%d pods bound to %s, maxPods %d: the node is full", active, node, maxPods)}
	}
	return []Result{ok("%d pods bound to %s, maxPods %d", active, node, maxPods)}
}

// kubeletAPI describes how the kubelet API authenticates and authorizes,
// and asks whether the API server's own client identity may use it (what
// kubectl logs, exec and port-forward need).
func (c checker) kubeletAPI(ctx context.Context) []Result {
	kc := c.in.Opts.Config
	if kc.EnableServer != nil && !*kc.EnableServer {
		return []Result{ok("the kubelet API is off (enableServer: false): no kubectl logs, exec or port-forward")}
	}
	anonymous := kc.Authentication.Anonymous.Enabled != nil && *kc.Authentication.Anonymous.Enabled
	webhookAuthn := kc.Authentication.Webhook.Enabled != nil && *kc.Authentication.Webhook.Enabled
	ca := kc.Authentication.X509.ClientCAFile
	var authn []string
	if ca != "" {
		authn = append(authn, "x509 "+ca)
	}
	if webhookAuthn {
		authn = append(authn, "webhook tokens")
	}
	if anonymous {
		authn = append(authn, "anonymous")
	}
	if len(authn) == 0 {
		authn = []string{"nothing (every request is refused)"}
	}
	mode := string(kc.Authorization.Mode)
	found := fmt.Sprintf(":%d authentication %s; authorization %s", kc.Port, strings.Join(authn, ", "), mode)
	var rs []Result
	switch {
	case anonymous && mode == "AlwaysAllow":
		rs = append(rs, fail("set authentication.anonymous.enabled: false (--anonymous-auth=false) and authorization.mode: Webhook", "%s: anyone who reaches the port may run commands in every pod", found))
	case mode == "AlwaysAllow":
		rs = append(rs, warn("set authorization.mode: Webhook (--authorization-mode=Webhook)", "%s: every authenticated user may run commands in every pod", found))
	case ca == "":
		rs = append(rs, warn("set authentication.x509.clientCAFile (--client-ca-file) to the cluster CA, which signs the API server's kubelet client certificate",
			"%s: no client CA, so the API server's client certificate is not accepted (kubectl logs and exec fail with 401)", found))
	default:
		rs = append(rs, ok("%s", found))
	}
	if mode != "Webhook" {
		return rs
	}
	api, skipped := c.nodeConnected(ctx)
	if api == nil {
		return append(rs, skipped...)
	}
	user := c.in.APIServerKubeletUser
	node := c.in.Opts.NodeName
	review, err := api.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: node},
	}}, metav1.CreateOptions{})
	switch {
	case err != nil:
		rs = append(rs, warn("give the identity a node's permissions (see permissions)", "could not ask whether %s may use the kubelet API: %v", user, err))
	case review.Status.Allowed:
		rs = append(rs, ok("%s may get nodes/proxy of %s (kubectl logs, exec, port-forward)", user, node))
	default:
		rs = append(rs, fail(fmt.Sprintf("kubectl create clusterrolebinding kube-apiserver-kubelet-api-admin --clusterrole system:kubelet-api-admin --user %s (or --apiserver-kubelet-user to name the API server's --kubelet-client-certificate user)", user),
			"%s may not get nodes/proxy of %s: kubectl logs, exec and port-forward will get 403 %s", user, node, review.Status.Reason))
	}
	return rs
}
