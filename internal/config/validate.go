package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/heartlet/heartlet/internal/cgroups"
	"github.com/heartlet/heartlet/internal/sysctl"
)

// EvictionSignals are the signal names evictionHard, evictionSoft,
// evictionSoftGracePeriod and evictionMinimumReclaim accept.
var EvictionSignals = []string{
	"allocatableMemory.available",
	"containerfs.available",
	"containerfs.inodesFree",
	"imagefs.available",
	"imagefs.inodesFree",
	"memory.available",
	"nodefs.available",
	"nodefs.inodesFree",
	"pid.available",
}

// Validate checks a defaulted KubeletConfiguration and returns every problem
// by field path. Unset optional (nil) fields are not errors.
func Validate(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	root := func(name string) *field.Path { return field.NewPath(name) }

	if kc.MaxPods < 1 {
		errs = append(errs, field.Invalid(root("maxPods"), kc.MaxPods, "must be greater than or equal to 1"))
	}
	if u := kc.UserNamespaces; u != nil && u.IDsPerPod != nil {
		// As upstream: whole 16-bit blocks, below the 32-bit ID space.
		if n := *u.IDsPerPod; n <= 0 || n%(1<<16) != 0 || n >= 1<<32 {
			errs = append(errs, field.Invalid(root("userNamespaces").Child("idsPerPod"), n, "must be a positive multiple of 65536 below 4294967296"))
		}
	}
	errs = append(errs, validatePort(root("port"), kc.Port, false)...)
	errs = append(errs, validatePort(root("readOnlyPort"), kc.ReadOnlyPort, true)...)
	if kc.HealthzPort != nil {
		errs = append(errs, validatePort(root("healthzPort"), *kc.HealthzPort, true)...)
	}
	errs = append(errs, validateIP(root("address"), kc.Address)...)
	errs = append(errs, validateServer(kc)...)
	errs = append(errs, validateIP(root("healthzBindAddress"), kc.HealthzBindAddress)...)
	for i, ip := range kc.ClusterDNS {
		errs = append(errs, validateIP(root("clusterDNS").Index(i), ip)...)
	}

	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"syncFrequency", kc.SyncFrequency.Duration},
		{"fileCheckFrequency", kc.FileCheckFrequency.Duration},
		{"httpCheckFrequency", kc.HTTPCheckFrequency.Duration},
		{"runtimeRequestTimeout", kc.RuntimeRequestTimeout.Duration},
		{"nodeStatusUpdateFrequency", kc.NodeStatusUpdateFrequency.Duration},
		{"nodeStatusReportFrequency", kc.NodeStatusReportFrequency.Duration},
		{"volumeStatsAggPeriod", kc.VolumeStatsAggPeriod.Duration},
	} {
		if d.value <= 0 {
			errs = append(errs, field.Invalid(root(d.name), d.value.String(), "must be greater than 0"))
		}
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"streamingConnectionIdleTimeout", kc.StreamingConnectionIdleTimeout.Duration},
		{"imageMinimumGCAge", kc.ImageMinimumGCAge.Duration},
		{"imageMaximumGCAge", kc.ImageMaximumGCAge.Duration},
		{"evictionPressureTransitionPeriod", kc.EvictionPressureTransitionPeriod.Duration},
		{"shutdownGracePeriod", kc.ShutdownGracePeriod.Duration},
		{"shutdownGracePeriodCriticalPods", kc.ShutdownGracePeriodCriticalPods.Duration},
	} {
		if d.value < 0 {
			errs = append(errs, field.Invalid(root(d.name), d.value.String(), "must not be negative"))
		}
	}
	if kc.ImageMaximumGCAge.Duration > 0 && kc.ImageMaximumGCAge.Duration <= kc.ImageMinimumGCAge.Duration {
		errs = append(errs, field.Invalid(root("imageMaximumGCAge"), kc.ImageMaximumGCAge.Duration.String(), "must be greater than imageMinimumGCAge"))
	}
	if kc.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(root("nodeLeaseDurationSeconds"), kc.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	if kc.ContainerLogMonitorInterval != nil && kc.ContainerLogMonitorInterval.Duration < 3*time.Second {
		errs = append(errs, field.Invalid(root("containerLogMonitorInterval"), kc.ContainerLogMonitorInterval.Duration.String(), "must be at least 3s"))
	}
	if kc.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		if d := kc.CrashLoopBackOff.MaxContainerRestartPeriod.Duration; d < time.Second || d > 300*time.Second {
			errs = append(errs, field.Invalid(root("crashLoopBackOff").Child("maxContainerRestartPeriod"), d.String(), "must be between 1s and 300s"))
		}
	}

	errs = append(errs, validatePercent(root("imageGCHighThresholdPercent"), kc.ImageGCHighThresholdPercent)...)
	errs = append(errs, validatePercent(root("imageGCLowThresholdPercent"), kc.ImageGCLowThresholdPercent)...)
	if high, low := kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent; high != nil && low != nil && *low >= *high {
		errs = append(errs, field.Invalid(root("imageGCLowThresholdPercent"), *low, "must be less than imageGCHighThresholdPercent"))
	}

	for _, q := range []struct {
		name  string
		value *int32
	}{
		{"kubeAPIQPS", kc.KubeAPIQPS},
		{"kubeAPIBurst", &kc.KubeAPIBurst},
		{"registryPullQPS", kc.RegistryPullQPS},
		{"registryBurst", &kc.RegistryBurst},
		{"eventRecordQPS", kc.EventRecordQPS},
		{"eventBurst", &kc.EventBurst},
		{"podsPerCore", &kc.PodsPerCore},
	} {
		if q.value != nil && *q.value < 0 {
			errs = append(errs, field.Invalid(root(q.name), *q.value, "must not be negative"))
		}
	}
	if p := kc.MaxParallelImagePulls; p != nil {
		if *p < 1 {
			errs = append(errs, field.Invalid(root("maxParallelImagePulls"), *p, "must be greater than or equal to 1"))
		} else if *p > 1 && kc.SerializeImagePulls != nil && *kc.SerializeImagePulls {
			errs = append(errs, field.Invalid(root("maxParallelImagePulls"), *p, "must be 1 when serializeImagePulls is true"))
		}
	}
	if kc.NodeStatusMaxImages != nil && *kc.NodeStatusMaxImages < -1 {
		errs = append(errs, field.Invalid(root("nodeStatusMaxImages"), *kc.NodeStatusMaxImages, "must be -1 (no cap) or greater"))
	}
	if kc.OOMScoreAdj != nil && (*kc.OOMScoreAdj < -1000 || *kc.OOMScoreAdj > 1000) {
		errs = append(errs, field.Invalid(root("oomScoreAdj"), *kc.OOMScoreAdj, "must be between -1000 and 1000"))
	}
	if kc.PodPidsLimit != nil && *kc.PodPidsLimit < -1 {
		errs = append(errs, field.Invalid(root("podPidsLimit"), *kc.PodPidsLimit, "must be -1 (no pod limit) or greater"))
	}
	if kc.RunOnce {
		errs = append(errs, field.Forbidden(root("runOnce"), "run-once mode is not supported"))
	}

	errs = append(errs, validateCgroups(kc)...)
	errs = append(errs, validateEviction(kc)...)
	errs = append(errs, validatePaths(kc)...)
	errs = append(errs, validateEndpoint(root("containerRuntimeEndpoint"), kc.ContainerRuntimeEndpoint, true)...)
	errs = append(errs, validateEndpoint(root("imageServiceEndpoint"), kc.ImageServiceEndpoint, false)...)

	if strategies := []string{string(kubeletv1beta1.GetChangeDetectionStrategy), string(kubeletv1beta1.TTLCacheChangeDetectionStrategy), string(kubeletv1beta1.WatchChangeDetectionStrategy)}; !slices.Contains(strategies, string(kc.ConfigMapAndSecretChangeDetectionStrategy)) {
		errs = append(errs, field.NotSupported(root("configMapAndSecretChangeDetectionStrategy"), kc.ConfigMapAndSecretChangeDetectionStrategy, strategies))
	}
	if !slices.Contains([]string{kubeletv1beta1.HairpinNone, kubeletv1beta1.HairpinVeth, kubeletv1beta1.PromiscuousBridge}, kc.HairpinMode) {
		errs = append(errs, field.NotSupported(root("hairpinMode"), kc.HairpinMode, []string{kubeletv1beta1.HairpinNone, kubeletv1beta1.HairpinVeth, kubeletv1beta1.PromiscuousBridge}))
	}
	errs = append(errs, validateContainerLogs(kc)...)
	if kc.Logging.Format != "" && kc.Logging.Format != "text" && kc.Logging.Format != "json" {
		errs = append(errs, field.NotSupported(root("logging").Child("format"), kc.Logging.Format, []string{"text", "json"}))
	}
	if f := kc.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1 || math.IsNaN(*f)) {
		errs = append(errs, field.Invalid(root("memoryThrottlingFactor"), *f, "must be greater than 0 and at most 1"))
	}
	for i, taint := range kc.RegisterWithTaints {
		errs = append(errs, validateTaint(root("registerWithTaints").Index(i), taint)...)
	}
	for _, r := range []struct {
		name string
		list map[string]string
	}{{"systemReserved", kc.SystemReserved}, {"kubeReserved", kc.KubeReserved}} {
		errs = append(errs, validateReserved(root(r.name), r.list)...)
	}
	for i, p := range kc.AllowedUnsafeSysctls {
		if err := sysctl.ValidatePattern(p); err != nil {
			errs = append(errs, field.Invalid(root("allowedUnsafeSysctls").Index(i), p, err.Error()))
		}
	}
	return errs
}

