package manifest

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Default values the API server would fill in on pod creation and that the
// node agent relies on.
const (
	defaultProbeTimeoutSeconds   = 1
	defaultProbePeriodSeconds    = 10
	defaultProbeSuccessThreshold = 1
	defaultProbeFailureThreshold = 3
	defaultVolumeMode            = 0o644
	defaultTokenExpirySeconds    = 3600
)

// SetDefaults fills in the fields of pod that the Kubernetes API server
// defaults on creation (pod spec, containers, ports, probes, volumes,
// resources), so a static pod looks exactly like one read from the API:
//
//   - spec: restartPolicy Always, dnsPolicy ClusterFirst,
//     terminationGracePeriodSeconds 30, schedulerName default-scheduler,
//     enableServiceLinks true, securityContext {};
//   - containers (init and app): imagePullPolicy (Always for a ":latest" or
//     missing tag without digest, else IfNotPresent), terminationMessagePath
//     /dev/termination-log, terminationMessagePolicy File, port protocol
//     TCP, probe timing (1s timeout, 10s period, thresholds 1/3), HTTP
//     probe and hook path "/" and scheme HTTP, fieldRef apiVersion v1,
//     requests defaulted from limits, quantities rounded up to milli-units;
//   - with hostNetwork, hostPort defaults to containerPort;
//   - volumes: emptyDir when no source is given, mode 0644 for secret,
//     configMap, downwardAPI and projected volumes, hostPath type "",
//     service account token expiry 1h.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
	}
	// serviceAccount is the old name of serviceAccountName; the API keeps
	// both equal, serviceAccountName winning.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		b := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &b
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i], spec.HostNetwork)
	}
	if spec.Resources != nil {
		roundUp(spec.Resources.Limits)
		roundUp(spec.Resources.Requests)
	}
	roundUp(spec.Overhead)
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	defaultStatus(&pod.Status)
}

// defaultStatus keeps podIP and podIPs of a status given in the manifest
// in agreement, as the API does (podIP wins).
func defaultStatus(st *v1.PodStatus) {
	switch hasIP, hasIPs := st.PodIP != "", len(st.PodIPs) > 0; {
	case hasIP && !hasIPs:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	case !hasIP && hasIPs:
		st.PodIP = st.PodIPs[0].IP
	case hasIP && hasIPs && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		defaultHandler(c.Lifecycle.PostStart)
		defaultHandler(c.Lifecycle.PreStop)
	}
	for i := range c.Env {
		vf := c.Env[i].ValueFrom
		if vf == nil {
			continue
		}
		if vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
		if vf.FileKeyRef != nil && vf.FileKeyRef.Optional == nil {
			f := false
			vf.FileKeyRef.Optional = &f
		}
	}
	// Requests default to limits, per resource.
	if c.Resources.Limits != nil {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		for name, q := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = q.DeepCopy()
			}
		}
	}
	roundUp(c.Resources.Limits)
	roundUp(c.Resources.Requests)
}

// roundUp rounds every quantity up to milli-units, as the API does.
func roundUp(rl v1.ResourceList) {
	for name, q := range rl {
		q.RoundUp(-3)
		rl[name] = q
	}
}

func defaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = defaultProbeTimeoutSeconds
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = defaultProbePeriodSeconds
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = defaultProbeSuccessThreshold
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = defaultProbeFailureThreshold
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		empty := ""
		p.GRPC.Service = &empty
	}
}

func defaultHandler(h *v1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultVolume(v *v1.Volume) {
	if countSources(&v.VolumeSource) == 0 {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32) {
		if *m == nil {
			d := int32(defaultVolumeMode)
			*m = &d
		}
	}
	switch {
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode)
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode)
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode)
		defaultFieldRefs(v.DownwardAPI.Items)
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode)
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				e := int64(defaultTokenExpirySeconds)
				s.ServiceAccountToken.ExpirationSeconds = &e
			}
			if s.DownwardAPI != nil {
				defaultFieldRefs(s.DownwardAPI.Items)
			}
		}
	case v.HostPath != nil:
		if v.HostPath.Type == nil {
			t := v1.HostPathUnset
			v.HostPath.Type = &t
		}
	case v.Image != nil:
		if v.Image.PullPolicy == "" {
			v.Image.PullPolicy = DefaultPullPolicy(v.Image.Reference)
		}
	case v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil:
		spec := &v.Ephemeral.VolumeClaimTemplate.Spec
		if spec.VolumeMode == nil {
			m := v1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
		roundUp(spec.Resources.Limits)
		roundUp(spec.Resources.Requests)
	default:
		defaultLegacyVolume(&v.VolumeSource)
	}
}

// defaultLegacyVolume fills in the defaults of the in-tree volume types
// the API still defaults, so that a manifest using one hashes as upstream.
func defaultLegacyVolume(s *v1.VolumeSource) {
	setIfEmpty := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	switch {
	case s.ISCSI != nil:
		setIfEmpty(&s.ISCSI.ISCSIInterface, "default")
	case s.RBD != nil:
		setIfEmpty(&s.RBD.RBDPool, "rbd")
		setIfEmpty(&s.RBD.RadosUser, "admin")
		setIfEmpty(&s.RBD.Keyring, "/etc/ceph/keyring")
	case s.ScaleIO != nil:
		setIfEmpty(&s.ScaleIO.StorageMode, "ThinProvisioned")
		setIfEmpty(&s.ScaleIO.FSType, "xfs")
	case s.AzureDisk != nil:
		d := s.AzureDisk
		if d.CachingMode == nil {
			m := v1.AzureDataDiskCachingReadWrite
			d.CachingMode = &m
		}
		if d.FSType == nil {
			fs := "ext4"
			d.FSType = &fs
		}
		if d.ReadOnly == nil {
			ro := false
			d.ReadOnly = &ro
		}
		if d.Kind == nil {
			k := v1.AzureSharedBlobDisk
			d.Kind = &k
		}
	}
}

func defaultFieldRefs(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if fr := items[i].FieldRef; fr != nil && fr.APIVersion == "" {
			fr.APIVersion = "v1"
		}
	}
}

// DefaultPullPolicy returns the image pull policy the API gives a container
// without one: Always when image has the tag "latest", or neither a tag nor
// a digest; IfNotPresent otherwise.
func DefaultPullPolicy(image string) v1.PullPolicy {
	name, _, digested := strings.Cut(image, "@")
	tag := ""
	last := name[strings.LastIndex(name, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
	}
	if tag == "latest" || (tag == "" && !digested) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
