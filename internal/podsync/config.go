package podsync

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/expansion"
	"github.com/heartlet/heartlet/internal/qos"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/volume"
)

// maxDNSSearches is the number of search domains the resolver honours;
// longer lists are cut, as upstream does.
const maxDNSSearches = 32

// podLogDir is the directory of a pod's container logs:
// <podLogsDir>/<namespace>_<name>_<uid>.
func podLogDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// containerLogPath is the log file of one attempt, relative to the pod's
// log directory: <container>/<restartCount>.log.
func containerLogPath(name string, restartCount int) string {
	return filepath.Join(name, fmt.Sprintf("%d.log", restartCount))
}

// sandboxConfig builds the CRI sandbox configuration of pod.
func (s *Syncer) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dns, err := s.dnsConfig(pod)
	if err != nil {
		return nil, err
	}
	sec, err := s.sandboxSecurity(pod)
	if err != nil {
		return nil, err
	}
	if sec.NamespaceOptions.UsernsOptions, err = s.userNamespace(pod); err != nil {
		return nil, err
	}
	hostname := ""
	if !pod.Spec.HostNetwork {
		// A host-network pod has the node's name, as upstream.
		h, domain, err := podHostnameAndDomain(pod, s.opts.ClusterDomain)
		if err != nil {
			return nil, err
		}
		if hostname, err = kernelHostname(h, domain, pod.Spec.SetHostnameAsFQDN); err != nil {
			return nil, err
		}
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Hostname:     hostname,
		LogDirectory: podLogDir(s.opts.PodLogsDir, pod),
		DnsConfig:    dns,
		Labels:       runtime.SandboxLabels(pod),
		Annotations:  runtime.SandboxAnnotations(pod),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    s.cgroupParent(pod),
			SecurityContext: sec,
			Sysctls:         podSysctls(pod),
		},
	}
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return cfg, nil
}

func (s *Syncer) cgroupParent(pod *v1.Pod) string {
	if s.cgroups == nil {
		return ""
	}
	return s.cgroups.PodCgroupParent(pod)
}

func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// targetPIDNamespace puts a container into the PID namespace of the
// container targetID (an ephemeral container's targetContainerName), as
// upstream: only when it would otherwise have its own, so a pod that
// shares one namespace (shareProcessNamespace, hostPID) keeps it.
func targetPIDNamespace(cfg *runtimeapi.ContainerConfig, targetID string) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	default:
		return runtimeapi.Protocol_TCP
	}
}

func allContainers(pod *v1.Pod) []v1.Container {
	return append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
}

