package images

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DockerConfigEntry is one registry login of a docker config: username
// and password, given as such or as auth, base64 of "username:password"
// (which wins when both are given, as upstream).
type DockerConfigEntry struct {
	Username string
	Password string
	Email    string
}

// DockerConfig maps a registry (host[:port][/path], with or without
// scheme, the host possibly with "*" globs) to its login: the content of
// a kubernetes.io/dockercfg Secret, and the "auths" of a
// kubernetes.io/dockerconfigjson one.
type DockerConfig map[string]DockerConfigEntry

type dockerConfigEntryJSON struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// UnmarshalJSON decodes an entry, taking username and password from auth
// when it is set.
func (e *DockerConfigEntry) UnmarshalJSON(data []byte) error {
	var raw dockerConfigEntryJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	e.Username, e.Password, e.Email = raw.Username, raw.Password, raw.Email
	if raw.Auth == "" {
		return nil
	}
	decoded, err := base64.StdEncoding.DecodeString(raw.Auth)
	if err != nil {
		return fmt.Errorf("auth is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(decoded), ":")
	if !ok {
		return errors.New("auth must be base64 of username:password")
	}
	e.Username, e.Password = user, strings.Trim(pass, "\x00")
	return nil
}

// ParseDockerConfigJSON parses the .dockerconfigjson key of a
// kubernetes.io/dockerconfigjson Secret: {"auths": {registry: entry}}.
func ParseDockerConfigJSON(data []byte) (DockerConfig, error) {
	var cfg struct {
		Auths DockerConfig `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse .dockerconfigjson: %w", err)
	}
	return cfg.Auths, nil
}

// ParseDockercfg parses the .dockercfg key of a kubernetes.io/dockercfg
// Secret: {registry: entry}.
func ParseDockercfg(data []byte) (DockerConfig, error) {
	var cfg DockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("parse .dockercfg: %w", err)
	}
	return cfg, nil
}

// The registry docker.io images are pulled from; credentials given for it
// (usually as https://index.docker.io/v1/) serve every docker.io image.
const defaultRegistryKey = "index.docker.io"

// Keyring holds registry logins and finds those of an image, as the
// upstream kubelet's keyring: a login's key matches an image when the
// host has as many dot-separated parts, each matching (a part may be a
// glob such as "*"), the ports are the same (none is not any), and the
// key's path is a prefix of the image's. The zero value is empty and
// ready.
type Keyring struct {
	index []string // keys, most specific first
	creds map[string][]*runtimeapi.AuthConfig
}

// Add adds every login of cfg. A key that is not a host with an optional
// port and path is skipped: it can match no image.
func (k *Keyring) Add(cfg DockerConfig) {
	if k.creds == nil {
		k.creds = map[string][]*runtimeapi.AuthConfig{}
	}
	// Map order is random: add in key order, so lookups are stable.
	locs := make([]string, 0, len(cfg))
	for loc := range cfg {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	for _, loc := range locs {
		key, ok := keyOf(loc)
		if !ok {
			continue
		}
		e := cfg[loc]
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password})
	}
	// Reverse order puts a longer key before its prefixes.
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
}

// keyOf turns a docker config location into a schemeless key: host and
// port, and the path unless it is empty, "/" or only the registry API's
// "/v1/" or "/v2/" prefix.
func keyOf(loc string) (string, bool) {
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil || u.Host == "" {
		return "", false
	}
	path := u.Path
	if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/v2/") {
		path = path[3:]
	}
	if path == "" || path == "/" {
		return u.Host, true
	}
	return u.Host + path, true
}

// Lookup returns the logins of repo (a normalized repository, such as
// registry.test:5000/team/app or docker.io/library/busybox), most specific
// key first; nil when none matches.
func (k *Keyring) Lookup(repo string) []*runtimeapi.AuthConfig {
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		if MatchImage(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDefaultRegistry(repo) {
		out = append(out, k.creds[defaultRegistryKey]...)
	}
	return out
}

// isDefaultRegistry tells whether repo is on docker.io: its first part is
// docker.io or index.docker.io, or names no registry at all (it has no
// "." or ":" and is not the only part).
func isDefaultRegistry(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	switch {
	case first == "":
		return false
	case !found, first == "docker.io", first == "index.docker.io":
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// MatchImage tells whether pattern (host[:port][/path] without scheme,
// each dot-separated part of the host possibly a glob) matches image, as
// upstream matches keyring keys and credential provider matchImages.
func MatchImage(pattern, image string) bool {
	p, err := url.Parse("https://" + pattern)
	if err != nil {
		return false
	}
	t, err := url.Parse("https://" + image)
	if err != nil {
		return false
	}
	pParts, pPort := splitHost(p.Host)
	tParts, tPort := splitHost(t.Host)
	if pPort != tPort || len(pParts) != len(tParts) || !strings.HasPrefix(t.Path, p.Path) {
		return false
	}
	for i := range pParts {
		if ok, err := filepath.Match(pParts[i], tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}