func validatePort(path *field.Path, port int32, zeroDisables bool) field.ErrorList {
	if zeroDisables && port == 0 {
		return nil
	}
	if port < 1 || port > 65535 {
		detail := "must be between 1 and 65535"
		if zeroDisables {
			detail = "must be between 0 (off) and 65535"
		}
		return field.ErrorList{field.Invalid(path, port, detail)}
	}
	return nil
}

func validateIP(path *field.Path, ip string) field.ErrorList {
	if net.ParseIP(ip) == nil {
		return field.ErrorList{field.Invalid(path, ip, "must be an IP address")}
	}
	return nil
}

func validatePercent(path *field.Path, v *int32) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(path, *v, "must be between 0 and 100")}
	}
	return nil
}

func validateCgroups(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if err := cgroups.CheckDriver(kc.CgroupDriver); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("cgroupDriver"), kc.CgroupDriver, err.Error()))
	}
	if kc.CgroupRoot != "" && !strings.HasPrefix(kc.CgroupRoot, "/") {
		errs = append(errs, field.Invalid(field.NewPath("cgroupRoot"), kc.CgroupRoot, "must be an absolute cgroup path"))
	} else if kc.CgroupDriver == cgroups.DriverSystemd {
		if err := cgroups.CheckSystemdRoot(kc.CgroupRoot); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("cgroupRoot"), kc.CgroupRoot, err.Error()))
		}
	}
	if kc.SystemCgroups != "" && kc.CgroupRoot == "" {
		errs = append(errs, field.Required(field.NewPath("cgroupRoot"), "must be set when systemCgroups is set"))
	}
	enforce := field.NewPath("enforceNodeAllocatable")
	known := []string{"pods", "system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible", "none"}
	for i, v := range kc.EnforceNodeAllocatable {
		p := enforce.Index(i)
		switch {
		case !slices.Contains(known, v):
			errs = append(errs, field.NotSupported(p, v, known))
		case slices.Index(kc.EnforceNodeAllocatable, v) != i:
			errs = append(errs, field.Duplicate(p, v))
		case v == "none" && len(kc.EnforceNodeAllocatable) > 1:
			errs = append(errs, field.Invalid(p, v, "must be the only entry"))
		case strings.HasPrefix(v, "system-reserved") && kc.SystemReservedCgroup == "":
			errs = append(errs, field.Required(field.NewPath("systemReservedCgroup"), fmt.Sprintf("must be set when enforceNodeAllocatable contains %q", v)))
		case strings.HasPrefix(v, "kube-reserved") && kc.KubeReservedCgroup == "":
			errs = append(errs, field.Required(field.NewPath("kubeReservedCgroup"), fmt.Sprintf("must be set when enforceNodeAllocatable contains %q", v)))
		case v != "none" && kc.CgroupsPerQOS != nil && !*kc.CgroupsPerQOS:
			errs = append(errs, field.Invalid(p, v, "requires cgroupsPerQOS to be true"))
		}
	}
	for _, k := range []string{"system-reserved", "kube-reserved"} {
		if slices.Contains(kc.EnforceNodeAllocatable, k) && slices.Contains(kc.EnforceNodeAllocatable, k+"-compressible") {
			errs = append(errs, field.Invalid(enforce, kc.EnforceNodeAllocatable, fmt.Sprintf("%q and %q cannot be given together", k, k+"-compressible")))
		}
	}
	// The CustomCPUCFSQuotaPeriod gate is GA and on in the upstream
	// kubelet this release follows: any period between 1ms and 1s is used.
	if p := kc.CPUCFSQuotaPeriod; p != nil && (p.Duration < time.Millisecond || p.Duration > time.Second) {
		errs = append(errs, field.Invalid(field.NewPath("cpuCFSQuotaPeriod"), p.Duration.String(), "must be between 1ms and 1s"))
	}
	return errs
}

