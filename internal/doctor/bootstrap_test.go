package doctor

import (
	"context"
	"io/fs"
	"syscall"
	"testing"
	"testing/fstest"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// TestKubeconfigToUse: as the kubelet, heartlet reaches the API server
// with --bootstrap-kubeconfig only while --kubeconfig does not exist.
func TestKubeconfigToUse(t *testing.T) {
	files := fstest.MapFS{"etc/kubernetes/kubelet.conf": {Data: []byte("x")}}
	stat := func(name string) (fs.FileInfo, error) { return fs.Stat(files, name[1:]) }
	for _, tc := range []struct {
		name          string
		args          []string
		stat          func(string) (fs.FileInfo, error)
		want          string
		wantBootstrap bool
		wantErr       bool
	}{
		{"no bootstrap kubeconfig", []string{"--kubeconfig", "/etc/kubernetes/missing.conf"}, stat, "/etc/kubernetes/missing.conf", false, false},
		{"kubeconfig exists", []string{"--kubeconfig", "/etc/kubernetes/kubelet.conf", "--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf"}, stat, "/etc/kubernetes/kubelet.conf", false, false},
		{"kubeconfig missing", []string{"--kubeconfig", "/etc/kubernetes/missing.conf", "--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf"}, stat, "/etc/kubernetes/bootstrap-kubelet.conf", true, false},
		{"kubeconfig unreadable", []string{"--kubeconfig", "/etc/kubernetes/kubelet.conf", "--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf"},
			func(name string) (fs.FileInfo, error) {
				return nil, &fs.PathError{Op: "stat", Path: name, Err: syscall.EACCES}
			}, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, bootstrap, err := kubeconfigToUse(testOpts(t, tc.args...), tc.stat)
			if (err != nil) != tc.wantErr || path != tc.want || bootstrap != tc.wantBootstrap {
				t.Errorf("kubeconfigToUse = %q, %v, %v; want %q, %v, error %v", path, bootstrap, err, tc.want, tc.wantBootstrap, tc.wantErr)
			}
		})
	}
}

// TestDoctorBootstrap: with bootstrap credentials doctor reports that TLS
// bootstrap makes the kubeconfig, checks what the bootstrap identity must
// be allowed (kubeadm's system:node-bootstrapper and nodeclient
// auto-approval bindings) and skips the checks that need the node's own
// identity instead of reporting the bootstrap identity's denials.
func TestDoctorBootstrap(t *testing.T) {
	opts := testOpts(t, "--kubeconfig", "/etc/kubernetes/kubelet.conf", "--bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf", "--authorization-mode", "Webhook", "--client-ca-file", "/etc/kubernetes/pki/ca.crt")
	const id = "system:bootstrap:abcdef"
	csrs := func(verbs ...string) func(string, *authorizationv1.ResourceAttributes) (bool, string) {
		return func(_ string, a *authorizationv1.ResourceAttributes) (bool, string) {
			for _, v := range verbs {
				if a.Resource == "certificatesigningrequests" && a.Group == "certificates.k8s.io" && a.Verb+"/"+a.Subresource == v {
					return true, ""
				}
			}
			return false, "no RBAC policy matched"
		}
	}
	for _, tc := range []struct {
		name        string
		allow       func(string, *authorizationv1.ResourceAttributes) (bool, string)
		permissions []any
	}{
		{"kubeadm's bindings", csrs("create/", "get/", "list/", "watch/", "create/nodeclient"),
			[]any{OK, id + " may create, get, list and watch certificatesigningrequests", OK, "approved automatically"}},
		{"no auto-approval", csrs("create/", "get/", "list/", "watch/"),
			[]any{OK, "may create, get, list and watch", Warning, "waits for a manual approval"}},
		{"no node-bootstrapper", csrs("create/nodeclient"),
			[]any{Error, id + " may not create, get, list, watch certificatesigningrequests"}},
		{"only create", csrs("create/"),
			[]any{Error, "may not get, list, watch certificatesigningrequests"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, cs := fakeAPI(id, tc.allow)
			api.Kubeconfig, api.Bootstrap = "/etc/kubernetes/bootstrap-kubelet.conf", true
			c := checker{Inputs{Opts: opts, Connect: connectTo(api, nil), Host: fakeHost(fstest.MapFS{}, nil, nil), APIServerKubeletUser: DefaultAPIServerKubeletUser}}
			ctx := context.Background()
			expect(t, c.kubeconfig(ctx), OK, "/etc/kubernetes/kubelet.conf does not exist yet: heartlet makes it by TLS bootstrap with /etc/kubernetes/bootstrap-kubelet.conf")
			expect(t, c.identity(ctx), OK, "bootstrap identity "+id+"; the client certificate heartlet asks for is for system:node:node1")
			expect(t, c.permissions(ctx), tc.permissions...)
			expect(t, c.pods(ctx), Skipped, "only bootstrap credentials until TLS bootstrap writes /etc/kubernetes/kubelet.conf")
			rs := c.kubeletAPI(ctx)
			expect(t, rs[1:], Skipped, "only bootstrap credentials")
			expect(t, c.certificates(ctx)[:1], OK, "client certificate: none yet; TLS bootstrap asks for one")
			for _, a := range cs.Actions() {
				if a.GetResource().Resource == "pods" || a.GetResource().Resource == "subjectaccessreviews" {
					t.Errorf("asked %s %s with bootstrap credentials", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}
