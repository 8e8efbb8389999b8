package config

import (
	"maps"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestSetDefaults(t *testing.T) {
	kc := &kubeletv1beta1.KubeletConfiguration{}
	SetDefaults(kc)
	tests := []struct {
		field string
		got   any
		want  any
	}{
		{"enableServer", *kc.EnableServer, true},
		{"syncFrequency", kc.SyncFrequency.Duration, time.Minute},
		{"fileCheckFrequency", kc.FileCheckFrequency.Duration, 20 * time.Second},
		{"httpCheckFrequency", kc.HTTPCheckFrequency.Duration, 20 * time.Second},
		{"address", kc.Address, "0.0.0.0"},
		{"port", kc.Port, int32(10250)},
		{"readOnlyPort", kc.ReadOnlyPort, int32(0)},
		{"authentication.anonymous.enabled", *kc.Authentication.Anonymous.Enabled, false},
		{"authentication.webhook.enabled", *kc.Authentication.Webhook.Enabled, true},
		{"authentication.webhook.cacheTTL", kc.Authentication.Webhook.CacheTTL.Duration, 2 * time.Minute},
		{"authorization.mode", kc.Authorization.Mode, kubeletv1beta1.KubeletAuthorizationModeWebhook},
		{"authorization.webhook.cacheAuthorizedTTL", kc.Authorization.Webhook.CacheAuthorizedTTL.Duration, 5 * time.Minute},
		{"authorization.webhook.cacheUnauthorizedTTL", kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration, 30 * time.Second},
		{"registryPullQPS", *kc.RegistryPullQPS, int32(5)},
		{"registryBurst", kc.RegistryBurst, int32(10)},
		{"eventRecordQPS", *kc.EventRecordQPS, int32(50)},
		{"eventBurst", kc.EventBurst, int32(100)},
		{"enableDebuggingHandlers", *kc.EnableDebuggingHandlers, true},
		{"healthzPort", *kc.HealthzPort, int32(10248)},
		{"healthzBindAddress", kc.HealthzBindAddress, "127.0.0.1"},
		{"oomScoreAdj", *kc.OOMScoreAdj, int32(-999)},
		{"clusterDomain", kc.ClusterDomain, ""},
		{"streamingConnectionIdleTimeout", kc.StreamingConnectionIdleTimeout.Duration, 4 * time.Hour},
		{"nodeStatusUpdateFrequency", kc.NodeStatusUpdateFrequency.Duration, 10 * time.Second},
		{"nodeStatusReportFrequency", kc.NodeStatusReportFrequency.Duration, 5 * time.Minute},
		{"nodeLeaseDurationSeconds", kc.NodeLeaseDurationSeconds, int32(40)},
		{"imageMinimumGCAge", kc.ImageMinimumGCAge.Duration, 2 * time.Minute},
		{"imageMaximumGCAge", kc.ImageMaximumGCAge.Duration, time.Duration(0)},
		{"imageGCHighThresholdPercent", *kc.ImageGCHighThresholdPercent, int32(85)},
		{"imageGCLowThresholdPercent", *kc.ImageGCLowThresholdPercent, int32(80)},
		{"volumeStatsAggPeriod", kc.VolumeStatsAggPeriod.Duration, time.Minute},
		{"cgroupsPerQOS", *kc.CgroupsPerQOS, true},
		{"cgroupDriver", kc.CgroupDriver, "cgroupfs"},
		{"cgroupRoot", kc.CgroupRoot, "/"},
		{"cpuManagerPolicy", kc.CPUManagerPolicy, "none"},
		{"cpuManagerReconcilePeriod", kc.CPUManagerReconcilePeriod.Duration, 10 * time.Second},
		{"memoryManagerPolicy", kc.MemoryManagerPolicy, "None"},
		{"topologyManagerPolicy", kc.TopologyManagerPolicy, "none"},
		{"topologyManagerScope", kc.TopologyManagerScope, "container"},
		{"runtimeRequestTimeout", kc.RuntimeRequestTimeout.Duration, 2 * time.Minute},
		{"hairpinMode", kc.HairpinMode, "promiscuous-bridge"},
		{"maxPods", kc.MaxPods, int32(110)},
		{"podPidsLimit", *kc.PodPidsLimit, int64(-1)},
		{"resolvConf", *kc.ResolverConfig, "/etc/resolv.conf"},
		{"cpuCFSQuota", *kc.CPUCFSQuota, true},
		{"cpuCFSQuotaPeriod", kc.CPUCFSQuotaPeriod.Duration, 100 * time.Millisecond},
		{"nodeStatusMaxImages", *kc.NodeStatusMaxImages, int32(50)},
		{"maxOpenFiles", kc.MaxOpenFiles, int64(1000000)},
		{"contentType", kc.ContentType, "application/vnd.kubernetes.protobuf"},
		{"kubeAPIQPS", *kc.KubeAPIQPS, int32(50)},
		{"kubeAPIBurst", kc.KubeAPIBurst, int32(100)},
		{"serializeImagePulls", *kc.SerializeImagePulls, true},
		{"evictionHard", kc.EvictionHard, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%"}},
		{"evictionSoft", kc.EvictionSoft, map[string]string(nil)},
		{"evictionPressureTransitionPeriod", kc.EvictionPressureTransitionPeriod.Duration, 5 * time.Minute},
		{"mergeDefaultEvictionSettings", *kc.MergeDefaultEvictionSettings, false},
		{"enableControllerAttachDetach", *kc.EnableControllerAttachDetach, true},
		{"makeIPTablesUtilChains", *kc.MakeIPTablesUtilChains, true},
		{"iptablesMasqueradeBit", *kc.IPTablesMasqueradeBit, int32(14)},
		{"iptablesDropBit", *kc.IPTablesDropBit, int32(15)},
		{"failSwapOn", *kc.FailSwapOn, true},
		{"containerLogMaxSize", kc.ContainerLogMaxSize, "10Mi"},
		{"containerLogMaxFiles", *kc.ContainerLogMaxFiles, int32(5)},
		{"containerLogMaxWorkers", *kc.ContainerLogMaxWorkers, int32(1)},
		{"containerLogMonitorInterval", kc.ContainerLogMonitorInterval.Duration, 10 * time.Second},
		{"configMapAndSecretChangeDetectionStrategy", kc.ConfigMapAndSecretChangeDetectionStrategy, kubeletv1beta1.WatchChangeDetectionStrategy},
		{"enforceNodeAllocatable", kc.EnforceNodeAllocatable, []string{"pods"}},
		{"volumePluginDir", kc.VolumePluginDir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"},
		{"logging.format", kc.Logging.Format, "text"},
		{"logging.flushFrequency", kc.Logging.FlushFrequency.Duration.Duration, 5 * time.Second},
		{"enableSystemLogHandler", *kc.EnableSystemLogHandler, true},
		{"enableProfilingHandler", *kc.EnableProfilingHandler, true},
		{"enableDebugFlagsHandler", *kc.EnableDebugFlagsHandler, true},
		{"seccompDefault", *kc.SeccompDefault, false},
		{"failCgroupV1", *kc.FailCgroupV1, true},
		{"memoryThrottlingFactor", *kc.MemoryThrottlingFactor, 0.9},
		{"memoryReservationPolicy", kc.MemoryReservationPolicy, kubeletv1beta1.NoneMemoryReservationPolicy},
		{"registerNode", *kc.RegisterNode, true},
		{"localStorageCapacityIsolation", *kc.LocalStorageCapacityIsolation, true},
		{"containerRuntimeEndpoint", kc.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
		{"imageServiceEndpoint", kc.ImageServiceEndpoint, ""},
		{"podLogsDir", kc.PodLogsDir, "/var/log/pods"},
		{"staticPodPath", kc.StaticPodPath, ""},
		{"crashLoopBackOff.maxContainerRestartPeriod", kc.CrashLoopBackOff.MaxContainerRestartPeriod, (*metav1.Duration)(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.field, tc.got, tc.want)
			}
		})
	}
	if errs := Validate(kc); len(errs) > 0 {
		t.Errorf("the defaults do not validate: %v", errs.ToAggregate())
	}
}

func TestSetDefaultsKeepsSetValues(t *testing.T) {
	tests := []struct {
		name  string
		in    kubeletv1beta1.KubeletConfiguration
		check func(*kubeletv1beta1.KubeletConfiguration) (got, want any)
	}{
		{
			name:  "maxPods",
			in:    kubeletv1beta1.KubeletConfiguration{MaxPods: 7},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.MaxPods, int32(7) },
		},
		{
			name:  "healthzPort zero stays off",
			in:    kubeletv1beta1.KubeletConfiguration{HealthzPort: ptr.To[int32](0)},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return *kc.HealthzPort, int32(0) },
		},
		{
			name: "explicit update frequency is the report frequency",
			in:   kubeletv1beta1.KubeletConfiguration{NodeStatusUpdateFrequency: metav1.Duration{Duration: 20 * time.Second}},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.NodeStatusReportFrequency.Duration, 20 * time.Second
			},
		},
		{
			name:  "parallel pulls turn serial pulls off",
			in:    kubeletv1beta1.KubeletConfiguration{MaxParallelImagePulls: ptr.To[int32](3)},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return *kc.SerializeImagePulls, false },
		},
		{
			name:  "negative pid limit becomes -1",
			in:    kubeletv1beta1.KubeletConfiguration{PodPidsLimit: ptr.To[int64](-5)},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return *kc.PodPidsLimit, int64(-1) },
		},
		{
			name: "partial evictionHard is not merged",
			in:   kubeletv1beta1.KubeletConfiguration{EvictionHard: map[string]string{"memory.available": "1Gi"}},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				return kc.EvictionHard, map[string]string{"memory.available": "1Gi"}
			},
		},
		{
			name: "mergeDefaultEvictionSettings merges",
			in: kubeletv1beta1.KubeletConfiguration{
				EvictionHard:                 map[string]string{"memory.available": "1Gi"},
				MergeDefaultEvictionSettings: ptr.To(true),
			},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) {
				want := DefaultEvictionHard()
				want["memory.available"] = "1Gi"
				return kc.EvictionHard, want
			},
		},
		{
			name:  "empty resolvConf stays empty",
			in:    kubeletv1beta1.KubeletConfiguration{ResolverConfig: ptr.To("")},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return *kc.ResolverConfig, "" },
		},
		{
			name:  "no QoS cgroups keep the runtime's cgroup root",
			in:    kubeletv1beta1.KubeletConfiguration{CgroupsPerQOS: ptr.To(false)},
			check: func(kc *kubeletv1beta1.KubeletConfiguration) (any, any) { return kc.CgroupRoot, "" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kc := tc.in.DeepCopy()
			SetDefaults(kc)
			if got, want := tc.check(kc); !reflect.DeepEqual(got, want) {
				t.Errorf("got %#v, want %#v", got, want)
			}
			again := kc.DeepCopy()
			SetDefaults(again)
			if !reflect.DeepEqual(kc, again) {
				t.Errorf("SetDefaults is not idempotent")
			}
		})
	}
}