func validateEviction(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateThresholds(field.NewPath("evictionHard"), kc.EvictionHard, true)...)
	soft := field.NewPath("evictionSoft")
	errs = append(errs, validateThresholds(soft, kc.EvictionSoft, true)...)
	grace := field.NewPath("evictionSoftGracePeriod")
	for _, k := range sortedKeys(kc.EvictionSoftGracePeriod) {
		p := grace.Key(k)
		if !slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.NotSupported(p, k, EvictionSignals))
			continue
		}
		v := kc.EvictionSoftGracePeriod[k]
		if d, err := time.ParseDuration(v); err != nil {
			errs = append(errs, field.Invalid(p, v, `must be a duration such as "1m30s"`))
		} else if d < 0 {
			errs = append(errs, field.Invalid(p, v, "must not be negative"))
		}
	}
	for _, k := range sortedKeys(kc.EvictionSoft) {
		if _, ok := kc.EvictionSoftGracePeriod[k]; !ok && slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.Invalid(soft.Key(k), kc.EvictionSoft[k], fmt.Sprintf("needs a grace period in %s", grace.Key(k))))
		}
	}
	errs = append(errs, validateThresholds(field.NewPath("evictionMinimumReclaim"), kc.EvictionMinimumReclaim, false)...)
	// heartlet's containers' writable layers are on the image filesystem
	// (or the node's): their thresholds apply, a containerfs.* threshold
	// would not be acted on.
	for _, f := range []struct {
		path *field.Path
		m    map[string]string
	}{{field.NewPath("evictionHard"), kc.EvictionHard}, {soft, kc.EvictionSoft}, {grace, kc.EvictionSoftGracePeriod}, {field.NewPath("evictionMinimumReclaim"), kc.EvictionMinimumReclaim}} {
		for _, k := range sortedKeys(f.m) {
			if strings.HasPrefix(k, "containerfs.") {
				errs = append(errs, field.Invalid(f.path.Key(k), f.m[k], "not supported: the containers' writable layers are on the image filesystem; set imagefs.* (or nodefs.*) instead"))
			}
		}
	}
	return errs
}

