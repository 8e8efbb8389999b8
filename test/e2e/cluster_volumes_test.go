//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// volumeReporter copies what the pod sees into the hostPath /out every
// second (exec is not available to the tests): its volumes, its env and
// the result of an API request with its service-account token, made by
// the test image's Go client that verifies the server with the mounted CA.
const volumeReporter = `sa=/var/run/secrets/kubernetes.io/serviceaccount
report() {
	cat /etc/cm/greeting > /out/cm.tmp && mv /out/cm.tmp /out/cm
	cat /etc/secret/password > /out/secret.tmp && mv /out/secret.tmp /out/secret
	cat /etc/podinfo/name > /out/downward-name.tmp && mv /out/downward-name.tmp /out/downward-name
	cat /etc/podinfo/labels > /out/downward-labels.tmp && mv /out/downward-labels.tmp /out/downward-labels
	echo "$GREETING $PASSWORD" > /out/env.tmp && mv /out/env.tmp /out/env
	cat $sa/namespace > /out/sa-namespace.tmp && mv /out/sa-namespace.tmp /out/sa-namespace
	cp $sa/ca.crt /out/sa-ca.tmp && mv /out/sa-ca.tmp /out/sa-ca.crt
	/testserver fetch -ca-file $sa/ca.crt -token-file $sa/token -o /out/api https://127.0.0.1:6443/api 2>/out/api.err
}
trap 'exit 0' TERM
while true; do report; sleep 1 & wait $!; done`

// A pod sees its ConfigMap, Secret, downward API and projected
// service-account token volumes and its configMapKeyRef/secretKeyRef env,
// can call the API server with the token, and sees ConfigMap updates.
func TestClusterPodVolumes(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	out := t.TempDir()
	const name = "api-volumes"

	cm := &v1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-volumes-cm", Namespace: "default"},
		Data:       map[string]string{"greeting": "hello-configmap"},
	}
	secret := &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-volumes-secret", Namespace: "default"},
		StringData: map[string]string{"password": "s3cret-value"},
	}
	createObject(t, cm, "configmap", cm.Name)
	createObject(t, secret, "secret", secret.Name)

	hostPathDir := v1.HostPathDirectory
	createPod(t, apiPod(name, func(p *v1.Pod) {
		p.Spec.HostNetwork = true
		c := shContainer("main", volumeReporter)
		c.Image = testserverImage
		c.Env = []v1.EnvVar{
			{Name: "GREETING", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}, Key: "greeting"}}},
			{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: secret.Name}, Key: "password"}}},
		}
		c.VolumeMounts = []v1.VolumeMount{
			{Name: "cm", MountPath: "/etc/cm"},
			{Name: "secret", MountPath: "/etc/secret"},
			{Name: "podinfo", MountPath: "/etc/podinfo"},
			{Name: "out", MountPath: "/out"},
		}
		p.Spec.Containers = []v1.Container{c}
		p.Spec.Volumes = []v1.Volume{
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}}}},
			{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secret.Name}}},
			{Name: "podinfo", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
				Items: []v1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				}}}},
			{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: &hostPathDir}}},
		}
	}))
	waitAPIPodRunning(t, h, name)

	read := func(file string) (string, error) {
		b, err := os.ReadFile(filepath.Join(out, file))
		return strings.TrimSpace(string(b)), err
	}
	waitContent := func(t *testing.T, file string, timeout time.Duration, want func(string) bool, what string) {
		t.Helper()
		waitFor(t, timeout, fmt.Sprintf("%s in the pod's %s", what, file), func() (bool, string) {
			got, err := read(file)
			if err != nil {
				return false, err.Error()
			}
			return want(got), fmt.Sprintf("content %q", got)
		})
	}
	equals := func(s string) func(string) bool { return func(got string) bool { return got == s } }

	t.Run("configMap", func(t *testing.T) {
		waitContent(t, "cm", 30*time.Second, equals("hello-configmap"), "the ConfigMap value")
	})
	t.Run("secret", func(t *testing.T) {
		waitContent(t, "secret", 30*time.Second, equals("s3cret-value"), "the Secret value")
	})
	t.Run("downwardAPI", func(t *testing.T) {
		waitContent(t, "downward-name", 30*time.Second, equals(name), "the pod name")
		waitContent(t, "downward-labels", 30*time.Second, func(s string) bool {
			return strings.Contains(s, `test-pod="`+name+`"`)
		}, "the pod labels")
	})
	t.Run("env", func(t *testing.T) {
		waitContent(t, "env", 30*time.Second, equals("hello-configmap s3cret-value"), "the env values")
	})
	t.Run("serviceAccount", func(t *testing.T) {
		waitContent(t, "sa-namespace", 30*time.Second, equals("default"), "the namespace")
		waitFor(t, 60*time.Second, "GET /api with the token to succeed in the pod", func() (bool, string) {
			got, err := read("api")
			if err != nil {
				msg, _ := read("api.err")
				return false, fmt.Sprintf("%v; fetch: %q", err, msg)
			}
			return strings.Contains(got, `"versions"`) && strings.Contains(got, `"APIVersions"`), fmt.Sprintf("content %q", got)
		})
		caFile := os.Getenv("HEARTLET_KUBE_LIB")
		if caFile == "" {
			caFile = "/var/lib/heartlet-kube"
		}
		want, err := os.ReadFile(filepath.Join(caFile, "pki", "ca.crt"))
		if err != nil {
			t.Skipf("cannot compare ca.crt with the cluster CA: %v", err)
		}
		waitContent(t, "sa-ca.crt", 30*time.Second, equals(strings.TrimSpace(string(want))), "the cluster CA")
	})
	t.Run("configMap update", func(t *testing.T) {
		mustKubectl(t, "patch", "configmap", "-n", "default", cm.Name, "--type=merge", "-p", `{"data":{"greeting":"updated-configmap"}}`)
		waitContent(t, "cm", 2*time.Minute, equals("updated-configmap"), "the updated ConfigMap value")
	})
}

