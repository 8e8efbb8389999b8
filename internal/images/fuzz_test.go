package images

import (
	"testing"
)

// FuzzParseDockerConfig feeds untrusted Secret data to both docker config
// parsers and the keyring: nothing may panic, and a parsed config's
// logins are found only for images their key matches.
func FuzzParseDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"registry.test:5001":{"username":"u","password":"p"}}}`), "registry.test:5001/app")
	f.Add([]byte(`{"https://index.docker.io/v1/":{"auth":"dTpw"}}`), "docker.io/library/busybox")
	f.Add([]byte(`{"auths":{"*.test/v2/":{"auth":"bm9jb2xvbg=="}}}`), "a.test/x")
	f.Add([]byte(`{"auths":{"[::1]:5000":{"username":"u"}}}`), "[::1]:5000/x")
	f.Fuzz(func(t *testing.T, data []byte, repo string) {
		for _, parse := range []func([]byte) (DockerConfig, error){ParseDockerConfigJSON, ParseDockercfg} {
			cfg, err := parse(data)
			if err != nil {
				continue
			}
			var kr Keyring
			kr.Add(cfg)
			got := kr.Lookup(repo)
			matched := false
			for loc := range cfg {
				if key, ok := keyOf(loc); ok && (MatchImage(key, repo) || key == defaultRegistryKey) {
					matched = true
				}
			}
			if len(got) > 0 && !matched {
				t.Fatalf("logins %v for %q, which no key of %v matches", got, repo, cfg)
			}
		}
	})
}

// FuzzParsePluginResponse feeds plugin output to the response parser:
// nothing may panic, and an accepted response has a known cacheKeyType
// and no negative duration.
func FuzzParsePluginResponse(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"r.test":{"username":"u","password":"p"}}}`))
	f.Add([]byte(`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Global","cacheDuration":"5m"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := ParsePluginResponse(data, pluginAPIVersion)
		if err != nil {
			return
		}
		switch resp.CacheKeyType {
		case "Image", "Registry", "Global":
		default:
			t.Fatalf("accepted cacheKeyType %q", resp.CacheKeyType)
		}
		if resp.CacheDuration != nil && resp.CacheDuration.Duration < 0 {
			t.Fatalf("accepted a negative cacheDuration")
		}
	})
}
