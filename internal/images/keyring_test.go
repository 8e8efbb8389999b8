package images

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMatchImage(t *testing.T) {
	tests := []struct {
		pattern, image string
		want           bool
	}{
		{"registry.test", "registry.test/app", true},
		{"registry.test", "registry.test/team/app", true},
		{"registry.test:5001", "registry.test:5001/app", true},
		{"127.0.0.1:5001", "127.0.0.1:5001/heartlet/app", true},
		{"registry.test/team", "registry.test/team/app", true},
		{"*.registry.test", "eu.registry.test/app", true},
		{"*.*.registry.test", "a.b.registry.test/app", true},
		{"registry.*", "registry.test/app", true},
		{"reg*.test", "registry.test/app", true},
		// Attacks: credentials for one registry must never go to another.
		{"registry.test", "registry.test.evil.example/app", false},
		{"registry.test", "evil.example/registry.test/app", false},
		{"registry.test", "evilregistry.test/app", false},
		{"registry.test", "sub.registry.test/app", false},
		{"*.registry.test", "registry.test/app", false},
		{"*.registry.test", "a.b.registry.test/app", false},
		{"*.registry.test", "registry.test.evil.example/app", false},
		{"registry.test", "registry.test:5001/app", false},
		{"registry.test:5001", "registry.test/app", false},
		{"registry.test:5001", "registry.test:5002/app", false},
		{"127.0.0.1:5001", "127.0.0.1:5000/app", false},
		{"registry.test/team", "registry.test/other/app", false},
		{"registry.test/team", "registry.test/app", false},
		{"[", "registry.test/app", false},
	}
	for _, tt := range tests {
		if got := MatchImage(tt.pattern, tt.image); got != tt.want {
			t.Errorf("MatchImage(%q, %q) = %v, want %v", tt.pattern, tt.image, got, tt.want)
		}
	}
}

func users(creds []*runtimeapi.AuthConfig) []string {
	var out []string
	for _, c := range creds {
		out = append(out, c.Username+":"+c.Password)
	}
	return out
}

func TestKeyringLookup(t *testing.T) {
	var kr Keyring
	kr.Add(DockerConfig{
		"https://index.docker.io/v1/":  {Username: "hub", Password: "h"},
		"registry.test":                {Username: "host", Password: "r"},
		"http://registry.test/team":    {Username: "team", Password: "t"},
		"registry.test/team/app":       {Username: "app", Password: "a"},
		"127.0.0.1:5001/v2/":           {Username: "local", Password: "l"},
		"*.mirror.test":                {Username: "glob", Password: "g"},
		"https://quay.test/v1/project": {Username: "quay", Password: "q"},
		"://bad":                       {Username: "never", Password: "n"},
	})
	tests := []struct {
		repo string
		want []string
	}{
		{"docker.io/library/busybox", []string{"hub:h"}},
		{"docker.io/someone/app", []string{"hub:h"}},
		{"registry.test/other", []string{"host:r"}},
		// Most specific first: every matching key, each tried in turn.
		{"registry.test/team/app", []string{"app:a", "team:t", "host:r"}},
		{"registry.test/team/db", []string{"team:t", "host:r"}},
		{"127.0.0.1:5001/heartlet/app", []string{"local:l"}},
		{"127.0.0.1:5000/heartlet/app", nil},
		{"eu.mirror.test/app", []string{"glob:g"}},
		{"mirror.test/app", nil},
		{"quay.test/project/app", []string{"quay:q"}},
		{"quay.test/other", nil},
		{"elsewhere.test/app", nil},
	}
	for _, tt := range tests {
		if got := users(kr.Lookup(tt.repo)); !slices.Equal(got, tt.want) {
			t.Errorf("Lookup(%q) = %v, want %v", tt.repo, got, tt.want)
		}
	}
	var empty Keyring
	if got := empty.Lookup("docker.io/library/busybox"); got != nil {
		t.Errorf("empty keyring gave %v", got)
	}
}

func TestIsDefaultRegistry(t *testing.T) {
	for repo, want := range map[string]bool{
		"docker.io/library/busybox": true, "index.docker.io/x/y": true, "busybox": true,
		"someone/app": true, "registry.test/app": false, "localhost:5000/app": false, "": false,
	} {
		if got := isDefaultRegistry(repo); got != want {
			t.Errorf("isDefaultRegistry(%q) = %v, want %v", repo, got, want)
		}
	}
}