// dnsConfig resolves the pod's DNS policy into the resolver configuration
// the runtime writes into the sandbox, as upstream does: ClusterFirst uses
// clusterDNS and the cluster search path (and falls back to the node's
// resolver when no clusterDNS is configured, or for host-network pods),
// Default uses the node's resolv.conf, None only spec.dnsConfig.
func (s *Syncer) dnsConfig(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	if policy == v1.DNSClusterFirstWithHostNet {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && len(s.opts.ClusterDNS) == 0 {
		policy = v1.DNSDefault
	}

	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSNone:
	case v1.DNSDefault:
		host, err := readResolvConf(s.opts.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg = host
	case v1.DNSClusterFirst:
		host, err := readResolvConf(s.opts.ResolvConf)
		if err != nil {
			return nil, err
		}
		cfg.Servers = append(cfg.Servers, s.opts.ClusterDNS...)
		if d := s.opts.ClusterDomain; d != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		}
		cfg.Searches = append(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = appendUnique(cfg.Servers, dc.Nameservers...)
		cfg.Searches = appendUnique(cfg.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOption(cfg.Options, opt)
		}
	}
	if len(cfg.Searches) > maxDNSSearches {
		cfg.Searches = cfg.Searches[:maxDNSSearches]
	}
	return cfg, nil
}

// readResolvConf reads nameservers, search domains and options from a
// resolv.conf file. An empty path means no host resolver configuration.
func readResolvConf(path string) (*runtimeapi.DNSConfig, error) {
	cfg := &runtimeapi.DNSConfig{}
	if path == "" {
		return cfg, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read resolvConf %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search", "domain":
			// The last search or domain line wins, as in the resolver.
			cfg.Searches = append([]string(nil), fields[1:]...)
		case "options":
			for _, o := range fields[1:] {
				cfg.Options = mergeOption(cfg.Options, o)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read resolvConf %s: %w", path, err)
	}
	return cfg, nil
}

func appendUnique(list []string, items ...string) []string {
	seen := map[string]bool{}
	for _, s := range list {
		seen[s] = true
	}
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	return list
}

// mergeOption adds a resolver option, replacing one with the same name.
func mergeOption(opts []string, opt string) []string {
	name, _, _ := strings.Cut(opt, ":")
	for i, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n == name {
			opts[i] = opt
			return opts
		}
	}
	return append(opts, opt)
}

// containerConfig builds the CRI container configuration of one attempt.
// It fails when the environment or a mount references something missing.
func (s *Syncer) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, init bool, restartCount int, image string, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	env, err := s.containerEnv(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	envMap := make(map[string]string, len(env))
	for _, kv := range env {
		envMap[kv.Key] = string(kv.Value)
	}
	look := expansion.MapLookup(envMap)
	command := make([]string, len(c.Command))
	for i, v := range c.Command {
		command[i] = expansion.Expand(v, look)
	}
	args := make([]string, len(c.Args))
	for i, v := range c.Args {
		args[i] = expansion.Expand(v, look)
	}
	var mounts []*runtimeapi.Mount
	if len(c.VolumeMounts) > 0 {
		if s.opts.Mounts == nil {
			return nil, fmt.Errorf("container %s mounts volumes but no volume manager is configured", c.Name)
		}
		mounts, err = s.opts.Mounts.MountsWithEnv(ctx, pod, c, envMap)
		if err != nil {
			return nil, err
		}
	}
	var devices []*runtimeapi.Device
	if len(c.VolumeDevices) > 0 {
		if s.opts.Mounts == nil {
			return nil, fmt.Errorf("container %s maps volume devices but no volume manager is configured", c.Name)
		}
		if devices, err = s.opts.Mounts.Devices(ctx, pod, c); err != nil {
			return nil, err
		}
	}
	if !mountsEtcHosts(c) {
		// Written again for every container, so it follows the pod's
		// IPs and, for the host network, the node's file.
		file, err := s.writeHostsFile(pod, podIPs)
		if err != nil {
			return nil, err
		}
		if m := hostsMount(file, c); m != nil {
			mounts = append(mounts, m)
		}
	}
	if m := s.terminationMessageMount(ctx, pod, c); m != nil {
		mounts = append(mounts, m)
	}
	sec, err := s.containerSecurityContext(ctx, pod, c, image)
	if err != nil {
		return nil, err
	}
	if sec.NamespaceOptions.UsernsOptions, err = s.userNamespace(pod); err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        env,
		Mounts:      mounts,
		Devices:     devices,
		Labels:      runtime.ContainerLabels(pod, c.Name),
		Annotations: runtime.ContainerAnnotations(pod, c, restartCount, init),
		LogPath:     containerLogPath(c.Name, restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       s.containerResources(pod, c),
			SecurityContext: sec,
		},
	}
	return cfg, nil
}

// containerEnv resolves the container's environment as upstream: envFrom
// sources first (with their prefix), then env entries in order; each
// value may reference variables defined before it with $(NAME), or a
// Service variable; last the Service variables the container does not
// define itself.
func (s *Syncer) containerEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string) ([]*runtimeapi.KeyValue, error) {
	var svcEnv []v1.EnvVar
	if s.opts.ServiceEnv != nil {
		var err error
		if svcEnv, err = s.opts.ServiceEnv.ServiceEnv(pod); err != nil {
			return nil, fmt.Errorf("service environment variables: %w", err)
		}
	}
	services := make(map[string]string, len(svcEnv))
	for _, e := range svcEnv {
		services[e.Name] = e.Value
	}
	defined := map[string]string{}
	lookup := func(name string) (string, bool) {
		if v, ok := defined[name]; ok {
			return v, true
		}
		v, ok := services[name]
		return v, ok
	}
	var out []*runtimeapi.KeyValue
	index := map[string]int{}
	set := func(k, v string) {
		defined[k] = v
		if i, ok := index[k]; ok {
			out[i].Value = []byte(v)
			return
		}
		index[k] = len(out)
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	for _, from := range c.EnvFrom {
		data, err := s.envFromData(ctx, pod, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expansion.Expand(e.Value, lookup))
			continue
		}
		v, ok, err := s.valueFrom(ctx, pod, c, e.ValueFrom, podIPs)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	for _, e := range svcEnv {
		if _, ok := defined[e.Name]; !ok {
			set(e.Name, e.Value)
		}
	}
	return out, nil
}

func (s *Syncer) envFromData(ctx context.Context, pod *v1.Pod, from v1.EnvFromSource) (map[string]string, error) {
	if s.opts.Env == nil {
		return nil, fmt.Errorf("envFrom needs the API server: static pods cannot reference API objects")
	}
	switch {
	case from.ConfigMapRef != nil:
		return s.opts.Env.ConfigMapData(ctx, pod.Namespace, from.ConfigMapRef.Name, optional(from.ConfigMapRef.Optional))
	case from.SecretRef != nil:
		return s.opts.Env.SecretData(ctx, pod.Namespace, from.SecretRef.Name, optional(from.SecretRef.Optional))
	}
	return nil, nil
}

func optional(b *bool) bool { return b != nil && *b }

// valueFrom resolves one env valueFrom source. ok is false when an
// optional reference is missing: the variable is then not set.
func (s *Syncer) valueFrom(ctx context.Context, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, podIPs []string) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, ok := s.fieldValue(pod, src.FieldRef.FieldPath, podIPs)
		if !ok {
			return "", false, fmt.Errorf("unsupported fieldRef %q", src.FieldRef.FieldPath)
		}
		return v, true, nil
	case src.ResourceFieldRef != nil:
		var alloc v1.ResourceList
		if s.opts.Allocatable != nil {
			alloc = s.opts.Allocatable()
		}
		v, err := volume.ContainerResourceValue(pod, c.Name, src.ResourceFieldRef, alloc)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil || src.SecretKeyRef != nil:
		if s.opts.Env == nil {
			return "", false, fmt.Errorf("needs the API server: static pods cannot reference API objects")
		}
		if r := src.ConfigMapKeyRef; r != nil {
			return s.opts.Env.ConfigMapValue(ctx, pod.Namespace, r.Name, r.Key, optional(r.Optional))
		}
		r := src.SecretKeyRef
		return s.opts.Env.SecretValue(ctx, pod.Namespace, r.Name, r.Key, optional(r.Optional))
	}
	return "", false, nil
}

