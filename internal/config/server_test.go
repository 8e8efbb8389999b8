package config

import (
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func TestValidateServer(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*kubeletv1beta1.KubeletConfiguration)
		want   []string // field paths with problems
	}{
		{"defaults", func(*kubeletv1beta1.KubeletConfiguration) {}, nil},
		{"cert without key", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.TLSCertFile = "/a.crt" }, []string{"tlsPrivateKeyFile"}},
		{"key without cert", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.TLSPrivateKeyFile = "/a.key" }, []string{"tlsCertFile"}},
		{"both", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSCertFile, kc.TLSPrivateKeyFile = "/a.crt", "/a.key"
		}, nil},
		{"good suites", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
			kc.TLSMinVersion = "VersionTLS12"
		}, nil},
		{"unknown suite", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_BOGUS"}
		}, []string{"tlsCipherSuites[1]"}},
		{"unknown version", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.TLSMinVersion = "TLS1.2" }, []string{"tlsMinVersion"}},
		{"suites with TLS 1.3", func(kc *kubeletv1beta1.KubeletConfiguration) {
			kc.TLSCipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
			kc.TLSMinVersion = "VersionTLS13"
		}, []string{"tlsCipherSuites"}},
		{"unknown authorization mode", func(kc *kubeletv1beta1.KubeletConfiguration) { kc.Authorization.Mode = "RBAC" }, []string{"authorization.mode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := NewDefault()
			tt.mutate(kc)
			var got []string
			for _, e := range validateServer(kc) {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("problems at %v, want %v (%v)", got, tt.want, validateServer(kc))
			}
		})
	}
}

func TestLoadServerFlags(t *testing.T) {
	e := fakeEnv(map[string]string{"/etc/k.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"}, "node")
	opts := mustLoad(t, e, "--root-dir=/var/lib/h")
	if opts.CertDir != "/var/lib/h/pki" {
		t.Errorf("CertDir = %q, want <root-dir>/pki", opts.CertDir)
	}
	opts = mustLoad(t, e, "--config=/etc/k.yaml", "--cert-dir=certs", "--tls-cert-file=/a.crt", "--tls-private-key-file=/a.key",
		"--tls-min-version=VersionTLS13", "--client-ca-file=/ca.crt", "--anonymous-auth=true",
		"--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow")
	kc := opts.Config
	if opts.CertDir != "/work/certs" || kc.TLSCertFile != "/a.crt" || kc.TLSPrivateKeyFile != "/a.key" || kc.TLSMinVersion != "VersionTLS13" ||
		kc.Authentication.X509.ClientCAFile != "/ca.crt" || !*kc.Authentication.Anonymous.Enabled || *kc.Authentication.Webhook.Enabled ||
		kc.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow {
		t.Errorf("flags not applied: certDir %q %+v %+v %+v", opts.CertDir, kc.TLSCertFile, kc.Authentication, kc.Authorization)
	}
	// The file's upstream v1beta1 defaults: no anonymous, webhook
	// authentication and authorization (kubelet.config.k8s.io/v1beta1
	// SetDefaults_KubeletConfiguration).
	kc = mustLoad(t, e, "--config=/etc/k.yaml").Config
	if *kc.Authentication.Anonymous.Enabled || !*kc.Authentication.Webhook.Enabled || kc.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook {
		t.Errorf("file defaults: %+v %+v", kc.Authentication, kc.Authorization)
	}
	if _, err := load([]string{"--tls-cipher-suites=TLS_BOGUS"}, e); err == nil || !strings.Contains(err.Error(), "--tls-cipher-suites") {
		t.Errorf("bad --tls-cipher-suites: %v, want a problem naming the flag", err)
	}
}

func TestLoadBootstrapKubeconfig(t *testing.T) {
	e := fakeEnv(map[string]string{"/etc/k.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nrotateCertificates: true\nserverTLSBootstrap: true\n"}, "node")
	opts := mustLoad(t, e, "--config=/etc/k.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf")
	if opts.BootstrapKubeconfig != "/etc/kubernetes/bootstrap-kubelet.conf" || opts.Kubeconfig != "/etc/kubernetes/kubelet.conf" {
		t.Errorf("kubeconfigs %q %q", opts.Kubeconfig, opts.BootstrapKubeconfig)
	}
	if !opts.Config.RotateCertificates || !opts.Config.ServerTLSBootstrap {
		t.Errorf("rotateCertificates %v serverTLSBootstrap %v", opts.Config.RotateCertificates, opts.Config.ServerTLSBootstrap)
	}
	for _, ig := range opts.Ignored {
		if strings.Contains(ig.Path, "rotateCertificates") || strings.Contains(ig.Path, "serverTLSBootstrap") {
			t.Errorf("%s is named as ignored", ig.Path)
		}
	}
	if _, err := load([]string{"--bootstrap-kubeconfig=/b.conf"}, e); err == nil || !strings.Contains(err.Error(), "--bootstrap-kubeconfig") {
		t.Errorf("--bootstrap-kubeconfig without --kubeconfig: %v, want a problem naming the flag", err)
	}
}
