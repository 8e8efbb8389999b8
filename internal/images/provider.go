package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"
)

// pluginTimeout bounds one run of a credential provider plugin, as
// upstream's.
const pluginTimeout = time.Minute

var (
	providerConfigVersion = kubeletconfigv1.SchemeGroupVersion.String()
	pluginAPIVersion      = credentialproviderv1.SchemeGroupVersion.String()
)

// ParseProviderConfig decodes a CredentialProviderConfig, YAML or JSON,
// strictly: an unknown field, another kind or version is an error.
func ParseProviderConfig(data []byte) (*kubeletconfigv1.CredentialProviderConfig, error) {
	var cfg kubeletconfigv1.CredentialProviderConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if cfg.Kind != "CredentialProviderConfig" {
		return nil, fmt.Errorf("kind is %q, want CredentialProviderConfig", cfg.Kind)
	}
	if cfg.APIVersion != providerConfigVersion {
		return nil, fmt.Errorf("apiVersion is %q; heartlet reads %s", cfg.APIVersion, providerConfigVersion)
	}
	return &cfg, nil
}

// ValidateProviderConfig checks cfg as upstream does, and that each
// plugin exists in binDir.
func ValidateProviderConfig(cfg *kubeletconfigv1.CredentialProviderConfig, binDir string) field.ErrorList {
	var errs field.ErrorList
	root := field.NewPath("providers")
	if len(cfg.Providers) == 0 {
		errs = append(errs, field.Required(root, "at least one provider is required"))
	}
	if binDir == "" {
		errs = append(errs, field.Required(field.NewPath("imageCredentialProviderBinDir"), "--image-credential-provider-bin-dir must name the directory of the plugins"))
	}
	names := map[string]bool{}
	for i, p := range cfg.Providers {
		path := root.Index(i)
		switch {
		case p.Name == "":
			errs = append(errs, field.Required(path.Child("name"), ""))
		case strings.ContainsAny(p.Name, `/\`), p.Name == ".", p.Name == "..", strings.ContainsAny(p.Name, " \t\n"):
			errs = append(errs, field.Invalid(path.Child("name"), p.Name, "must be a file name in the bin dir, without path separators or spaces"))
		case names[p.Name]:
			errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
		case binDir != "":
			if st, err := os.Stat(filepath.Join(binDir, p.Name)); err != nil {
				errs = append(errs, field.Invalid(path.Child("name"), p.Name, fmt.Sprintf("no plugin in the bin dir: %v", err)))
			} else if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
				errs = append(errs, field.Invalid(path.Child("name"), p.Name, fmt.Sprintf("%s is not an executable file", filepath.Join(binDir, p.Name))))
			}
		}
		names[p.Name] = true
		if len(p.MatchImages) == 0 {
			errs = append(errs, field.Required(path.Child("matchImages"), "at least one image pattern is required"))
		}
		for j, m := range p.MatchImages {
			if err := validMatchImage(m); err != nil {
				errs = append(errs, field.Invalid(path.Child("matchImages").Index(j), m, err.Error()))
			}
		}
		switch {
		case p.DefaultCacheDuration == nil:
			errs = append(errs, field.Required(path.Child("defaultCacheDuration"), ""))
		case p.DefaultCacheDuration.Duration < 0:
			errs = append(errs, field.Invalid(path.Child("defaultCacheDuration"), p.DefaultCacheDuration.Duration.String(), "must not be negative"))
		}
		switch p.APIVersion {
		case pluginAPIVersion:
		case "":
			errs = append(errs, field.Required(path.Child("apiVersion"), ""))
		default:
			errs = append(errs, field.NotSupported(path.Child("apiVersion"), p.APIVersion, []string{pluginAPIVersion}))
		}
		for j, e := range p.Env {
			if e.Name == "" {
				errs = append(errs, field.Required(path.Child("env").Index(j).Child("name"), ""))
			}
		}
		if p.TokenAttributes != nil {
			errs = append(errs, field.Forbidden(path.Child("tokenAttributes"), "heartlet does not pass service account tokens to credential provider plugins"))
		}
	}
	return errs
}

// validMatchImage checks one matchImages entry: a host, optionally with a
// port and a path, globs only in the host's parts.
func validMatchImage(m string) error {
	if m == "" || strings.Contains(m, "://") {
		return errors.New("must be a host with an optional port and path, without scheme")
	}
	u, err := url.Parse("https://" + m)
	if err != nil {
		return fmt.Errorf("does not parse: %w", err)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be a host with an optional port and path")
	}
	parts, port := splitHost(u.Host)
	if strings.ContainsAny(port, "*?[]") || strings.ContainsAny(u.Path, "*?[]") {
		return errors.New("globs are allowed in the host only, not in the port or the path")
	}
	for _, p := range parts {
		if p == "" {
			return errors.New("the host has an empty part")
		}
		if _, err := filepath.Match(p, ""); err != nil {
			return fmt.Errorf("bad glob %q: %w", p, err)
		}
	}
	return nil
}

// Providers runs the credential provider plugins of a validated
// configuration and caches their answers as each asks. It implements
// ProviderCredentials and is safe for concurrent use.
type Providers struct {
	plugins []*plugin
}

// NewProviders returns the plugins of cfg (validated by
// LoadProviderConfig) in binDir. clk (nil: the real clock) times the
// cache.
func NewProviders(cfg *kubeletconfigv1.CredentialProviderConfig, binDir string, clk clock.PassiveClock) *Providers {
	if clk == nil {
		clk = clock.RealClock{}
	}
	ps := &Providers{}
	for _, p := range cfg.Providers {
		ps.plugins = append(ps.plugins, &plugin{
			cfg:   p,
			path:  filepath.Join(binDir, p.Name),
			clock: clk,
			cache: map[string]cached{},
		})
	}
	return ps
}

// Lookup implements ProviderCredentials: the logins of every plugin whose
// matchImages match repo, in the order of the configuration. A plugin
// that fails gives none (and is logged), as upstream.
func (ps *Providers) Lookup(ctx context.Context, repo string) []*runtimeapi.AuthConfig {
	var out []*runtimeapi.AuthConfig
	for _, p := range ps.plugins {
		if !p.matches(repo) {
			continue
		}
		kr, err := p.keyring(ctx, repo)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Credential provider plugin failed", "plugin", p.cfg.Name, "image", repo)
			continue
		}
		out = append(out, kr.Lookup(repo)...)
	}
	return out
}

type cached struct {
	kr      *Keyring
	expires time.Time
}

type plugin struct {
	cfg   kubeletconfigv1.CredentialProvider
	path  string
	clock clock.PassiveClock
	group singleflight.Group

	mu    sync.Mutex
	cache map[string]cached // by image, registry or "" (global)
}

func (p *plugin) matches(repo string) bool {
	for _, m := range p.cfg.MatchImages {
		if MatchImage(m, repo) {
			return true
		}
	}
	return false
}

// registryOf is the host (with port) of repo.
func registryOf(repo string) string {
	host, _, _ := strings.Cut(repo, "/")
	return host
}

// keyring returns the plugin's logins for repo, from the cache (by image,
// then registry, then global) or from a run of the plugin.
func (p *plugin) keyring(ctx context.Context, repo string) (*Keyring, error) {
	now := p.clock.Now()
	p.mu.Lock()
	for _, key := range []string{"image:" + repo, "registry:" + registryOf(repo), "global"} {
		c, ok := p.cache[key]
		if !ok {
			continue
		}
		if now.Before(c.expires) {
			p.mu.Unlock()
			return c.kr, nil
		}
		delete(p.cache, key)
	}
	p.mu.Unlock()
	v, err, _ := p.group.Do(repo, func() (any, error) {
		resp, err := p.run(ctx, repo)
		if err != nil {
			return nil, err
		}
		var kr Keyring
		cfg := DockerConfig{}
		for loc, a := range resp.Auth {
			cfg[loc] = DockerConfigEntry{Username: a.Username, Password: a.Password}
		}
		kr.Add(cfg)
		d := p.cfg.DefaultCacheDuration.Duration
		if resp.CacheDuration != nil {
			d = resp.CacheDuration.Duration
		}
		if d > 0 {
			var key string
			switch resp.CacheKeyType {
			case credentialproviderv1.ImagePluginCacheKeyType:
				key = "image:" + repo
			case credentialproviderv1.RegistryPluginCacheKeyType:
				key = "registry:" + registryOf(repo)
			default:
				key = "global"
			}
			p.mu.Lock()
			p.cache[key] = cached{kr: &kr, expires: p.clock.Now().Add(d)}
			p.mu.Unlock()
		}
		return &kr, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Keyring), nil
}

// run executes the plugin with a CredentialProviderRequest for image on
// its standard input and reads its CredentialProviderResponse.
func (p *plugin) run(ctx context.Context, image string) (*credentialproviderv1.CredentialProviderResponse, error) {
	req := credentialproviderv1.CredentialProviderRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: p.cfg.APIVersion, Kind: "CredentialProviderRequest"},
		Image:    image,
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.path, p.cfg.Args...)
	cmd.Env = os.Environ()
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run %s: %w: %s", p.path, err, strings.TrimSpace(stderr.String()))
	}
	return ParsePluginResponse(stdout.Bytes(), p.cfg.APIVersion)
}

// ParsePluginResponse decodes a plugin's CredentialProviderResponse,
// strictly, and checks its kind, apiVersion (that of the request) and
// cacheKeyType.
func ParsePluginResponse(data []byte, apiVersion string) (*credentialproviderv1.CredentialProviderResponse, error) {
	var resp credentialproviderv1.CredentialProviderResponse
	if err := yaml.UnmarshalStrict(data, &resp); err != nil {
		return nil, fmt.Errorf("decode CredentialProviderResponse: %w", err)
	}
	if resp.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("response kind is %q, want CredentialProviderResponse", resp.Kind)
	}
	if resp.APIVersion != apiVersion {
		return nil, fmt.Errorf("response apiVersion is %q, want %q", resp.APIVersion, apiVersion)
	}
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType, credentialproviderv1.RegistryPluginCacheKeyType, credentialproviderv1.GlobalPluginCacheKeyType:
	default:
		return nil, fmt.Errorf("response cacheKeyType %q is not Image, Registry or Global", resp.CacheKeyType)
	}
	if resp.CacheDuration != nil && resp.CacheDuration.Duration < 0 {
		return nil, fmt.Errorf("response cacheDuration %v is negative", resp.CacheDuration.Duration)
	}
	return &resp, nil
}
