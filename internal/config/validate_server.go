package config

import (
	"crypto/tls"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// validateServer checks the settings of the authenticated HTTPS server:
// TLS files, cipher suites and minimum version, and the authorization mode.
func validateServer(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	switch {
	case kc.TLSCertFile != "" && kc.TLSPrivateKeyFile == "":
		errs = append(errs, field.Required(field.NewPath("tlsPrivateKeyFile"), "must be set when tlsCertFile is set"))
	case kc.TLSCertFile == "" && kc.TLSPrivateKeyFile != "":
		errs = append(errs, field.Required(field.NewPath("tlsCertFile"), "must be set when tlsPrivateKeyFile is set"))
	}
	suites := field.NewPath("tlsCipherSuites")
	for i, name := range kc.TLSCipherSuites {
		if _, err := cliflag.TLSCipherSuites([]string{name}); err != nil {
			errs = append(errs, field.NotSupported(suites.Index(i), name, cliflag.TLSCipherPossibleValues()))
		}
	}
	if kc.TLSMinVersion != "" {
		v, err := cliflag.TLSVersion(kc.TLSMinVersion)
		if err != nil {
			errs = append(errs, field.NotSupported(field.NewPath("tlsMinVersion"), kc.TLSMinVersion, cliflag.TLSPossibleVersions()))
		} else if v == tls.VersionTLS13 && len(kc.TLSCipherSuites) > 0 {
			// TLS 1.3 suites are not configurable (crypto/tls ignores them).
			errs = append(errs, field.Invalid(suites, kc.TLSCipherSuites, "may not be set with tlsMinVersion VersionTLS13"))
		}
	}
	switch kc.Authorization.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow, kubeletv1beta1.KubeletAuthorizationModeWebhook:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("authorization", "mode"), kc.Authorization.Mode,
			[]string{string(kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow), string(kubeletv1beta1.KubeletAuthorizationModeWebhook)}))
	}
	return errs
}