func TestNewDefault(t *testing.T) {
	kc := NewDefault()
	file := &kubeletv1beta1.KubeletConfiguration{}
	SetDefaults(file)
	if kc.ReadOnlyPort != 10255 {
		t.Errorf("readOnlyPort = %d, want 10255 without a config file", kc.ReadOnlyPort)
	}
	if !*kc.Authentication.Anonymous.Enabled || *kc.Authentication.Webhook.Enabled {
		t.Errorf("authentication = %+v, want anonymous on and webhook off without a config file", kc.Authentication)
	}
	if kc.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow {
		t.Errorf("authorization.mode = %q, want AlwaysAllow", kc.Authorization.Mode)
	}
	if kc.APIVersion != APIVersion || kc.Kind != Kind {
		t.Errorf("type = %s/%s", kc.APIVersion, kc.Kind)
	}
	// Everything else matches the file defaults.
	kc.ReadOnlyPort = file.ReadOnlyPort
	kc.Authentication = file.Authentication
	kc.Authorization = file.Authorization
	kc.TypeMeta = file.TypeMeta
	if !reflect.DeepEqual(kc, file) {
		t.Errorf("NewDefault differs from the file defaults beyond the legacy flag defaults")
	}
	if !maps.Equal(NewDefault().EvictionHard, DefaultEvictionHard()) {
		t.Errorf("evictionHard = %v", NewDefault().EvictionHard)
	}
}
