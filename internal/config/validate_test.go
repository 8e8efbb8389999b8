package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestValidate(t *testing.T) {
	type kc = kubeletv1beta1.KubeletConfiguration
	tests := []struct {
		name   string
		mutate func(*kc)
		want   []string // field paths with errors; nil means valid
	}{
		{"defaults", func(*kc) {}, nil},
		{"maxPods 0", func(c *kc) { c.MaxPods = 0 }, []string{"maxPods"}},
		{"maxPods 1", func(c *kc) { c.MaxPods = 1 }, nil},
		{"idsPerPod 131072", func(c *kc) { c.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](131072)} }, nil},
		{"idsPerPod not whole blocks", func(c *kc) { c.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](1000)} }, []string{"userNamespaces.idsPerPod"}},
		{"idsPerPod the whole ID space", func(c *kc) { c.UserNamespaces = &kubeletv1beta1.UserNamespaces{IDsPerPod: ptr.To[int64](1 << 32)} }, []string{"userNamespaces.idsPerPod"}},
		{"port 0", func(c *kc) { c.Port = 0 }, []string{"port"}},
		{"port too big", func(c *kc) { c.Port = 65536 }, []string{"port"}},
		{"readOnlyPort off", func(c *kc) { c.ReadOnlyPort = 0 }, nil},
		{"readOnlyPort negative", func(c *kc) { c.ReadOnlyPort = -1 }, []string{"readOnlyPort"}},
		{"readOnlyPort too big", func(c *kc) { c.ReadOnlyPort = 70000 }, []string{"readOnlyPort"}},
		{"healthzPort off", func(c *kc) { c.HealthzPort = ptr.To[int32](0) }, nil},
		{"healthzPort too big", func(c *kc) { c.HealthzPort = ptr.To[int32](65536) }, []string{"healthzPort"}},
		{"healthzBindAddress not an IP", func(c *kc) { c.HealthzBindAddress = "localhost" }, []string{"healthzBindAddress"}},
		{"healthzBindAddress IPv6", func(c *kc) { c.HealthzBindAddress = "::1" }, nil},
		{"address not an IP", func(c *kc) { c.Address = "any" }, []string{"address"}},
		{"clusterDNS not an IP", func(c *kc) { c.ClusterDNS = []string{"10.0.0.10", "dns"} }, []string{"clusterDNS[1]"}},
		{"syncFrequency negative", func(c *kc) { c.SyncFrequency.Duration = -time.Second }, []string{"syncFrequency"}},
		{"fileCheckFrequency zero", func(c *kc) { c.FileCheckFrequency.Duration = 0 }, []string{"fileCheckFrequency"}},
		{"runtimeRequestTimeout zero", func(c *kc) { c.RuntimeRequestTimeout.Duration = 0 }, []string{"runtimeRequestTimeout"}},
		{"nodeStatusUpdateFrequency zero", func(c *kc) { c.NodeStatusUpdateFrequency.Duration = 0 }, []string{"nodeStatusUpdateFrequency"}},
		{"streaming timeout zero", func(c *kc) { c.StreamingConnectionIdleTimeout.Duration = 0 }, nil},
		{"imageMinimumGCAge negative", func(c *kc) { c.ImageMinimumGCAge.Duration = -time.Second }, []string{"imageMinimumGCAge"}},
		{"imageMaximumGCAge below minimum", func(c *kc) { c.ImageMaximumGCAge.Duration = time.Minute }, []string{"imageMaximumGCAge"}},
		{"nodeLeaseDurationSeconds zero", func(c *kc) { c.NodeLeaseDurationSeconds = 0 }, []string{"nodeLeaseDurationSeconds"}},
		{"containerLogMonitorInterval short", func(c *kc) { c.ContainerLogMonitorInterval = &metav1.Duration{Duration: time.Second} }, []string{"containerLogMonitorInterval"}},
		{"crashLoopBackOff too long", func(c *kc) {
			c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: 10 * time.Minute}
		}, []string{"crashLoopBackOff.maxContainerRestartPeriod"}},
		{"image GC thresholds", func(c *kc) { c.ImageGCHighThresholdPercent = ptr.To[int32](101) }, []string{"imageGCHighThresholdPercent"}},
		{"image GC low not below high", func(c *kc) { c.ImageGCLowThresholdPercent = ptr.To[int32](85) }, []string{"imageGCLowThresholdPercent"}},
		{"negative QPS", func(c *kc) { c.KubeAPIQPS = ptr.To[int32](-1); c.EventBurst = -1 }, []string{"kubeAPIQPS", "eventBurst"}},
		{"maxParallelImagePulls with serial pulls", func(c *kc) { c.MaxParallelImagePulls = ptr.To[int32](3) }, []string{"maxParallelImagePulls"}},
		{"maxParallelImagePulls zero", func(c *kc) { c.MaxParallelImagePulls = ptr.To[int32](0) }, []string{"maxParallelImagePulls"}},
		{"maxParallelImagePulls with parallel pulls", func(c *kc) {
			c.SerializeImagePulls = ptr.To(false)
			c.MaxParallelImagePulls = ptr.To[int32](3)
		}, nil},
		{"nodeStatusMaxImages -1", func(c *kc) { c.NodeStatusMaxImages = ptr.To[int32](-1) }, nil},
		{"nodeStatusMaxImages 0", func(c *kc) { c.NodeStatusMaxImages = ptr.To[int32](0) }, nil},
		{"nodeStatusMaxImages -2", func(c *kc) { c.NodeStatusMaxImages = ptr.To[int32](-2) }, []string{"nodeStatusMaxImages"}},
		{"oomScoreAdj", func(c *kc) { c.OOMScoreAdj = ptr.To[int32](-1001) }, []string{"oomScoreAdj"}},
		{"podPidsLimit -1", func(c *kc) { c.PodPidsLimit = ptr.To[int64](-1) }, nil},
		{"podPidsLimit -2", func(c *kc) { c.PodPidsLimit = ptr.To[int64](-2) }, []string{"podPidsLimit"}},
		{"runOnce", func(c *kc) { c.RunOnce = true }, []string{"runOnce"}},
		{"cgroupDriver systemd", func(c *kc) { c.CgroupDriver = "systemd" }, nil},
		{"cgroupDriver systemd under another cgroupRoot", func(c *kc) { c.CgroupDriver = "systemd"; c.CgroupRoot = "/kube.slice" }, []string{"cgroupRoot"}},
		{"cgroupDriver unknown", func(c *kc) { c.CgroupDriver = "cgroupfs2" }, []string{"cgroupDriver"}},
		{"cgroupRoot relative", func(c *kc) { c.CgroupRoot = "kubepods" }, []string{"cgroupRoot"}},
		{"systemCgroups without cgroupRoot", func(c *kc) { c.SystemCgroups = "/system"; c.CgroupRoot = "" }, []string{"cgroupRoot"}},
		{"enforceNodeAllocatable unknown", func(c *kc) { c.EnforceNodeAllocatable = []string{"pods", "all"} }, []string{"enforceNodeAllocatable[1]"}},
		{"enforceNodeAllocatable needs cgroup", func(c *kc) { c.EnforceNodeAllocatable = []string{"kube-reserved"} }, []string{"kubeReservedCgroup"}},
		{"enforceNodeAllocatable needs QoS cgroups", func(c *kc) { c.CgroupsPerQOS = ptr.To(false) }, []string{"enforceNodeAllocatable[0]"}},
		{"enforceNodeAllocatable none alone", func(c *kc) { c.EnforceNodeAllocatable = []string{"none", "pods"} }, []string{"enforceNodeAllocatable[0]"}},
		{"enforceNodeAllocatable reserved twice", func(c *kc) {
			c.EnforceNodeAllocatable = []string{"system-reserved", "system-reserved-compressible"}
			c.SystemReservedCgroup = "/system.slice"
		}, []string{"enforceNodeAllocatable"}},
		{"cpuCFSQuotaPeriod too short", func(c *kc) { c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 500 * time.Microsecond} }, []string{"cpuCFSQuotaPeriod"}},
		{"cpuCFSQuotaPeriod too long", func(c *kc) { c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 2 * time.Second} }, []string{"cpuCFSQuotaPeriod"}},
		{"evictionHard every signal but containerfs", func(c *kc) {
			c.EvictionHard = map[string]string{}
			for _, s := range EvictionSignals {
				if !strings.HasPrefix(s, "containerfs.") {
					c.EvictionHard[s] = "5%"
				}
			}
		}, nil},
		{"containerfs thresholds refused", func(c *kc) {
			c.EvictionHard["containerfs.available"] = "10%"
			c.EvictionSoft = map[string]string{"containerfs.inodesFree": "10%"}
			c.EvictionSoftGracePeriod = map[string]string{"containerfs.inodesFree": "1m"}
		}, []string{"evictionHard[containerfs.available]", "evictionSoft[containerfs.inodesFree]", "evictionSoftGracePeriod[containerfs.inodesFree]"}},
		{"evictionHard unknown signal", func(c *kc) { c.EvictionHard["memory.free"] = "1Gi" }, []string{"evictionHard[memory.free]"}},
		{"evictionHard not a quantity", func(c *kc) { c.EvictionHard["memory.available"] = "lots" }, []string{"evictionHard[memory.available]"}},
		{"evictionHard zero quantity", func(c *kc) { c.EvictionHard["memory.available"] = "0" }, []string{"evictionHard[memory.available]"}},
		{"evictionHard 0% disables", func(c *kc) { c.EvictionHard["memory.available"] = "0%" }, nil},
		{"evictionHard 100%", func(c *kc) { c.EvictionHard["nodefs.available"] = "100%" }, nil},
		{"evictionHard over 100%", func(c *kc) { c.EvictionHard["nodefs.available"] = "101%" }, []string{"evictionHard[nodefs.available]"}},
		{"evictionHard negative percent", func(c *kc) { c.EvictionHard["nodefs.available"] = "-1%" }, []string{"evictionHard[nodefs.available]"}},
		{"evictionHard bad percent", func(c *kc) { c.EvictionHard["nodefs.available"] = "x%" }, []string{"evictionHard[nodefs.available]"}},
		{"evictionSoft with grace period", func(c *kc) {
			c.EvictionSoft = map[string]string{"memory.available": "300Mi"}
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
		}, nil},
		{"evictionSoft without grace period", func(c *kc) {
			c.EvictionSoft = map[string]string{"memory.available": "300Mi", "pid.available": "10%"}
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
		}, []string{"evictionSoft[pid.available]"}},
		{"evictionSoftGracePeriod bad", func(c *kc) {
			c.EvictionSoftGracePeriod = map[string]string{"memory.available": "soon", "nodefs.available": "-1s", "ram": "1s"}
		}, []string{"evictionSoftGracePeriod[memory.available]", "evictionSoftGracePeriod[nodefs.available]", "evictionSoftGracePeriod[ram]"}},
		{"evictionMinimumReclaim", func(c *kc) {
			c.EvictionMinimumReclaim = map[string]string{"imagefs.available": "2Gi", "nodefs.available": "0", "memory.available": "0%", "pid.available": "-1"}
		}, []string{"evictionMinimumReclaim[memory.available]", "evictionMinimumReclaim[pid.available]"}},
		{"staticPodPath relative", func(c *kc) { c.StaticPodPath = "manifests" }, []string{"staticPodPath"}},
		{"staticPodPath absolute", func(c *kc) { c.StaticPodPath = "/etc/kubernetes/manifests" }, nil},
		{"podLogsDir empty", func(c *kc) { c.PodLogsDir = "" }, []string{"podLogsDir"}},
		{"podLogsDir relative", func(c *kc) { c.PodLogsDir = "logs" }, []string{"podLogsDir"}},
		{"podLogsDir unclean", func(c *kc) { c.PodLogsDir = "/var/log/../log/pods/" }, []string{"podLogsDir"}},
		{"podLogsDir non-ASCII", func(c *kc) { c.PodLogsDir = "/var/log/pöds" }, []string{"podLogsDir"}},
		{"resolvConf empty", func(c *kc) { c.ResolverConfig = ptr.To("") }, nil},
		{"resolvConf relative", func(c *kc) { c.ResolverConfig = ptr.To("resolv.conf") }, []string{"resolvConf"}},
		{"runtime endpoint bare path", func(c *kc) { c.ContainerRuntimeEndpoint = "/run/containerd/containerd.sock" }, nil},
		{"runtime endpoint empty", func(c *kc) { c.ContainerRuntimeEndpoint = "" }, []string{"containerRuntimeEndpoint"}},
		{"runtime endpoint tcp", func(c *kc) { c.ContainerRuntimeEndpoint = "tcp://127.0.0.1:1234" }, []string{"containerRuntimeEndpoint"}},
		{"runtime endpoint relative", func(c *kc) { c.ContainerRuntimeEndpoint = "unix://run/containerd.sock" }, []string{"containerRuntimeEndpoint"}},
		{"image endpoint", func(c *kc) { c.ImageServiceEndpoint = "containerd.sock" }, []string{"imageServiceEndpoint"}},
		{"hairpinMode", func(c *kc) { c.HairpinMode = "on" }, []string{"hairpinMode"}},
		{"configMapAndSecretChangeDetectionStrategy", func(c *kc) { c.ConfigMapAndSecretChangeDetectionStrategy = "Poll" }, []string{"configMapAndSecretChangeDetectionStrategy"}},
		{"containerLogMaxFiles", func(c *kc) { c.ContainerLogMaxFiles = ptr.To[int32](1) }, []string{"containerLogMaxFiles"}},
		{"containerLogMaxWorkers", func(c *kc) { c.ContainerLogMaxWorkers = ptr.To[int32](0) }, []string{"containerLogMaxWorkers"}},
		{"containerLogMaxSize", func(c *kc) { c.ContainerLogMaxSize = "big" }, []string{"containerLogMaxSize"}},
		{"logging format", func(c *kc) { c.Logging.Format = "xml" }, []string{"logging.format"}},
		{"memoryThrottlingFactor", func(c *kc) { c.MemoryThrottlingFactor = ptr.To(1.5) }, []string{"memoryThrottlingFactor"}},
		{"taints", func(c *kc) {
			c.RegisterWithTaints = []v1.Taint{
				{Key: "example.com/ok", Value: "v", Effect: v1.TaintEffectNoSchedule},
				{Key: "bad key", Effect: "Sometimes"},
			}
		}, []string{"registerWithTaints[1].key", "registerWithTaints[1].effect"}},
		{"reserved", func(c *kc) {
			c.SystemReserved = map[string]string{"memory": "1Gi", "gpu": "1"}
			c.KubeReserved = map[string]string{"cpu": "-1"}
		},
			[]string{"systemReserved[gpu]", "kubeReserved[cpu]"}},
		{"nil pointers are unset, not errors", func(c *kc) {
			*c = kubeletv1beta1.KubeletConfiguration{}
			SetDefaults(c)
			c.HealthzPort = nil
			c.OOMScoreAdj = nil
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &kubeletv1beta1.KubeletConfiguration{}
			SetDefaults(c)
			tc.mutate(c)
			errs := Validate(c)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("error paths = %q, want %q\nerrors: %v", got, tc.want, errs.ToAggregate())
			}
		})
	}
}