// A missing Secret volume keeps the pod ContainerCreating with FailedMount
// events; a missing configMapKeyRef is CreateContainerConfigError.
func TestClusterPodMissingObjects(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})

	t.Run("missing secret volume", func(t *testing.T) {
		const name = "api-missing-secret"
		createPod(t, apiPod(name, func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "secret", MountPath: "/etc/secret"}}
			p.Spec.Volumes = []v1.Volume{{Name: "secret", VolumeSource: v1.VolumeSource{
				Secret: &v1.SecretVolumeSource{SecretName: "e2e-does-not-exist"}}}}
		}))
		waitFor(t, 90*time.Second, "a FailedMount event", func() (bool, string) {
			if !h.running() {
				t.Fatalf("heartlet exited: %v", h.err)
			}
			evs, err := podEvents(name, "FailedMount")
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs {
				if e.Type == v1.EventTypeWarning && strings.Contains(e.Message, "e2e-does-not-exist") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d FailedMount events", len(evs))
		})
		p := waitAPIPod(t, h, name, 30*time.Second, "to wait in ContainerCreating", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodPending && waitingReason(p, "main") == "ContainerCreating"
		})
		if c := newCRI(t); len(c.podContainers(t, string(p.UID), "")) != 0 {
			t.Error("a container was created although a volume is missing")
		}
	})

	t.Run("missing configMapKeyRef", func(t *testing.T) {
		const name = "api-missing-cm-env"
		createPod(t, apiPod(name, func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
				ConfigMapKeyRef: &v1.ConfigMapKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "e2e-does-not-exist"}, Key: "x"}}}}
		}))
		p := waitAPIPod(t, h, name, 90*time.Second, "to report CreateContainerConfigError", func(p *v1.Pod) bool {
			return waitingReason(p, "main") == "CreateContainerConfigError"
		})
		if p.Status.Phase != v1.PodPending {
			t.Errorf("phase = %s, want Pending", p.Status.Phase)
		}
	})
}
