package manifest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// apiReference returns what kind of API object pod refers to, "" for
// none, as upstream refuses static pods that do (pkg/api/pod,
// HasAPIObjectReference): a static pod must run without the API server.
// Service accounts, secrets and config maps (by volume, environment or
// image pull secret), resource claims, and CSI, GlusterFS, PVC, ephemeral
// and Azure File volumes count; an empty name does not.
func apiReference(pod *v1.Pod) (string, error) {
	spec := &pod.Spec
	if spec.ServiceAccountName != "" {
		return "serviceaccounts", nil
	}
	if refersToSecret(spec) {
		return "secrets", nil
	}
	if refersToConfigMap(spec) {
		return "configmaps", nil
	}
	if len(spec.ResourceClaims) > 0 {
		return "resourceclaims", nil
	}
	for _, v := range spec.Volumes {
		s := &v.VolumeSource
		switch {
		case s.AWSElasticBlockStore != nil, s.AzureDisk != nil, s.CephFS != nil, s.Cinder != nil,
			s.DownwardAPI != nil, s.EmptyDir != nil, s.FC != nil, s.FlexVolume != nil, s.Flocker != nil, s.GCEPersistentDisk != nil,
			s.GitRepo != nil, s.HostPath != nil, s.Image != nil, s.ISCSI != nil, s.NFS != nil, s.PhotonPersistentDisk != nil,
			s.PortworxVolume != nil, s.Quobyte != nil, s.RBD != nil, s.ScaleIO != nil, s.StorageOS != nil, s.VsphereVolume != nil:
			continue
		case s.ConfigMap != nil:
			return "configmaps (via configmap volumes)", nil
		case s.Secret != nil:
			return "secrets (via secret volumes)", nil
		case s.CSI != nil:
			return "csidrivers (via CSI volumes)", nil
		case s.Glusterfs != nil:
			return "endpoints (via glusterFS volumes)", nil
		case s.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims", nil
		case s.Ephemeral != nil:
			return "persistentvolumeclaims (via ephemeral volumes)", nil
		case s.AzureFile != nil:
			return "secrets (via azureFile volumes)", nil
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				switch {
				case p.ConfigMap != nil:
					return "configmaps (via projected volumes)", nil
				case p.Secret != nil:
					return "secrets (via projected volumes)", nil
				case p.ServiceAccountToken != nil:
					return "serviceaccounts (via projected volumes)", nil
				case p.ClusterTrustBundle != nil:
					return "clustertrustbundles", nil
				case p.PodCertificate != nil:
					return "podcertificates", nil
				case p.DownwardAPI != nil:
					continue
				default:
					return "", fmt.Errorf("unknown source for projected volume %q", v.Name)
				}
			}
		default:
			return "", fmt.Errorf("unknown volume type for volume %q", v.Name)
		}
	}
	return "", nil
}

// eachContainer calls f for every container of spec, init and ephemeral
// ones included.
func eachContainer(spec *v1.PodSpec, f func(env []v1.EnvVar, envFrom []v1.EnvFromSource) bool) bool {
	for _, c := range spec.InitContainers {
		if f(c.Env, c.EnvFrom) {
			return true
		}
	}
	for _, c := range spec.Containers {
		if f(c.Env, c.EnvFrom) {
			return true
		}
	}
	for _, c := range spec.EphemeralContainers {
		if f(c.Env, c.EnvFrom) {
			return true
		}
	}
	return false
}

func refersToSecret(spec *v1.PodSpec) bool {
	for _, r := range spec.ImagePullSecrets {
		if r.Name != "" {
			return true
		}
	}
	if eachContainer(spec, func(env []v1.EnvVar, envFrom []v1.EnvFromSource) bool {
		for _, e := range envFrom {
			if e.SecretRef != nil && e.SecretRef.Name != "" {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				return true
			}
		}
		return false
	}) {
		return true
	}
	named := func(r *v1.LocalObjectReference) bool { return r != nil && r.Name != "" }
	for _, v := range spec.Volumes {
		s := &v.VolumeSource
		switch {
		case s.AzureFile != nil && s.AzureFile.SecretName != "",
			s.CephFS != nil && named(s.CephFS.SecretRef),
			s.Cinder != nil && named(s.Cinder.SecretRef),
			s.FlexVolume != nil && named(s.FlexVolume.SecretRef),
			s.RBD != nil && named(s.RBD.SecretRef),
			s.Secret != nil && s.Secret.SecretName != "",
			s.ScaleIO != nil && named(s.ScaleIO.SecretRef),
			s.ISCSI != nil && named(s.ISCSI.SecretRef),
			s.StorageOS != nil && named(s.StorageOS.SecretRef),
			s.CSI != nil && named(s.CSI.NodePublishSecretRef):
			return true
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.Secret != nil && p.Secret.Name != "" {
					return true
				}
			}
		}
	}
	return false
}

func refersToConfigMap(spec *v1.PodSpec) bool {
	if eachContainer(spec, func(env []v1.EnvVar, envFrom []v1.EnvFromSource) bool {
		for _, e := range envFrom {
			if e.ConfigMapRef != nil && e.ConfigMapRef.Name != "" {
				return true
			}
		}
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name != "" {
				return true
			}
		}
		return false
	}) {
		return true
	}
	for _, v := range spec.Volumes {
		s := &v.VolumeSource
		switch {
		case s.ConfigMap != nil && s.ConfigMap.Name != "":
			return true
		case s.Projected != nil:
			for _, p := range s.Projected.Sources {
				if p.ConfigMap != nil && p.ConfigMap.Name != "" {
					return true
				}
			}
		}
	}
	return false
}