// fieldValue resolves the downward API field references of env.
func (s *Syncer) fieldValue(pod *v1.Pod, path string, podIPs []string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.hostIP":
		if len(s.opts.NodeIPs) > 0 {
			return s.opts.NodeIPs[0], true
		}
		return "", true
	case "status.hostIPs":
		return strings.Join(s.opts.NodeIPs, ","), true
	case "status.podIP":
		if pod.Spec.HostNetwork {
			podIPs = s.opts.NodeIPs
		}
		if len(podIPs) > 0 {
			return podIPs[0], true
		}
		return "", true
	case "status.podIPs":
		if pod.Spec.HostNetwork {
			podIPs = s.opts.NodeIPs
		}
		return strings.Join(podIPs, ","), true
	default:
		if k, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
			v, found := pod.Labels[strings.TrimSuffix(k, "']")]
			return v, found
		}
		if k, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
			v, found := pod.Annotations[strings.TrimSuffix(k, "']")]
			return v, found
		}
		return "", false
	}
}

// containerResources maps the container's cpu and memory to CRI Linux
// resources (cpu shares, the CFS quota per cpuCFSQuota and
// cpuCFSQuotaPeriod, the memory limit), with the OOM score adjustment of the
// pod's QoS class.
func (s *Syncer) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq := c.Resources.Requests.Cpu()
	cpuLim := c.Resources.Limits.Cpu()
	switch {
	case !cpuReq.IsZero():
		r.CpuShares = int64(qos.MilliCPUToShares(cpuReq.MilliValue()))
	case !cpuLim.IsZero():
		r.CpuShares = int64(qos.MilliCPUToShares(cpuLim.MilliValue()))
	default:
		r.CpuShares = int64(qos.MilliCPUToShares(0))
	}
	if !s.opts.DisableCPUQuota {
		// As upstream with cpuCFSQuota: the period always, the quota from
		// the limit (0, unlimited, without one). Without cpuCFSQuota
		// neither is set and the container has no CFS quota.
		period := int64(qos.DefaultCPUPeriod)
		if s.opts.CPUPeriod > 0 {
			period = int64(s.opts.CPUPeriod / time.Microsecond)
		}
		r.CpuPeriod = period
		r.CpuQuota = qos.MilliCPUToQuota(cpuLim.MilliValue(), period)
	}
	if mem := c.Resources.Limits.Memory(); !mem.IsZero() {
		r.MemoryLimitInBytes = mem.Value()
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, s.opts.MachineMemory)
	return r
}

// oomScoreAdj is the container's OOM score adjustment by QoS class, as
// upstream: Guaranteed -997, BestEffort 1000, Burstable scaled by the
// memory request between 2 and 999.
func oomScoreAdj(pod *v1.Pod, c *v1.Container, machineMemory int64) int64 {
	switch qos.Class(pod) {
	case v1.PodQOSGuaranteed:
		return -997
	case v1.PodQOSBestEffort:
		return 1000
	}
	if machineMemory <= 0 {
		return 999
	}
	req := c.Resources.Requests.Memory().Value()
	adj := 1000 - (1000*req)/machineMemory
	return min(max(adj, 2), 999)
}
