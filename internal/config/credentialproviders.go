package config

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/heartlet/heartlet/internal/images"
)

// loadCredentialProviders reads and validates the image credential
// provider configuration named by --image-credential-provider-config into
// opts. Its problems name the file and the field; a bin dir without a
// configuration is a problem too, since it would be ignored.
func loadCredentialProviders(opts *Options, cl *cmdline, e env) Errors {
	if cl.credentialProviderBinDir != "" {
		p, err := e.abs(cl.credentialProviderBinDir)
		if err != nil {
			return Errors{{Flag: "--image-credential-provider-bin-dir", Message: err.Error()}}
		}
		opts.ImageCredentialProviderBinDir = p
	}
	if cl.credentialProviderConfig == "" {
		if cl.credentialProviderBinDir != "" {
			return Errors{{Flag: "--image-credential-provider-bin-dir", Field: field.Invalid(field.NewPath("imageCredentialProviderBinDir"),
				cl.credentialProviderBinDir, "set without --image-credential-provider-config, which names the plugins to run")}}
		}
		return nil
	}
	path, err := e.abs(cl.credentialProviderConfig)
	if err != nil {
		return Errors{{Flag: "--image-credential-provider-config", Message: err.Error()}}
	}
	opts.ImageCredentialProviderConfig = path
	data, err := e.readFile(path)
	if err != nil {
		return Errors{{File: path, Message: "reading the image credential provider config (--image-credential-provider-config): " + err.Error()}}
	}
	cfg, err := images.ParseProviderConfig(data)
	if err != nil {
		return Errors{{File: path, Message: err.Error()}}
	}
	var problems Errors
	for _, fe := range images.ValidateProviderConfig(cfg, opts.ImageCredentialProviderBinDir) {
		problems = append(problems, &Problem{File: path, Field: fe})
	}
	if len(problems) == 0 {
		opts.CredentialProviders = cfg
	}
	return problems
}
