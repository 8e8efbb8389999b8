package images

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// SecretGetter reads a Secret from the API server. With the Node
// authorizer it may read only Secrets its pods reference. It must be safe
// for concurrent use.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ProviderCredentials gives the credentials the node's credential
// provider plugins have for repo; nil when none matches. It must be safe
// for concurrent use.
type ProviderCredentials interface {
	Lookup(ctx context.Context, repo string) []*runtimeapi.AuthConfig
}

// PodCredentials implements Credentials as the upstream kubelet: the
// logins of the pod's imagePullSecrets first, then those of the credential
// provider plugins.
type PodCredentials struct {
	// Secrets reads the pod's imagePullSecrets; nil reads none (standalone
	// mode: a pod naming some gets a warning event).
	Secrets SecretGetter
	// Providers are the credential provider plugins; nil means none.
	Providers ProviderCredentials
	// Recorder records FailedToRetrieveImagePullSecret events; nil none.
	Recorder Recorder
}

// Lookup implements Credentials. A pull secret that cannot be read, is of
// another type or does not parse is left out with a warning event, and
// the pull goes on with the others, as upstream.
func (p *PodCredentials) Lookup(ctx context.Context, pod *v1.Pod, repo string) []*runtimeapi.AuthConfig {
	var kr Keyring
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		cfg, err := p.secretConfig(ctx, pod.Namespace, ref.Name)
		if err != nil {
			klog.FromContext(ctx).Info("Unable to use image pull secret, the image pull may not succeed", "pod", klog.KObj(pod), "secret", klog.KRef(pod.Namespace, ref.Name), "err", err)
			failed = append(failed, fmt.Sprintf("%s: %v", ref.Name, err))
			continue
		}
		kr.Add(cfg)
	}
	if len(failed) > 0 && p.Recorder != nil {
		p.Recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%v); attempting to pull the image may not succeed.", failed)
	}
	creds := kr.Lookup(repo)
	if p.Providers != nil {
		creds = append(creds, p.Providers.Lookup(ctx, repo)...)
	}
	return creds
}

// secretConfig reads one pull secret and parses its docker config.
func (p *PodCredentials) secretConfig(ctx context.Context, namespace, name string) (DockerConfig, error) {
	if p.Secrets == nil {
		return nil, fmt.Errorf("no API server to read it from")
	}
	s, err := p.Secrets.GetSecret(ctx, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	return SecretDockerConfig(s)
}

// SecretDockerConfig returns the docker config of a pull secret: the
// .dockerconfigjson of a kubernetes.io/dockerconfigjson Secret or the
// .dockercfg of a kubernetes.io/dockercfg one.
func SecretDockerConfig(s *v1.Secret) (DockerConfig, error) {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		data := s.Data[v1.DockerConfigJsonKey]
		if len(data) == 0 {
			return nil, fmt.Errorf("secret of type %s has no %s", s.Type, v1.DockerConfigJsonKey)
		}
		return ParseDockerConfigJSON(data)
	case v1.SecretTypeDockercfg:
		data := s.Data[v1.DockerConfigKey]
		if len(data) == 0 {
			return nil, fmt.Errorf("secret of type %s has no %s", s.Type, v1.DockerConfigKey)
		}
		return ParseDockercfg(data)
	}
	return nil, fmt.Errorf("secret of type %q is not a pull secret (want %s or %s)", s.Type, v1.SecretTypeDockerConfigJson, v1.SecretTypeDockercfg)
}
