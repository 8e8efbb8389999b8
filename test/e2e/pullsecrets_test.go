//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	v1 "k8s.io/api/core/v1"
)

// authRegistry is a second registry, with htpasswd basic authentication,
// holding a copy of the busybox image under a name no other test uses.
type authRegistry struct {
	addr     string // 127.0.0.1:PORT
	image    string // the private image, tag 1.35
	user     string
	password string
}

// startAuthRegistry starts docker-registry on a free port with one user,
// pushes busybox to it with that user's credentials, and stops it (and
// removes the image from the runtime) when the test ends.
func startAuthRegistry(t *testing.T) *authRegistry {
	t.Helper()
	dir := t.TempDir()
	r := &authRegistry{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), user: "puller", password: "s3cret-" + fmt.Sprint(time.Now().UnixNano())}
	r.image = r.addr + "/heartlet/private-busybox:1.35"
	hash, err := bcrypt.GenerateFromPassword([]byte(r.password), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(r.user+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %s/data
http:
  addr: %s
auth:
  htpasswd:
    realm: heartlet-e2e
    path: %s/htpasswd
`, dir, r.addr, dir)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker-registry", "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = exec.Command("crictl", "--runtime-endpoint", criEndpoint, "rmi", r.image).Run()
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "registry.log")); err == nil {
				t.Logf("auth registry log:\n%s", b)
			}
		}
	})
	waitFor(t, 20*time.Second, "the auth registry to answer 401", func() (bool, string) {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized, resp.Status
	})
	// The image must not be in the runtime from an earlier run.
	_ = exec.Command("crictl", "--runtime-endpoint", criEndpoint, "rmi", r.image).Run()
	out, err := exec.Command("skopeo", "copy", "--src-tls-verify=false", "--dest-tls-verify=false",
		"--dest-creds", r.user+":"+r.password,
		"docker://"+strings.Replace(busyboxImage, "localhost:", "127.0.0.1:", 1), "docker://"+r.image).CombinedOutput()
	if err != nil {
		t.Fatalf("push %s: %v: %s", r.image, err, out)
	}
	// Without credentials the registry refuses the image.
	out, err = exec.Command("skopeo", "inspect", "--tls-verify=false", "docker://"+r.image).CombinedOutput()
	if err == nil {
		t.Fatalf("the auth registry serves %s without credentials: %s", r.image, out)
	}
	return r
}

// privatePod runs the private image, pulled Always so that every pod
// pulls with its own credentials.
func privatePod(name string, r *authRegistry, secrets ...string) *v1.Pod {
	return apiPod(name, func(p *v1.Pod) {
		p.Spec.Containers[0].Image = r.image
		p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
	})
}

// waitPullFailure waits until the pod's container waits with
// ErrImagePull or ImagePullBackOff, and returns the reason seen.
func waitPullFailure(t *testing.T, h *heartlet, name string) {
	t.Helper()
	p := waitAPIPod(t, h, name, podStartTimeout, "to fail its image pull", func(p *v1.Pod) bool {
		r := waitingReason(p, "main")
		return r == "ErrImagePull" || r == "ImagePullBackOff"
	})
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
}

// TestPullSecrets pulls an image from a registry with basic
// authentication (the semantics of upstream's test/e2e/common/node
// runtime.go "should be able to pull from private registry with secret"
// and its counterpart without): without credentials the pull fails with
// ErrImagePull, then ImagePullBackOff; with a kubernetes.io/dockerconfigjson
// imagePullSecret the pod runs; a secret for another registry or with a
// wrong password does not help, and a kubernetes.io/dockercfg one works too.
func TestPullSecrets(t *testing.T) {
	requireCluster(t)
	r := startAuthRegistry(t)
	h := startClusterHeartlet(t, clusterOptions{})

	t.Run("no secret", func(t *testing.T) {
		createPod(t, privatePod("pull-nosecret", r))
		waitPullFailure(t, h, "pull-nosecret")
		waitAPIPod(t, h, "pull-nosecret", podStartTimeout, "to back off", func(p *v1.Pod) bool {
			return waitingReason(p, "main") == "ImagePullBackOff"
		})
		evs, err := podEvents("pull-nosecret", "Failed")
		if err != nil || len(evs) == 0 {
			t.Errorf("Failed events: %v, %v; want the failed pull", evs, err)
		}
	})

	auth := base64.StdEncoding.EncodeToString([]byte(r.user + ":" + r.password))
	dockerConfigJSON := func(registry, authValue string) []byte {
		b, _ := json.Marshal(map[string]any{"auths": map[string]any{registry: map[string]string{"auth": authValue}}})
		return b
	}
	secret := func(name string, typ v1.SecretType, key string, data []byte) *v1.Secret {
		s := &v1.Secret{Type: typ, Data: map[string][]byte{key: data}}
		s.APIVersion, s.Kind = "v1", "Secret"
		s.Name, s.Namespace = name, "default"
		return s
	}
	createObject(t, secret("pull-right", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, dockerConfigJSON(r.addr, auth)), "secret", "pull-right")
	createObject(t, secret("pull-otherport", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
		dockerConfigJSON("127.0.0.1:5000", auth)), "secret", "pull-otherport")
	createObject(t, secret("pull-wrongpw", v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey,
		dockerConfigJSON("http://"+r.addr, base64.StdEncoding.EncodeToString([]byte(r.user+":wrong")))), "secret", "pull-wrongpw")
	cfg, _ := json.Marshal(map[string]any{"http://" + r.addr + "/v2/": map[string]string{"username": r.user, "password": r.password}})
	createObject(t, secret("pull-dockercfg", v1.SecretTypeDockercfg, v1.DockerConfigKey, cfg), "secret", "pull-dockercfg")

	t.Run("secrets that do not match or are wrong", func(t *testing.T) {
		createPod(t, privatePod("pull-badsecrets", r, "pull-otherport", "pull-wrongpw", "pull-missing"))
		waitPullFailure(t, h, "pull-badsecrets")
		evs, err := podEvents("pull-badsecrets", "FailedToRetrieveImagePullSecret")
		if err != nil || len(evs) == 0 || !strings.Contains(evs[0].Message, "pull-missing") {
			t.Errorf("FailedToRetrieveImagePullSecret events: %v, %v; want one naming pull-missing", evs, err)
		}
	})
	t.Run("dockerconfigjson secret", func(t *testing.T) {
		// The wrong password is tried first, the right one next.
		createPod(t, privatePod("pull-secret", r, "pull-wrongpw", "pull-right"))
		waitAPIPodRunning(t, h, "pull-secret")
	})
	t.Run("dockercfg secret", func(t *testing.T) {
		createPod(t, privatePod("pull-dockercfg", r, "pull-dockercfg"))
		waitAPIPodRunning(t, h, "pull-dockercfg")
	})
}

// TestCredentialProviderPlugin runs a node agent with a kubelet credential
// provider plugin (--image-credential-provider-config,
// --image-credential-provider-bin-dir; upstream's
// test/e2e_node/image_credential_provider.go checks the same): a pod
// without any imagePullSecret pulls the private image with the plugin's
// login, and the plugin is asked once for the registry (cacheKeyType
// Registry), with its configured arguments.
func TestCredentialProviderPlugin(t *testing.T) {
	requireCluster(t)
	r := startAuthRegistry(t)
	binDir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "heartlet-e2e-credprovider"), "./testdata/credprovider").CombinedOutput()
	if err != nil {
		t.Fatalf("build the test plugin: %v: %s", err, out)
	}
	log := filepath.Join(t.TempDir(), "requests.log")
	cfg := filepath.Join(t.TempDir(), "credential-providers.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: heartlet-e2e-credprovider
  matchImages: ["%s"]
  defaultCacheDuration: 5m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: ["--from-config"]
  env:
  - {name: CREDPROVIDER_REGISTRY, value: "%s"}
  - {name: CREDPROVIDER_USER, value: "%s"}
  - {name: CREDPROVIDER_PASSWORD, value: "%s"}
  - {name: CREDPROVIDER_LOG, value: "%s"}
`, r.addr, r.addr, r.user, r.password, log)), 0o600); err != nil {
		t.Fatal(err)
	}

	h := newClusterHeartlet(t, clusterOptions{})
	t.Cleanup(h.cleanup)
	h.run("cluster mode with a credential provider", append(clusterArgs(h, nodeKubeconfig),
		"--image-credential-provider-config", cfg, "--image-credential-provider-bin-dir", binDir)...)
	waitNodeSchedulable(t, h)

	createPod(t, privatePod("pull-plugin", r))
	waitAPIPodRunning(t, h, "pull-plugin")
	createPod(t, privatePod("pull-plugin-2", r))
	waitAPIPodRunning(t, h, "pull-plugin-2")

	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the plugin was never run: %v", err)
	}
	want := r.addr + "/heartlet/private-busybox --from-config"
	if got := strings.TrimSpace(string(b)); got != want {
		t.Errorf("plugin requests:\n%s\nwant exactly one: %s (the second pull uses the cached answer)", got, want)
	}
}