// validateThresholds checks signal names and values: a positive quantity,
// or a percentage from 0% to 100% (0% and 100% disable a threshold). A
// minimum reclaim may be a zero quantity but not a zero percentage.
func validateThresholds(path *field.Path, m map[string]string, threshold bool) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(m) {
		p := path.Key(k)
		if !slices.Contains(EvictionSignals, k) {
			errs = append(errs, field.NotSupported(p, k, EvictionSignals))
			continue
		}
		v := m[k]
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			f, err := strconv.ParseFloat(pct, 64)
			switch {
			case err != nil || math.IsNaN(f):
				errs = append(errs, field.Invalid(p, v, "must be a quantity such as \"100Mi\" or a percentage such as \"10%\""))
			case f < 0 || f > 100:
				errs = append(errs, field.Invalid(p, v, "must be a percentage between 0% and 100%"))
			case !threshold && f == 0:
				errs = append(errs, field.Invalid(p, v, "must be greater than 0%"))
			}
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, v, "must be a quantity such as \"100Mi\" or a percentage such as \"10%\""))
		case threshold && q.Sign() <= 0:
			errs = append(errs, field.Invalid(p, v, "must be greater than 0"))
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(p, v, "must not be negative"))
		}
	}
	return errs
}

func validatePaths(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if kc.StaticPodPath != "" && !filepath.IsAbs(kc.StaticPodPath) {
		errs = append(errs, field.Invalid(field.NewPath("staticPodPath"), kc.StaticPodPath, "must be an absolute path"))
	}
	if kc.StaticPodURL != "" {
		if u, err := url.Parse(kc.StaticPodURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(field.NewPath("staticPodURL"), kc.StaticPodURL, "must be an http:// or https:// URL"))
		}
	}
	logs := field.NewPath("podLogsDir")
	switch {
	case kc.PodLogsDir == "":
		errs = append(errs, field.Required(logs, "must be an absolute path"))
	case !filepath.IsAbs(kc.PodLogsDir):
		errs = append(errs, field.Invalid(logs, kc.PodLogsDir, "must be an absolute path"))
	case filepath.Clean(kc.PodLogsDir) != kc.PodLogsDir:
		errs = append(errs, field.Invalid(logs, kc.PodLogsDir, fmt.Sprintf("must be a clean path (%s)", filepath.Clean(kc.PodLogsDir))))
	case strings.IndexFunc(kc.PodLogsDir, func(r rune) bool { return r > unicode.MaxASCII }) >= 0:
		errs = append(errs, field.Invalid(logs, kc.PodLogsDir, "must contain only ASCII characters"))
	}
	if kc.ResolverConfig != nil && *kc.ResolverConfig != "" && !filepath.IsAbs(*kc.ResolverConfig) {
		errs = append(errs, field.Invalid(field.NewPath("resolvConf"), *kc.ResolverConfig, "must be an absolute path or empty"))
	}
	return errs
}

