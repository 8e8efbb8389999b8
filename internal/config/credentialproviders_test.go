package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const providerConfig = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: plug
  matchImages: ["*.registry.test"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`

// The credential provider flags load and validate their file at start;
// every problem names the file and the field, so a bad file never starts
// the node.
func TestLoadCredentialProviders(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "plug"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"/etc/cp.yaml":      providerConfig,
		"/etc/token.yaml":   providerConfig + "  tokenAttributes: {serviceAccountTokenAudience: x, requireServiceAccount: false}\n",
		"/etc/missing.yaml": strings.Replace(providerConfig, "name: plug", "name: nope", 1),
		"/etc/typo.yaml":    strings.Replace(providerConfig, "matchImages", "matchImage", 1),
	}
	e := fakeEnv(files, "node-a")

	opts := mustLoad(t, e, "--image-credential-provider-config", "/etc/cp.yaml", "--image-credential-provider-bin-dir", bin)
	if opts.CredentialProviders == nil || opts.CredentialProviders.Providers[0].Name != "plug" ||
		opts.ImageCredentialProviderConfig != "/etc/cp.yaml" || opts.ImageCredentialProviderBinDir != bin {
		t.Errorf("options %+v", opts)
	}
	if opts := mustLoad(t, e); opts.CredentialProviders != nil {
		t.Errorf("providers without the flag: %+v", opts.CredentialProviders)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"tokenAttributes", []string{"--image-credential-provider-config", "/etc/token.yaml", "--image-credential-provider-bin-dir", bin},
			"/etc/token.yaml: providers[0].tokenAttributes: Forbidden: heartlet does not pass service account tokens"},
		{"plugin not in the bin dir", []string{"--image-credential-provider-config", "/etc/missing.yaml", "--image-credential-provider-bin-dir", bin},
			`/etc/missing.yaml: providers[0].name: Invalid value: "nope": no plugin in the bin dir`},
		{"no bin dir", []string{"--image-credential-provider-config", "/etc/cp.yaml"},
			"/etc/cp.yaml: imageCredentialProviderBinDir: Required value"},
		{"unknown field", []string{"--image-credential-provider-config", "/etc/typo.yaml", "--image-credential-provider-bin-dir", bin},
			`/etc/typo.yaml: parse: error unmarshaling JSON: while decoding JSON: json: unknown field "matchImage"`},
		{"missing file", []string{"--image-credential-provider-config", "/etc/none.yaml", "--image-credential-provider-bin-dir", bin},
			"/etc/none.yaml: reading the image credential provider config (--image-credential-provider-config)"},
		{"bin dir alone", []string{"--image-credential-provider-bin-dir", bin},
			"flag --image-credential-provider-bin-dir: imageCredentialProviderBinDir: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(tt.args, e)
			var problems Errors
			if !errors.As(err, &problems) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load = %v, want problems with %q", err, tt.want)
			}
		})
	}
}
