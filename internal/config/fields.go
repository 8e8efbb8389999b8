package config

// Support says what heartlet does with a KubeletConfiguration field.
type Support string

const (
	// Honoured: heartlet acts on the field's value.
	Honoured Support = "honoured"
	// NotYet: heartlet reads and validates the field but does not act on
	// it yet; a value other than the default is named in a warning at
	// start and by heartlet validate.
	NotYet Support = "not yet"
	// NoOp: acting on the field means nothing for heartlet (e.g. upstream
	// ignores it too); the row says why. No warning is given.
	NoOp Support = "no-op"
)

// FieldSupport is one row of Fields.
type FieldSupport struct {
	// Path is the field's JSON path, e.g. "authentication.webhook.enabled".
	Path string
	// Support is what heartlet does with it.
	Support Support
	// Note says what heartlet does, or why it does not (yet).
	Note string
}

// Fields classifies every field of the upstream v1beta1
// KubeletConfiguration, in the type's order: structs are broken down to
// their fields (a list or a map is one row). A test fails when a field of
// the type is missing here or a row names a field the type does not have,
// and docs/configuration.md holds this table (go test ./internal/config
// -run TestFieldsDoc -update rewrites it). Flip a row to Honoured in the
// change that makes heartlet act on the field.
var Fields = []FieldSupport{
	{"kind", Honoured, "must be KubeletConfiguration"},
	{"apiVersion", Honoured, "must be kubelet.config.k8s.io/v1beta1"},
	{"enableServer", Honoured, "false leaves out the authenticated HTTPS server (read-only and healthz ports are separate)"},
	{"staticPodPath", Honoured, "static pods are read from this directory, or this one file"},
	{"podLogsDir", Honoured, "container logs are written under it"},
	{"syncFrequency", Honoured, "longest time between two syncs of a pod; also the syncloop health check's threshold"},
	{"fileCheckFrequency", Honoured, "how often staticPodPath is read again"},
	{"httpCheckFrequency", Honoured, "how often staticPodURL is read again"},
	{"staticPodURL", Honoured, "static pods (one Pod or a PodList) are read from this URL"},
	{"staticPodURLHeader", Honoured, "headers sent with every request to staticPodURL"},
	{"address", Honoured, "listen address of the HTTPS and read-only servers"},
	{"port", Honoured, "port of the HTTPS server, reported as the kubelet endpoint"},
	{"readOnlyPort", Honoured, "port of the read-only server (0: off)"},
	{"tlsCertFile", Honoured, "serving certificate of the HTTPS server, read again when the files change"},
	{"tlsPrivateKeyFile", Honoured, "serving key of the HTTPS server"},
	{"tlsCipherSuites", Honoured, "cipher suites of the HTTPS server"},
	{"tlsCurvePreferences", NotYet, "Go's default curves are used"},
	{"tlsMinVersion", Honoured, "minimum TLS version of the HTTPS server"},
	{"rotateCertificates", Honoured, "the client certificate is renewed through a CertificateSigningRequest before it expires"},
	{"serverTLSBootstrap", Honoured, "the serving certificate comes from a kubelet-serving CertificateSigningRequest and is rotated"},
	{"authentication.x509.clientCAFile", Honoured, "client certificates signed by it are accepted (reloaded when it changes)"},
	{"authentication.webhook.enabled", Honoured, "bearer tokens are checked with TokenReviews"},
	{"authentication.webhook.cacheTTL", Honoured, "TokenReview results are cached this long"},
	{"authentication.anonymous.enabled", Honoured, "requests without credentials are system:anonymous"},
	{"authorization.mode", Honoured, "AlwaysAllow or Webhook (SubjectAccessReviews)"},
	{"authorization.webhook.cacheAuthorizedTTL", Honoured, "allowed SubjectAccessReviews are cached this long"},
	{"authorization.webhook.cacheUnauthorizedTTL", Honoured, "denied SubjectAccessReviews are cached this long"},
	{"registryPullQPS", Honoured, `a node-wide token bucket for image pulls (0: no limit); a pull with no token fails with "pull QPS exceeded" and backs off`},
	{"registryBurst", Honoured, "burst of the registryPullQPS bucket"},
	{"imagePullCredentialsVerificationPolicy", NotYet, "pulled images are not re-verified per pod"},
	{"preloadedImagesVerificationAllowlist", NotYet, "pulled images are not re-verified per pod"},
	{"eventRecordQPS", Honoured, "events are written by a client of their own limited to this rate (0: no limit)"},
	{"eventBurst", Honoured, "burst of the event client"},
	{"enableDebuggingHandlers", Honoured, "logs, exec, attach, port-forward and debug endpoints of the HTTPS server"},
	{"enableContentionProfiling", Honoured, "block profiles on /debug/pprof/"},
	{"healthzPort", Honoured, "port of the healthz server (0: off)"},
	{"healthzBindAddress", Honoured, "listen address of the healthz server"},
	{"oomScoreAdj", Honoured, "heartlet's own oom_score_adj (a warning, and heartlet goes on, when the machine refuses it)"},
	{"clusterDomain", Honoured, "added to pods' DNS search list; the domain of a pod's FQDN (`subdomain`) in its hosts file and, with `setHostnameAsFQDN`, its hostname"},
	{"clusterDNS", Honoured, "pods' DNS servers"},
	{"streamingConnectionIdleTimeout", NotYet, "exec, attach and port-forward streams have no idle timeout of their own"},
	{"nodeStatusUpdateFrequency", Honoured, "how often node status is computed"},
	{"nodeStatusReportFrequency", Honoured, "how often an unchanged node status is still written"},
	{"nodeLeaseDurationSeconds", Honoured, "the node Lease's duration (renewed every quarter of it)"},
	{"imageMinimumGCAge", Honoured, "image garbage collection keeps an image at least this long after it was first seen"},
	{"imageMaximumGCAge", Honoured, "an image unused this long is removed whatever the disk usage (0: never)"},
	{"imageGCHighThresholdPercent", Honoured, "image filesystem usage at which least recently used images are removed (every 5 min); 100 turns it off"},
	{"imageGCLowThresholdPercent", Honoured, "image filesystem usage image garbage collection brings the disk down to"},
	{"volumeStatsAggPeriod", NotYet, "CSI volumes' stats are read from their drivers on this period; other volumes' usage is measured when stats are read, cached 10 s"},
	{"kubeletCgroups", NotYet, "heartlet does not move itself into a cgroup"},
	{"systemCgroups", NotYet, "system processes are not moved into a cgroup"},
	{"cgroupRoot", Honoured, "the kubepods hierarchy is created under it; / only with the systemd driver"},
	{"cgroupsPerQOS", Honoured, "QoS and pod cgroups are created"},
	{"cgroupDriver", Honoured, "cgroupfs or systemd (slices through systemd's D-Bus API, with cgroupRoot /); the runtime's driver from CRI RuntimeConfig wins as upstream's, and a runtime configured otherwise (containerd's SystemdCgroup) stops the start"},
	{"cpuManagerPolicy", NotYet, "no CPU manager (every container may use every CPU)"},
	{"singleProcessOOMKill", NotYet, "memory.oom.group is not set"},
	{"cpuManagerPolicyOptions", NotYet, "no CPU manager"},
	{"cpuManagerReconcilePeriod", NotYet, "no CPU manager"},
	{"memoryManagerPolicy", NotYet, "no memory manager"},
	{"topologyManagerPolicy", NotYet, "no topology manager"},
	{"topologyManagerScope", NotYet, "no topology manager"},
	{"topologyManagerPolicyOptions", NotYet, "no topology manager"},
	{"qosReserved", NotYet, "no memory reservation for higher QoS classes"},
	{"runtimeRequestTimeout", Honoured, "timeout of CRI requests"},
	{"hairpinMode", NotYet, "heartlet configures no hairpin traffic; the CNI configuration decides"},
	{"maxPods", Honoured, "pods capacity of the node and admission (OutOfpods)"},
	{"podCIDR", NotYet, "not passed to the runtime"},
	{"podPidsLimit", Honoured, "pids.max of every pod cgroup"},
	{"resolvConf", Honoured, "pods' DNS configuration starts from it"},
	{"runOnce", Honoured, "true is refused: run-once mode is not offered"},
	{"cpuCFSQuota", Honoured, "false gives containers and pod cgroups no CFS quota"},
	{"cpuCFSQuotaPeriod", Honoured, "CFS period of containers and pod cgroups (1ms–1s)"},
	{"nodeStatusMaxImages", Honoured, "node.status.images lists at most this many images, largest first (-1: all, 0: none)"},
	{"maxOpenFiles", NotYet, "heartlet's open-file limit is not changed"},
	{"contentType", Honoured, "content type of requests to the API server"},
	{"kubeAPIQPS", Honoured, "client-side rate limit of API requests"},
	{"kubeAPIBurst", Honoured, "client-side burst of API requests"},
	{"serializeImagePulls", Honoured, "one image pull at a time node-wide"},
	{"maxParallelImagePulls", Honoured, "bound on parallel image pulls when serializeImagePulls is false"},
	{"evictionHard", Honoured, "hard thresholds: pressure conditions, admission and evictions (containerfs.* refused); memory.available and nodefs.available also lower node allocatable; with enforceNodeAllocatable pods, memory.available is also an allocatableMemory.available threshold"},
	{"evictionSoft", Honoured, "soft thresholds, acted on once met for their grace period"},
	{"evictionSoftGracePeriod", Honoured, "how long a soft threshold is met before pods are evicted"},
	{"evictionPressureTransitionPeriod", Honoured, "how long a pressure condition stays after its signal recovered"},
	{"evictionMaxPodGracePeriod", Honoured, "longest grace period of a pod evicted for a soft threshold (negative: the pod's own)"},
	{"evictionMinimumReclaim", Honoured, "a threshold that caused evictions holds until its signal is this far above it"},
	{"mergeDefaultEvictionSettings", Honoured, "merges the default thresholds into evictionHard"},
	{"podsPerCore", Honoured, "the pods capacity (node status and admission) is at most podsPerCore per CPU"},
	{"enableControllerAttachDetach", NotYet, "heartlet attaches and detaches no volumes"},
	{"protectKernelDefaults", NotYet, "kernel tunables are neither checked nor changed"},
	{"makeIPTablesUtilChains", NotYet, "no KUBE-IPTABLES-HINT chain is created"},
	{"iptablesMasqueradeBit", NoOp, "deprecated upstream, where it no longer has any effect"},
	{"iptablesDropBit", NoOp, "deprecated upstream, where it no longer has any effect"},
	{"featureGates", NotYet, "names are checked against the upstream kubelet v1.37's gates (unknown or locked: an error, as upstream); heartlet acts on none"},
	{"failSwapOn", Honoured, "heartlet refuses to start while swap is on (/proc/swaps)"},
	{"memorySwap.swapBehavior", NotYet, "containers' swap is not configured"},
	{"containerLogMaxSize", Honoured, "container logs are rotated at this size"},
	{"containerLogMaxFiles", Honoured, "log files kept per container"},
	{"containerLogMaxWorkers", Honoured, "concurrent log rotations"},
	{"containerLogMonitorInterval", Honoured, "how often logs are checked for rotation"},
	{"configMapAndSecretChangeDetectionStrategy", Honoured, "Watch: one watch per ConfigMap or Secret in use; Cache: GETs cached for the node's node.alpha.kubernetes.io/ttl (1m without it); Get: a GET on every read"},
	{"systemReserved", Honoured, "subtracted from node allocatable"},
	{"kubeReserved", Honoured, "subtracted from node allocatable"},
	{"reservedSystemCPUs", NotYet, "no CPU manager"},
	{"showHiddenMetricsForVersion", NotYet, "heartlet hides no metrics"},
	{"systemReservedCgroup", Honoured, "limited to systemReserved when enforceNodeAllocatable has system-reserved; must exist"},
	{"kubeReservedCgroup", Honoured, "limited to kubeReserved when enforceNodeAllocatable has kube-reserved; must exist"},
	{"enforceNodeAllocatable", Honoured, "pods limits the kubepods cgroup to allocatable (cpu, memory, pids, and huge pages where the hugetlb controller exists; a refused limit retried every minute; NodeAllocatableEnforced events); system-reserved and kube-reserved limit their cgroups"},
	{"allowedUnsafeSysctls", Honoured, "unsafe sysctls pods may set"},
	{"defaultPodSysctls", NotYet, "pods get only the sysctls they ask for"},
	{"volumePluginDir", NotYet, "no flexvolume plugins"},
	{"providerID", Honoured, "Node.spec.providerID, set when the Node is registered"},
	{"kernelMemcgNotification", Honoured, "cgroup v1: thresholds on the root and kubepods memory cgroups run an eviction pass at once; on cgroup v2, as upstream, none (a warning at start), and memory is read every 10 s"},
	{"logging.format", Honoured, "text or json"},
	{"logging.flushFrequency", NotYet, "klog's own flush interval is used"},
	{"logging.verbosity", Honoured, "log verbosity"},
	{"logging.vmodule", Honoured, "per-file log verbosity"},
	{"logging.options.text.splitStream", NotYet, "info and error lines go to the same stream"},
	{"logging.options.text.infoBufferSize", NotYet, "info lines are not buffered"},
	{"logging.options.json.splitStream", NotYet, "info and error lines go to the same stream"},
	{"logging.options.json.infoBufferSize", NotYet, "info lines are not buffered"},
	{"enableSystemLogHandler", Honoured, "/logs/ on the HTTPS server"},
	{"enableSystemLogQuery", NotYet, "/logs/ serves files only, no journal queries"},
	{"shutdownGracePeriod", NotYet, "no graceful node shutdown"},
	{"shutdownGracePeriodCriticalPods", NotYet, "no graceful node shutdown"},
	{"shutdownGracePeriodByPodPriority", NotYet, "no graceful node shutdown"},
	{"crashLoopBackOff.maxContainerRestartPeriod", Honoured, "cap of the container restart back-off"},
	{"reservedMemory", NotYet, "no memory manager"},
	{"enableProfilingHandler", Honoured, "/debug/pprof/ on the HTTPS server"},
	{"enableDebugFlagsHandler", Honoured, "/debug/flags/v on the HTTPS server"},
	{"seccompDefault", Honoured, "RuntimeDefault seccomp for containers without a profile"},
	{"memoryThrottlingFactor", NotYet, "no memory QoS (memory.high)"},
	{"memoryReservationPolicy", NotYet, "no memory QoS"},
	{"registerWithTaints", Honoured, "taints set when the Node is registered"},
	{"registerNode", Honoured, "the Node is created when missing"},
	{"tracing.endpoint", NotYet, "no tracing"},
	{"tracing.samplingRatePerMillion", NotYet, "no tracing"},
	{"localStorageCapacityIsolation", Honoured, "true: pods over an emptyDir sizeLimit or their ephemeral-storage limits are evicted; false: not enforced, and the node reports no ephemeral-storage capacity (as upstream)"},
	{"containerRuntimeEndpoint", Honoured, "the CRI runtime heartlet talks to"},
	{"imageServiceEndpoint", Honoured, "image calls go to their own CRI connection"},
	{"failCgroupV1", Honoured, "false: heartlet runs on a cgroup v1 host, as upstream; true (the default) on a cgroup v1 host: upstream refuses to start, heartlet starts with a warning"},
	{"userNamespaces.idsPerPod", Honoured, "host IDs given to each pod with hostUsers: false (from the kubelet user's /etc/subuid range, else 65536 up)"},
}
