package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The rest of the upstream kubelet v1.37's flags (cmd/kubelet/app/options),
// so that a command line written for the kubelet starts heartlet. A flag
// that sets a KubeletConfiguration field sets it here too: validation
// applies, and a field heartlet does not act on is named in the warning
// about ignored fields. Flag-only settings heartlet does not act on are
// named in Options.Warnings (flagOnlyWarnings); --runonce is refused.

// addUpstreamFlags declares the configuration flags heartlet has no
// dedicated handling for. kc must be defaulted.
func addUpstreamFlags(fs *pflag.FlagSet, kc *kubeletv1beta1.KubeletConfiguration, cl *cmdline, cfg func(name, path string)) {
	dur := func(p *metav1.Duration, name, path, usage string) {
		fs.DurationVar(&p.Duration, name, p.Duration, usage+" ("+path+").")
		cfg(name, path)
	}
	str := func(p *string, name, path, usage string) {
		fs.StringVar(p, name, *p, usage+" ("+path+").")
		cfg(name, path)
	}
	boolean := func(p **bool, name, path, usage string) {
		if *p == nil {
			*p = new(bool)
		}
		fs.BoolVar(*p, name, **p, usage+" ("+path+").")
		cfg(name, path)
	}
	i32 := func(p **int32, name, path, usage string) {
		if *p == nil {
			*p = new(int32)
		}
		fs.Int32Var(*p, name, **p, usage+" ("+path+").")
		cfg(name, path)
	}
	mapFlag := func(m *map[string]string, name, path, usage string) {
		fs.Var(cliflag.NewMapStringString(m), name, usage+" ("+path+").")
		cfg(name, path)
	}

	dur(&kc.Authentication.Webhook.CacheTTL, "authentication-token-webhook-cache-ttl", "authentication.webhook.cacheTTL", "How long TokenReview results are cached")
	dur(&kc.Authorization.Webhook.CacheAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", "authorization.webhook.cacheAuthorizedTTL", "How long allowed SubjectAccessReview results are cached")
	dur(&kc.Authorization.Webhook.CacheUnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", "authorization.webhook.cacheUnauthorizedTTL", "How long denied SubjectAccessReview results are cached")
	fs.BoolVar(&kc.EnableContentionProfiling, "contention-profiling", kc.EnableContentionProfiling, "Enable block profiling with the debugging handlers (enableContentionProfiling).")
	cfg("contention-profiling", "enableContentionProfiling")
	boolean(&kc.CPUCFSQuota, "cpu-cfs-quota", "cpuCFSQuota", "Enforce CPU limits with CFS quota")
	if kc.CPUCFSQuotaPeriod == nil {
		kc.CPUCFSQuotaPeriod = &metav1.Duration{}
	}
	dur(kc.CPUCFSQuotaPeriod, "cpu-cfs-quota-period", "cpuCFSQuotaPeriod", "CFS quota period of CPU limits")
	str(&kc.CPUManagerPolicy, "cpu-manager-policy", "cpuManagerPolicy", "CPU manager policy: none or static")
	mapFlag(&kc.CPUManagerPolicyOptions, "cpu-manager-policy-options", "cpuManagerPolicyOptions", "Options of the CPU manager policy, key=value")
	dur(&kc.CPUManagerReconcilePeriod, "cpu-manager-reconcile-period", "cpuManagerReconcilePeriod", "CPU manager reconciliation period")
	boolean(&kc.EnableControllerAttachDetach, "enable-controller-attach-detach", "enableControllerAttachDetach", "Let the attach/detach controller manage volume attachment")
	boolean(&kc.EnableDebuggingHandlers, "enable-debugging-handlers", "enableDebuggingHandlers", "Serve logs, exec, attach, port-forward and the debug endpoints")
	boolean(&kc.EnableServer, "enable-server", "enableServer", "Serve the authenticated HTTPS API")
	fs.StringSliceVar(&kc.EnforceNodeAllocatable, "enforce-node-allocatable", kc.EnforceNodeAllocatable, "Levels of node allocatable to enforce: none, pods, system-reserved, kube-reserved, ... (enforceNodeAllocatable).")
	cfg("enforce-node-allocatable", "enforceNodeAllocatable")
	fs.Int32Var(&kc.EventBurst, "event-burst", kc.EventBurst, "Burst of event records (eventBurst).")
	cfg("event-burst", "eventBurst")
	i32(&kc.EventRecordQPS, "event-qps", "eventRecordQPS", "Events per second that may be recorded; 0 means unlimited")
	boolean(&kc.FailCgroupV1, "fail-cgroupv1", "failCgroupV1", "Refuse to start on a cgroup v1 host")
	str(&kc.HairpinMode, "hairpin-mode", "hairpinMode", "How hairpin traffic is set up: promiscuous-bridge, hairpin-veth or none")
	fs.BoolVar(&kc.KernelMemcgNotification, "kernel-memcg-notification", kc.KernelMemcgNotification, "Learn of memory thresholds from the kernel's memcg notifications (kernelMemcgNotification).")
	cfg("kernel-memcg-notification", "kernelMemcgNotification")
	fs.Int32Var(&kc.KubeAPIBurst, "kube-api-burst", kc.KubeAPIBurst, "Burst of requests to the API server (kubeAPIBurst).")
	cfg("kube-api-burst", "kubeAPIBurst")
	str(&kc.ContentType, "kube-api-content-type", "contentType", "Content type of requests to the API server")
	i32(&kc.KubeAPIQPS, "kube-api-qps", "kubeAPIQPS", "Requests per second to the API server")
	mapFlag(&kc.KubeReserved, "kube-reserved", "kubeReserved", "Resources reserved for Kubernetes system components, e.g. cpu=200m,memory=500Mi")
	str(&kc.KubeReservedCgroup, "kube-reserved-cgroup", "kubeReservedCgroup", "Cgroup of the Kubernetes system components")
	str(&kc.KubeletCgroups, "kubelet-cgroups", "kubeletCgroups", "Cgroup to run the node agent in")
	boolean(&kc.LocalStorageCapacityIsolation, "local-storage-capacity-isolation", "localStorageCapacityIsolation", "Isolate local ephemeral storage")
	boolean(&kc.MakeIPTablesUtilChains, "make-iptables-util-chains", "makeIPTablesUtilChains", "Make the iptables utility chains")
	fs.Int64Var(&kc.MaxOpenFiles, "max-open-files", kc.MaxOpenFiles, "Most files the node agent may open (maxOpenFiles).")
	cfg("max-open-files", "maxOpenFiles")
	str(&kc.MemoryManagerPolicy, "memory-manager-policy", "memoryManagerPolicy", "Memory manager policy: None or Static")
	i32(&kc.NodeStatusMaxImages, "node-status-max-images", "nodeStatusMaxImages", "Most images reported in Node.status.images; -1 means all")
	i32(&kc.OOMScoreAdj, "oom-score-adj", "oomScoreAdj", "oom_score_adj of the node agent's process")
	str(&kc.PodCIDR, "pod-cidr", "podCIDR", "CIDR of pod IPs in standalone mode")
	fs.Int32Var(&kc.PodsPerCore, "pods-per-core", kc.PodsPerCore, "Most pods per CPU core; 0 means no such limit (podsPerCore).")
	cfg("pods-per-core", "podsPerCore")
	fs.BoolVar(&kc.ProtectKernelDefaults, "protect-kernel-defaults", kc.ProtectKernelDefaults, "Fail when kernel tunables differ from the node agent's defaults (protectKernelDefaults).")
	cfg("protect-kernel-defaults", "protectKernelDefaults")
	mapFlag(&kc.QOSReserved, "qos-reserved", "qosReserved", "Share of memory requests reserved per QoS class, e.g. memory=50%")
	fs.Int32Var(&kc.RegistryBurst, "registry-burst", kc.RegistryBurst, "Burst of image pulls (registryBurst).")
	cfg("registry-burst", "registryBurst")
	i32(&kc.RegistryPullQPS, "registry-qps", "registryPullQPS", "Image pulls per second; 0 means unlimited")
	str(&kc.ReservedSystemCPUs, "reserved-cpus", "reservedSystemCPUs", "CPUs reserved for the system, a cpuset list")
	fs.Var(reservedMemoryFlag{&kc.ReservedMemory}, "reserved-memory", "Memory reserved per NUMA node, e.g. '0:memory=1Gi,hugepages-1M=2Gi;1:memory=2Gi' (reservedMemory).")
	cfg("reserved-memory", "reservedMemory")
	fs.BoolVar(&kc.RotateCertificates, "rotate-certificates", kc.RotateCertificates, "Rotate the client certificate with CertificateSigningRequests (rotateCertificates).")
	cfg("rotate-certificates", "rotateCertificates")
	fs.BoolVar(&kc.ServerTLSBootstrap, "rotate-server-certificates", kc.ServerTLSBootstrap, "Get the serving certificate with CertificateSigningRequests (serverTLSBootstrap).")
	cfg("rotate-server-certificates", "serverTLSBootstrap")
	boolean(&kc.SeccompDefault, "seccomp-default", "seccompDefault", "RuntimeDefault seccomp profile for containers without one")
	dur(&kc.StreamingConnectionIdleTimeout, "streaming-connection-idle-timeout", "streamingConnectionIdleTimeout", "Idle time after which a streaming connection is closed")
	str(&kc.SystemCgroups, "system-cgroups", "systemCgroups", "Cgroup of the system processes not in a cgroup")
	mapFlag(&kc.SystemReserved, "system-reserved", "systemReserved", "Resources reserved for the system, e.g. cpu=200m,memory=500Mi")
	str(&kc.SystemReservedCgroup, "system-reserved-cgroup", "systemReservedCgroup", "Cgroup of the system daemons")
	str(&kc.TopologyManagerPolicy, "topology-manager-policy", "topologyManagerPolicy", "Topology manager policy")
	mapFlag(&kc.TopologyManagerPolicyOptions, "topology-manager-policy-options", "topologyManagerPolicyOptions", "Options of the topology manager policy, key=value")
	str(&kc.TopologyManagerScope, "topology-manager-scope", "topologyManagerScope", "Topology manager scope: container or pod")
	str(&kc.VolumePluginDir, "volume-plugin-dir", "volumePluginDir", "Directory of FlexVolume plugins")
	dur(&kc.VolumeStatsAggPeriod, "volume-stats-agg-period", "volumeStatsAggPeriod", "How often volume disk usage is computed")

	// The logging flags heartlet does not declare itself, as upstream
	// declares them (component-base logs).
	logging := pflag.NewFlagSet("logging", pflag.ContinueOnError)
	logsapi.AddFlags(&kc.Logging, logging)
	logPaths := map[string]string{
		"log-flush-frequency":       "logging.flushFrequency",
		"log-json-split-stream":     "logging.options.json.splitStream",
		"log-json-info-buffer-size": "logging.options.json.infoBufferSize",
		"log-text-split-stream":     "logging.options.text.splitStream",
		"log-text-info-buffer-size": "logging.options.text.infoBufferSize",
	}
	logging.VisitAll(func(f *pflag.Flag) {
		if path, ok := logPaths[f.Name]; ok && fs.Lookup(f.Name) == nil {
			fs.AddFlag(f)
			cfg(f.Name, path)
		}
	})
	// The JSON ones exist upstream because its binary links the JSON
	// format; declare them the same way when this binary's registry lacks
	// them.
	if fs.Lookup("log-json-split-stream") == nil {
		fs.BoolVar(&kc.Logging.Options.JSON.SplitStream, "log-json-split-stream", kc.Logging.Options.JSON.SplitStream, "[Alpha] In JSON format, write error messages to stderr and info messages to stdout (logging.options.json.splitStream).")
		cfg("log-json-split-stream", logPaths["log-json-split-stream"])
	}
	if fs.Lookup("log-json-info-buffer-size") == nil {
		fs.Var(&kc.Logging.Options.JSON.InfoBufferSize, "log-json-info-buffer-size", "[Alpha] In JSON format with split streams, buffer info messages up to this size (logging.options.json.infoBufferSize).")
		cfg("log-json-info-buffer-size", logPaths["log-json-info-buffer-size"])
	}

	// Flag-only settings of the upstream kubelet.
	fs.StringVar(&cl.cloudProvider, "cloud-provider", "", "'' or 'external'; heartlet does not act on it.")
	fs.BoolVar(&cl.runOnce, "runonce", false, "Run the static pods once and exit; not supported by heartlet.")
	fs.StringVar(&cl.runtimeCgroups, "runtime-cgroups", "", "Cgroup to create and run the container runtime in; heartlet does not act on it.")
	for _, d := range deprecatedFlags {
		switch d.kind {
		case "duration":
			fs.Duration(d.name, 0, d.usage)
		case "int32":
			fs.Int32(d.name, 0, d.usage)
		case "string":
			fs.String(d.name, "", d.usage)
		case "bool":
			fs.Bool(d.name, false, d.usage)
		}
	}
}

// deprecatedFlags are upstream's deprecated flag-only settings; heartlet
// accepts them and names them in a warning with upstream's advice.
var deprecatedFlags = []struct {
	name, kind, usage, advice string
}{
	{"minimum-container-ttl-duration", "duration", "Deprecated: least age of a finished container before it is garbage collected.", "Use --eviction-hard or --eviction-soft instead"},
	{"maximum-dead-containers-per-container", "int32", "Deprecated: old instances kept per container.", "Use --eviction-hard or --eviction-soft instead"},
	{"maximum-dead-containers", "int32", "Deprecated: old container instances kept in all.", "Use --eviction-hard or --eviction-soft instead"},
	{"experimental-mounter-path", "string", "Deprecated: path of the mount binary.", "Use CSI instead"},
	{"experimental-allocatable-ignore-eviction", "bool", "Deprecated: ignore hard eviction thresholds in node allocatable.", "It is going away upstream"},
}

// flagOnlyWarnings names the flag-only settings the command line gave that
// heartlet does not act on, and refuses those it cannot honour.
func flagOnlyWarnings(fs *pflag.FlagSet, cl *cmdline) ([]string, Errors) {
	var warnings []string
	var problems Errors
	switch cl.cloudProvider {
	case "":
	case "external":
		warnings = append(warnings, "flag --cloud-provider=external is not acted on by heartlet: the node is not tainted node.cloudprovider.kubernetes.io/uninitialized and its addresses come from this machine")
	default:
		problems = append(problems, &Problem{Flag: "--cloud-provider", Field: fieldInvalid("cloudProvider", cl.cloudProvider, "must be '' or 'external', as upstream (in-tree cloud providers are gone)")})
	}
	if cl.runOnce {
		problems = append(problems, &Problem{Flag: "--runonce", Field: fieldInvalid("runOnce", "true", "heartlet does not support the run-once mode")})
	}
	if cl.runtimeCgroups != "" {
		warnings = append(warnings, "flag --runtime-cgroups is not acted on by heartlet: the container runtime stays in its own cgroup")
	}
	for _, d := range deprecatedFlags {
		if fs.Changed(d.name) {
			warnings = append(warnings, fmt.Sprintf("flag --%s has been deprecated upstream (%s) and is not acted on by heartlet", d.name, d.advice))
		}
	}
	return warnings, problems
}

// configFlagWarnings says, for every configuration flag the command line
// set (but --v and --vmodule, as upstream), that it is deprecated and
// which field replaces it.
func configFlagWarnings(fs *pflag.FlagSet, paths map[string]string) []string {
	var out []string
	fs.Visit(func(f *pflag.Flag) {
		path, ok := paths[f.Name]
		if !ok || f.Name == "v" || f.Name == "vmodule" {
			return
		}
		out = append(out, fmt.Sprintf("flag --%s is deprecated as upstream: set %s in the --config file instead", f.Name, path))
	})
	slices.Sort(out)
	return out
}

func fieldInvalid(path string, value any, detail string) *field.Error {
	return field.Invalid(field.NewPath(path), value, detail)
}

// reservedMemoryFlag is --reserved-memory: NUMA node reservations
// separated by ";", each "node:resource=quantity,...", as upstream's
// flag reads them.
type reservedMemoryFlag struct {
	value *[]kubeletv1beta1.MemoryReservation
}

func (f reservedMemoryFlag) Type() string { return "reserved-memory" }

func (f reservedMemoryFlag) String() string {
	if f.value == nil {
		return ""
	}
	var parts []string
	for _, r := range *f.value {
		var rs []string
		names := make([]string, 0, len(r.Limits))
		for name := range r.Limits {
			names = append(names, string(name))
		}
		slices.Sort(names)
		for _, name := range names {
			q := r.Limits[v1.ResourceName(name)]
			rs = append(rs, name+"="+q.String())
		}
		parts = append(parts, fmt.Sprintf("%d:%s", r.NumaNode, strings.Join(rs, ",")))
	}
	return strings.Join(parts, ";")
}

func (f reservedMemoryFlag) Set(s string) error {
	if s == "" {
		*f.value = nil
		return nil
	}
	for _, spec := range strings.Split(s, ";") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		node, list, ok := strings.Cut(spec, ":")
		if !ok {
			return fmt.Errorf("the reserved memory has incorrect format, expected numaNodeID:type=quantity[,type=quantity...], got %s", spec)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(node), 10, 32)
		if err != nil {
			return fmt.Errorf("failed to parse the NUMA node ID %q: %w", node, err)
		}
		r := kubeletv1beta1.MemoryReservation{NumaNode: int32(n), Limits: v1.ResourceList{}}
		for _, kv := range strings.Split(list, ",") {
			name, value, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("the reserved limit has incorrect value, expected type=quantity, got %s", kv)
			}
			q, err := resource.ParseQuantity(strings.TrimSpace(value))
			if err != nil {
				return fmt.Errorf("failed to parse the quantity %q of %s: %w", value, name, err)
			}
			r.Limits[v1.ResourceName(strings.TrimSpace(name))] = q
		}
		*f.value = append(*f.value, r)
	}
	return nil
}