func TestParseDockerConfig(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("fromauth:p:with:colons"))
	json := []byte(`{"auths":{"registry.test":{"username":"u","password":"p","email":"e@x"},"other.test":{"username":"ignored","auth":"` + auth + `"}}}`)
	cfg, err := ParseDockerConfigJSON(json)
	if err != nil {
		t.Fatal(err)
	}
	if e := cfg["registry.test"]; e.Username != "u" || e.Password != "p" || e.Email != "e@x" {
		t.Errorf("registry.test = %+v", e)
	}
	if e := cfg["other.test"]; e.Username != "fromauth" || e.Password != "p:with:colons" {
		t.Errorf("auth wins over username: %+v", e)
	}
	cfg, err = ParseDockercfg([]byte(`{"registry.test":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("a:b")) + `"}}`))
	if err != nil || cfg["registry.test"].Username != "a" || cfg["registry.test"].Password != "b" {
		t.Errorf("dockercfg = %+v, %v", cfg, err)
	}
	for _, bad := range []string{
		`{"auths":{"r":{"auth":"not base64!"}}}`,
		`{"auths":{"r":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}}`,
		`{"auths":[]}`,
		`not json`,
	} {
		if _, err := ParseDockerConfigJSON([]byte(bad)); err == nil {
			t.Errorf("ParseDockerConfigJSON(%s) succeeded", bad)
		}
	}
}

type secrets map[string]*v1.Secret

func (s secrets) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	if sec, ok := s[namespace+"/"+name]; ok {
		return sec, nil
	}
	return nil, errors.New("secrets \"" + name + "\" not found")
}

type providerCreds []*runtimeapi.AuthConfig

func (p providerCreds) Lookup(context.Context, string) []*runtimeapi.AuthConfig { return p }

func pullSecret(ns, name string, typ v1.SecretType, key, data string) *v1.Secret {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ, Data: map[string][]byte{key: []byte(data)}}
}

// The pod's pull secrets give the logins of the image's registry, in the
// order of the secrets, then the credential providers'; a secret that is
// missing, of another type or malformed is left out with one warning
// event naming it; another namespace's secret of the same name is never
// read.
func TestPodCredentials(t *testing.T) {
	store := secrets{
		"ns/json": pullSecret("ns", "json", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths":{"registry.test:5001":{"username":"json","password":"1"}}}`),
		"ns/cfg":  pullSecret("ns", "cfg", v1.SecretTypeDockercfg, v1.DockerConfigKey, `{"https://registry.test:5001":{"username":"cfg","password":"2"}}`),
		"ns/other-registry": pullSecret("ns", "other-registry", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
			`{"auths":{"registry.test":{"username":"wrong-port","password":"3"}}}`),
		"ns/opaque":  pullSecret("ns", "opaque", v1.SecretTypeOpaque, v1.DockerConfigJsonKey, `{"auths":{"registry.test:5001":{"username":"opaque","password":"4"}}}`),
		"ns/broken":  pullSecret("ns", "broken", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{`),
		"ns/empty":   pullSecret("ns", "empty", v1.SecretTypeDockerConfigJson, "other-key", `{}`),
		"other/json": pullSecret("other", "json", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths":{"registry.test:5001":{"username":"other-ns","password":"5"}}}`),
	}
	ev := &events{}
	pc := &PodCredentials{Secrets: store, Providers: providerCreds{{Username: "plugin", Password: "6"}}, Recorder: ev}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: v1.PodSpec{ImagePullSecrets: []v1.LocalObjectReference{
		{Name: "json"}, {Name: "missing"}, {Name: "opaque"}, {Name: "broken"}, {Name: "empty"}, {Name: "other-registry"}, {Name: "cfg"}, {Name: ""},
	}}}
	got := users(pc.Lookup(t.Context(), pod, "registry.test:5001/app"))
	if want := []string{"json:1", "cfg:2", "plugin:6"}; !slices.Equal(got, want) {
		t.Errorf("credentials %v, want %v", got, want)
	}
	if len(ev.list) != 1 {
		t.Fatalf("events %v, want one warning", ev.list)
	}
	for _, name := range []string{"missing", "opaque", "broken", "empty"} {
		if !strings.Contains(ev.list[0], name+":") {
			t.Errorf("event %q does not name %s", ev.list[0], name)
		}
	}

	// Another pod of the namespace, naming no secret, never gets the
	// first pod's logins: only the plugins'.
	neighbour := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "neighbour"}}
	if got := users(pc.Lookup(t.Context(), neighbour, "registry.test:5001/app")); !slices.Equal(got, []string{"plugin:6"}) {
		t.Errorf("a pod without pull secrets got %v, want only the plugin's login", got)
	}

	// Standalone: no getter, a pod naming a secret still pulls, warned.
	ev = &events{}
	none := &PodCredentials{Recorder: ev}
	if got := none.Lookup(t.Context(), pod, "registry.test:5001/app"); got != nil {
		t.Errorf("credentials without a getter %v", users(got))
	}
	if len(ev.list) != 1 {
		t.Errorf("events %v, want one warning", ev.list)
	}
	plain := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q"}}
	if got := none.Lookup(t.Context(), plain, "registry.test:5001/app"); got != nil || len(ev.list) != 1 {
		t.Errorf("a pod without pull secrets: %v, events %v", got, ev.list)
	}
}