func TestValidateNodeIPs(t *testing.T) {
	tests := []struct {
		value   string
		want    []string
		wantErr []string
	}{
		{"", nil, nil},
		{"10.0.0.1", []string{"10.0.0.1"}, nil},
		{"10.0.0.1, fd00::1", []string{"10.0.0.1", "fd00::1"}, nil},
		{"fd00::1,10.0.0.1", []string{"fd00::1", "10.0.0.1"}, nil},
		{"::", []string{"::"}, nil},
		{"10.0.0.1,10.0.0.2", nil, []string{"nodeIP"}},
		{"10.0.0.1,fd00::1,10.0.0.2", nil, []string{"nodeIP"}},
		{"0.0.0.0,fd00::1", nil, []string{"nodeIP"}},
		{"10.0.0.1,node", nil, []string{"nodeIP[1]"}},
		{"300.1.1.1", nil, []string{"nodeIP[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			ips, errs := validateNodeIPs(field.NewPath("nodeIP"), tc.value)
			var gotErr []string
			for _, e := range errs {
				gotErr = append(gotErr, e.Field)
			}
			if !slices.Equal(ips, tc.want) || !slices.Equal(gotErr, tc.wantErr) {
				t.Errorf("validateNodeIPs(%q) = %q, %q; want %q, %q", tc.value, ips, gotErr, tc.want, tc.wantErr)
			}
		})
	}
}