// validateEndpoint accepts unix:///absolute/path or, as the kubelet still
// does, a bare absolute socket path.
func validateEndpoint(path *field.Path, endpoint string, required bool) field.ErrorList {
	if endpoint == "" {
		if required {
			return field.ErrorList{field.Required(path, "must be a unix:// endpoint")}
		}
		return nil
	}
	socket, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok && strings.Contains(endpoint, "://") {
		return field.ErrorList{field.Invalid(path, endpoint, "must use the unix:// scheme")}
	}
	if !filepath.IsAbs(socket) {
		return field.ErrorList{field.Invalid(path, endpoint, "must name an absolute socket path, e.g. unix:///run/containerd/containerd.sock")}
	}
	return nil
}

func validateContainerLogs(kc *kubeletv1beta1.KubeletConfiguration) field.ErrorList {
	var errs field.ErrorList
	if kc.ContainerLogMaxFiles != nil && *kc.ContainerLogMaxFiles <= 1 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxFiles"), *kc.ContainerLogMaxFiles, "must be greater than 1"))
	}
	if kc.ContainerLogMaxWorkers != nil && *kc.ContainerLogMaxWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("containerLogMaxWorkers"), *kc.ContainerLogMaxWorkers, "must be greater than or equal to 1"))
	}
	if kc.ContainerLogMaxSize != "" {
		if q, err := resource.ParseQuantity(kc.ContainerLogMaxSize); err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(field.NewPath("containerLogMaxSize"), kc.ContainerLogMaxSize, "must be a non-negative quantity such as \"10Mi\""))
		}
	}
	return errs
}

func validateTaint(path *field.Path, t v1.Taint) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(t.Key) {
		errs = append(errs, field.Invalid(path.Child("key"), t.Key, msg))
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
	}
	effects := []string{string(v1.TaintEffectNoSchedule), string(v1.TaintEffectPreferNoSchedule), string(v1.TaintEffectNoExecute)}
	if !slices.Contains(effects, string(t.Effect)) {
		errs = append(errs, field.NotSupported(path.Child("effect"), string(t.Effect), effects))
	}
	if t.TimeAdded != nil {
		errs = append(errs, field.Forbidden(path.Child("timeAdded"), "must not be set"))
	}
	return errs
}

func validateReserved(path *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	names := []string{"cpu", "ephemeral-storage", "memory", "pid"}
	for _, k := range sortedKeys(m) {
		p := path.Key(k)
		if !slices.Contains(names, k) {
			errs = append(errs, field.NotSupported(p, k, names))
			continue
		}
		if q, err := resource.ParseQuantity(m[k]); err != nil || q.Sign() < 0 {
			errs = append(errs, field.Invalid(p, m[k], "must be a non-negative quantity"))
		}
	}
	return errs
}

// validateNodeIPs parses --node-ip: one address, or one IPv4 and one IPv6
// address separated by a comma.
func validateNodeIPs(path *field.Path, value string) ([]string, field.ErrorList) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var (
		ips  []string
		errs field.ErrorList
		v4   int
	)
	parts := strings.Split(value, ",")
	for i, s := range parts {
		s = strings.TrimSpace(s)
		ip := net.ParseIP(s)
		if ip == nil {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be an IP address"))
			continue
		}
		if ip.To4() != nil {
			v4++
		}
		ips = append(ips, ip.String())
	}
	if len(errs) > 0 {
		return nil, errs
	}
	switch {
	case len(ips) > 2:
		errs = append(errs, field.TooMany(path, len(ips), 2))
	case len(ips) == 2 && v4 != 1:
		errs = append(errs, field.Invalid(path, value, "two addresses must be one IPv4 and one IPv6 address"))
	case len(ips) == 2 && (net.ParseIP(ips[0]).IsUnspecified() || net.ParseIP(ips[1]).IsUnspecified()):
		errs = append(errs, field.Invalid(path, value, "an unspecified address (0.0.0.0 or ::) must be given alone"))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return ips, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
