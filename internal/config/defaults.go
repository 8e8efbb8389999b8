package config

import (
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// Values the kubelet uses when neither the configuration file nor a flag sets
// them. They follow the upstream kubelet (kubelet.config.k8s.io/v1beta1 on
// Linux).
const (
	// APIVersion is the only configuration file version heartlet reads.
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	// Kind is the kind of the configuration file's object.
	Kind = "KubeletConfiguration"

	// DefaultRootDir is the --root-dir default.
	DefaultRootDir = "/var/lib/kubelet"
	// DefaultContainerRuntimeEndpoint is containerd's CRI socket.
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	// DefaultPodLogsDir is where container logs are written.
	DefaultPodLogsDir = "/var/log/pods"
	// DefaultResolvConf is the resolver file pods' DNS starts from.
	DefaultResolvConf = "/etc/resolv.conf"
	// DefaultVolumePluginDir is the flexvolume plugin directory.
	DefaultVolumePluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
	// DefaultPort is the kubelet's authenticated HTTPS port.
	DefaultPort = 10250
	// LegacyReadOnlyPort is the read-only port used when no configuration
	// file is given (the command line's historical default). With a file the
	// read-only port defaults to 0 (off).
	LegacyReadOnlyPort = 10255
	// DefaultHealthzPort is the healthz port.
	DefaultHealthzPort = 10248
	// DefaultOOMScoreAdj is the kubelet process' own oom_score_adj.
	DefaultOOMScoreAdj = -999
	// DefaultMemoryThrottlingFactor is the MemoryQoS memory.high factor.
	DefaultMemoryThrottlingFactor = 0.9
)

// DefaultEvictionHard returns the Linux hard eviction thresholds used when
// evictionHard is not set (and merged into it when
// mergeDefaultEvictionSettings is true).
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":  "100Mi",
		"nodefs.available":  "10%",
		"nodefs.inodesFree": "5%",
		"imagefs.available": "15%",
	}
}

