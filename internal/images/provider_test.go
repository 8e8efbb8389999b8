package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
)

const goodProviderConfig = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-plugin
  matchImages: ["*.registry.test", "127.0.0.1:5001/heartlet"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: ["--flag"]
  env: [{name: A, value: b}]
`

func binDirWith(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProviderConfigValidation(t *testing.T) {
	bin := binDirWith(t, "test-plugin", "other")
	if err := os.WriteFile(filepath.Join(bin, "not-exec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(string) string
		binDir  string
		wantErr string // "" for a valid config
	}{
		{"valid", nil, bin, ""},
		{"no bin dir", nil, "", "imageCredentialProviderBinDir: Required value"},
		{"plugin missing from the bin dir", func(s string) string { return strings.Replace(s, "test-plugin", "absent", 1) }, bin, `providers[0].name: Invalid value: "absent": no plugin in the bin dir`},
		{"plugin not executable", func(s string) string { return strings.Replace(s, "test-plugin", "not-exec", 1) }, bin, "is not an executable file"},
		{"path in the name", func(s string) string { return strings.Replace(s, "test-plugin", "../test-plugin", 1) }, bin, "without path separators"},
		{"no matchImages", func(s string) string {
			return strings.Replace(s, `matchImages: ["*.registry.test", "127.0.0.1:5001/heartlet"]`, "matchImages: []", 1)
		}, bin, "providers[0].matchImages: Required value"},
		{"glob in the port", func(s string) string { return strings.Replace(s, "127.0.0.1:5001/heartlet", "127.0.0.1:50*", 1) }, bin, "providers[0].matchImages[1]: Invalid value"},
		{"scheme in matchImages", func(s string) string { return strings.Replace(s, `"*.registry.test"`, `"https://registry.test"`, 1) }, bin, "providers[0].matchImages[0]: Invalid value"},
		{"no defaultCacheDuration", func(s string) string { return strings.Replace(s, "  defaultCacheDuration: 1m\n", "", 1) }, bin, "providers[0].defaultCacheDuration: Required value"},
		{"negative defaultCacheDuration", func(s string) string { return strings.Replace(s, "1m", "-1m", 1) }, bin, "must not be negative"},
		{"old plugin API", func(s string) string {
			return strings.Replace(s, "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", 1)
		}, bin, "providers[0].apiVersion: Unsupported value"},
		{"tokenAttributes refused", func(s string) string {
			return s + "  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: true}\n"
		}, bin, "providers[0].tokenAttributes: Forbidden: heartlet does not pass service account tokens"},
		{"duplicate names", func(s string) string {
			return s + "- {name: test-plugin, matchImages: [a.test], defaultCacheDuration: 1s, apiVersion: credentialprovider.kubelet.k8s.io/v1}\n"
		}, bin, "providers[1].name: Duplicate value"},
		{"empty env name", func(s string) string { return strings.Replace(s, "name: A", "name: ''", 1) }, bin, "providers[0].env[0].name: Required value"},
		{"no providers", func(string) string {
			return "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n"
		}, bin, "providers: Required value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := goodProviderConfig
			if tt.edit != nil {
				src = tt.edit(src)
			}
			cfg, err := ParseProviderConfig([]byte(src))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			errs := ValidateProviderConfig(cfg, tt.binDir)
			if tt.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("errors %v, want none", errs)
				}
				return
			}
			if !strings.Contains(errs.ToAggregate().Error(), tt.wantErr) {
				t.Errorf("errors %v, want one with %q", errs, tt.wantErr)
			}
		})
	}
}

func TestParseProviderConfigRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"unknown field": goodProviderConfig + "  cacheForever: true\n",
		"other version": strings.Replace(goodProviderConfig, "kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", 1),
		"other kind":    strings.Replace(goodProviderConfig, "kind: CredentialProviderConfig", "kind: KubeletConfiguration", 1),
		"not yaml":      "providers: [",
	} {
		if _, err := ParseProviderConfig([]byte(src)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// writePlugin writes a shell plugin that logs each request (and its
// arguments and $A) to log and answers with response.
func writePlugin(t *testing.T, dir, name, response string) (log string) {
	t.Helper()
	log = filepath.Join(dir, name+".log")
	script := "#!/bin/sh\nreq=$(cat)\necho \"$* A=$A $req\" >> " + log + "\ncat <<'EOF'\n" + response + "\nEOF\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return log
}

func runs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func providerConfig(name string, cache time.Duration, match ...string) *kubeletconfigv1.CredentialProviderConfig {
	return &kubeletconfigv1.CredentialProviderConfig{Providers: []kubeletconfigv1.CredentialProvider{{
		Name: name, MatchImages: match, DefaultCacheDuration: &metav1.Duration{Duration: cache},
		APIVersion: pluginAPIVersion, Args: []string{"--flag"}, Env: []kubeletconfigv1.ExecEnvVar{{Name: "A", Value: "b"}},
	}}}
}

func response(keyType, duration string, auth string) string {
	d := ""
	if duration != "" {
		d = `"cacheDuration":"` + duration + `",`
	}
	return `{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"` + keyType + `",` + d + `"auth":` + auth + `}`
}

// The plugin runs for matching images only, with the request on its
// standard input, its args and env; its logins are matched to the image
// like a pull secret's; its answer is cached by image, registry or
// globally as it asks, for its cacheDuration or the default.
func TestProvidersRunAndCache(t *testing.T) {
	auth := `{"*.registry.test":{"username":"u","password":"p"},"other.test":{"username":"x","password":"y"}}`
	tests := []struct {
		keyType, duration string
		// the runs of the plugin so far after each lookup of steps
		wantRuns []int
	}{
		{"Image", "", []int{1, 1, 2, 3}},
		{"Registry", "", []int{1, 1, 1, 2}},
		{"Global", "", []int{1, 1, 1, 1}},
		{"Global", "0s", []int{1, 2, 3, 4}},
	}
	steps := []string{"a.registry.test/app", "a.registry.test/app", "a.registry.test/other", "b.registry.test/app"}
	for _, tt := range tests {
		t.Run(tt.keyType+"/"+tt.duration, func(t *testing.T) {
			bin := t.TempDir()
			log := writePlugin(t, bin, "plug", response(tt.keyType, tt.duration, auth))
			clk := newClock()
			ps := NewProviders(providerConfig("plug", time.Minute, "*.registry.test"), bin, clk)
			for i, repo := range steps {
				got := users(ps.Lookup(t.Context(), repo))
				if !slices.Equal(got, []string{"u:p"}) {
					t.Fatalf("Lookup(%s) = %v, want u:p", repo, got)
				}
				if n := len(runs(t, log)); n != tt.wantRuns[i] {
					t.Errorf("after lookup %d (%s) the plugin ran %d times, want %d", i+1, repo, n, tt.wantRuns[i])
				}
			}
			first := runs(t, log)[0]
			if !strings.HasPrefix(first, "--flag A=b ") || !strings.Contains(first, `"kind":"CredentialProviderRequest"`) ||
				!strings.Contains(first, `"apiVersion":"credentialprovider.kubelet.k8s.io/v1"`) || !strings.Contains(first, `"image":"a.registry.test/app"`) {
				t.Errorf("plugin saw %q", first)
			}
			// Not matched by matchImages: the plugin does not run.
			before := len(runs(t, log))
			if got := ps.Lookup(t.Context(), "other.test/app"); got != nil {
				t.Errorf("Lookup of an image no matchImages matches = %v", users(got))
			}
			if len(runs(t, log)) != before {
				t.Error("the plugin ran for an image its matchImages do not match")
			}
		})
	}
}

func TestProvidersCacheExpires(t *testing.T) {
	bin := t.TempDir()
	log := writePlugin(t, bin, "plug", response("Registry", "", `{"registry.test":{"username":"u","password":"p"}}`))
	clk := newClock()
	ps := NewProviders(providerConfig("plug", time.Minute, "registry.test"), bin, clk)
	ps.Lookup(t.Context(), "registry.test/app")
	clk.Step(59 * time.Second)
	ps.Lookup(t.Context(), "registry.test/app")
	if n := len(runs(t, log)); n != 1 {
		t.Fatalf("plugin ran %d times within the cache duration, want 1", n)
	}
	clk.Step(time.Second)
	ps.Lookup(t.Context(), "registry.test/app")
	if n := len(runs(t, log)); n != 2 {
		t.Errorf("plugin ran %d times after the cache expired, want 2", n)
	}
}

// A plugin that fails, or answers what is not a valid response, gives no
// logins and is not cached.
func TestProvidersFailures(t *testing.T) {
	for name, resp := range map[string]string{
		"wrong kind":        strings.Replace(response("Image", "", `{}`), "CredentialProviderResponse", "Other", 1),
		"wrong version":     strings.Replace(response("Image", "", `{}`), "k8s.io/v1", "k8s.io/v1beta1", 1),
		"bad cacheKeyType":  response("Forever", "", `{"registry.test":{"username":"u","password":"p"}}`),
		"not json":          "{",
		"unknown field":     strings.Replace(response("Image", "", `{}`), `"auth"`, `"extra":1,"auth"`, 1),
		"negative duration": response("Image", "-1s", `{"registry.test":{"username":"u","password":"p"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			bin := t.TempDir()
			log := writePlugin(t, bin, "plug", resp)
			ps := NewProviders(providerConfig("plug", time.Minute, "registry.test"), bin, newClock())
			for range 2 {
				if got := ps.Lookup(t.Context(), "registry.test/app"); got != nil {
					t.Fatalf("Lookup = %v, want none", users(got))
				}
			}
			if n := len(runs(t, log)); n != 2 {
				t.Errorf("plugin ran %d times, want 2 (failures are not cached)", n)
			}
		})
	}
	t.Run("exit status", func(t *testing.T) {
		bin := t.TempDir()
		if err := os.WriteFile(filepath.Join(bin, "plug"), []byte("#!/bin/sh\necho denied >&2\nexit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		ps := NewProviders(providerConfig("plug", time.Minute, "registry.test"), bin, newClock())
		if got := ps.Lookup(t.Context(), "registry.test/app"); got != nil {
			t.Errorf("Lookup = %v, want none", users(got))
		}
		if _, err := ps.plugins[0].run(t.Context(), "registry.test/app"); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("run = %v, want the plugin's stderr", err)
		}
	})
}