// SetDefaults fills every unset field of kc with the upstream kubelet
// default for a configuration file. It only fills zero values, so calling it
// twice changes nothing.
func SetDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	durationDefault(&kc.SyncFrequency, time.Minute)
	durationDefault(&kc.FileCheckFrequency, 20*time.Second)
	durationDefault(&kc.HTTPCheckFrequency, 20*time.Second)
	boolDefault(&kc.EnableServer, true)
	stringDefault(&kc.Address, "0.0.0.0")
	int32Default(&kc.Port, DefaultPort)
	boolDefault(&kc.Authentication.Anonymous.Enabled, false)
	boolDefault(&kc.Authentication.Webhook.Enabled, true)
	durationDefault(&kc.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if kc.Authorization.Mode == "" {
		kc.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	durationDefault(&kc.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	durationDefault(&kc.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	ptrDefault(&kc.RegistryPullQPS, 5)
	int32Default(&kc.RegistryBurst, 10)
	ptrDefault(&kc.EventRecordQPS, 50)
	int32Default(&kc.EventBurst, 100)
	boolDefault(&kc.EnableDebuggingHandlers, true)
	ptrDefault(&kc.HealthzPort, DefaultHealthzPort)
	stringDefault(&kc.HealthzBindAddress, "127.0.0.1")
	ptrDefault(&kc.OOMScoreAdj, DefaultOOMScoreAdj)
	durationDefault(&kc.StreamingConnectionIdleTimeout, 4*time.Hour)
	if kc.NodeStatusReportFrequency.Duration == 0 {
		// An explicitly set update frequency is also the report frequency.
		if kc.NodeStatusUpdateFrequency.Duration == 0 {
			kc.NodeStatusReportFrequency.Duration = 5 * time.Minute
		} else {
			kc.NodeStatusReportFrequency = kc.NodeStatusUpdateFrequency
		}
	}
	durationDefault(&kc.NodeStatusUpdateFrequency, 10*time.Second)
	int32Default(&kc.NodeLeaseDurationSeconds, 40)
	durationDefault(&kc.ImageMinimumGCAge, 2*time.Minute)
	ptrDefault(&kc.ImageGCHighThresholdPercent, 85)
	ptrDefault(&kc.ImageGCLowThresholdPercent, 80)
	durationDefault(&kc.VolumeStatsAggPeriod, time.Minute)
	boolDefault(&kc.CgroupsPerQOS, true)
	stringDefault(&kc.CgroupDriver, "cgroupfs")
	if kc.CgroupRoot == "" && *kc.CgroupsPerQOS {
		// The kubelet puts the QoS hierarchy under the root cgroup when
		// none is given.
		kc.CgroupRoot = "/"
	}
	stringDefault(&kc.CPUManagerPolicy, "none")
	durationDefault(&kc.CPUManagerReconcilePeriod, 10*time.Second)
	stringDefault(&kc.MemoryManagerPolicy, kubeletv1beta1.NoneMemoryManagerPolicy)
	stringDefault(&kc.TopologyManagerPolicy, kubeletv1beta1.NoneTopologyManagerPolicy)
	stringDefault(&kc.TopologyManagerScope, kubeletv1beta1.ContainerTopologyManagerScope)
	durationDefault(&kc.RuntimeRequestTimeout, 2*time.Minute)
	stringDefault(&kc.HairpinMode, kubeletv1beta1.PromiscuousBridge)
	int32Default(&kc.MaxPods, 110)
	if kc.PodPidsLimit == nil || *kc.PodPidsLimit < 0 {
		kc.PodPidsLimit = ptr.To[int64](-1)
	}
	ptrDefault(&kc.ResolverConfig, DefaultResolvConf)
	boolDefault(&kc.CPUCFSQuota, true)
	if kc.CPUCFSQuotaPeriod == nil {
		kc.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	ptrDefault(&kc.NodeStatusMaxImages, 50)
	if kc.MaxOpenFiles == 0 {
		kc.MaxOpenFiles = 1000000
	}
	stringDefault(&kc.ContentType, "application/vnd.kubernetes.protobuf")
	ptrDefault(&kc.KubeAPIQPS, 50)
	int32Default(&kc.KubeAPIBurst, 100)
	if kc.SerializeImagePulls == nil {
		// Setting maxParallelImagePulls above 1 turns serial pulls off.
		kc.SerializeImagePulls = ptr.To(kc.MaxParallelImagePulls == nil || *kc.MaxParallelImagePulls < 2)
	}
	durationDefault(&kc.EvictionPressureTransitionPeriod, 5*time.Minute)
	boolDefault(&kc.MergeDefaultEvictionSettings, false)
	if kc.EvictionHard == nil {
		kc.EvictionHard = DefaultEvictionHard()
	}
	MergeEvictionDefaults(kc)
	boolDefault(&kc.EnableControllerAttachDetach, true)
	boolDefault(&kc.MakeIPTablesUtilChains, true)
	ptrDefault(&kc.IPTablesMasqueradeBit, 14)
	ptrDefault(&kc.IPTablesDropBit, 15)
	boolDefault(&kc.FailSwapOn, true)
	stringDefault(&kc.ContainerLogMaxSize, "10Mi")
	ptrDefault(&kc.ContainerLogMaxFiles, 5)
	ptrDefault(&kc.ContainerLogMaxWorkers, 1)
	if kc.ContainerLogMonitorInterval == nil {
		kc.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if kc.ConfigMapAndSecretChangeDetectionStrategy == "" {
		kc.ConfigMapAndSecretChangeDetectionStrategy = kubeletv1beta1.WatchChangeDetectionStrategy
	}
	if kc.EnforceNodeAllocatable == nil {
		kc.EnforceNodeAllocatable = []string{"pods"}
	}
	stringDefault(&kc.VolumePluginDir, DefaultVolumePluginDir)
	logsapi.SetRecommendedLoggingConfiguration(&kc.Logging)
	boolDefault(&kc.EnableSystemLogHandler, true)
	boolDefault(&kc.EnableProfilingHandler, true)
	boolDefault(&kc.EnableDebugFlagsHandler, true)
	boolDefault(&kc.SeccompDefault, false)
	boolDefault(&kc.FailCgroupV1, true)
	ptrDefault(&kc.MemoryThrottlingFactor, DefaultMemoryThrottlingFactor)
	if kc.MemoryReservationPolicy == "" {
		kc.MemoryReservationPolicy = kubeletv1beta1.NoneMemoryReservationPolicy
	}
	boolDefault(&kc.RegisterNode, true)
	boolDefault(&kc.LocalStorageCapacityIsolation, true)
	stringDefault(&kc.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint)
	stringDefault(&kc.PodLogsDir, DefaultPodLogsDir)
}

// MergeEvictionDefaults adds the default hard eviction thresholds missing
// from evictionHard when mergeDefaultEvictionSettings is true; otherwise a
// signal left out of evictionHard has no hard threshold.
func MergeEvictionDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	if kc.MergeDefaultEvictionSettings == nil || !*kc.MergeDefaultEvictionSettings {
		return
	}
	merged := DefaultEvictionHard()
	maps.Copy(merged, kc.EvictionHard)
	kc.EvictionHard = merged
}

// NewDefault returns the configuration heartlet uses when no --config file
// is given: the file defaults plus the command line's historical defaults
// (read-only port 10255, anonymous authentication, no webhook
// authentication, AlwaysAllow authorization), as the upstream kubelet does.
func NewDefault() *kubeletv1beta1.KubeletConfiguration {
	kc := &kubeletv1beta1.KubeletConfiguration{}
	kc.APIVersion = APIVersion
	kc.Kind = Kind
	SetDefaults(kc)
	applyLegacyDefaults(kc)
	return kc
}

// applyLegacyDefaults sets the command line's historical defaults, which
// differ from the file's.
func applyLegacyDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.ReadOnlyPort = LegacyReadOnlyPort
	kc.Authentication.Anonymous.Enabled = ptr.To(true)
	kc.Authentication.Webhook.Enabled = ptr.To(false)
	kc.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow
}

func durationDefault(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

func stringDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func int32Default(i *int32, v int32) {
	if *i == 0 {
		*i = v
	}
}

func boolDefault(b **bool, v bool) {
	if *b == nil {
		*b = ptr.To(v)
	}
}

func ptrDefault[T any](p **T, v T) {
	if *p == nil {
		*p = ptr.To(v)
	}
}
