// Package admission decides whether this node accepts a pod before anything
// of it runs, with the checks and the reason strings of the upstream
// kubelet's predicate admission, so that a rejected pod fails with the
// status a cluster user expects (phase Failed, reason such as OutOfcpu).
//
// The checks, in order; the first that fails decides the result:
//
//  1. the pod's kubernetes.io/os label and spec.os.name must name this
//     node's operating system (PodOSSelectorNodeLabelDoesNotMatch,
//     PodOSNotSupported);
//  2. resources: one more pod must fit in the node's pod capacity
//     (OutOfpods), and the pod's effective requests (qos.PodRequestsAndLimits:
//     init containers, sidecars, pod-level resources and overhead) plus those
//     of the active pods must fit in the allocatable cpu, memory,
//     ephemeral-storage and other scalar resources (OutOfcpu, OutOfmemory,
//     OutOfephemeral-storage, "OutOf" + the resource name);
//  3. spec.nodeSelector and the required node affinity must match the node
//     (NodeAffinity);
//  4. spec.nodeName, when set, must be this node (NodeName);
//  5. the host ports the pod asks for must be free among the active pods
//     (NodePorts);
//  6. every NoExecute taint of the node must be tolerated (TaintToleration).
//     NoSchedule and PreferNoSchedule taints are the scheduler's business: a
//     pod already bound to the node is not refused for them.
//
// Departures from the scheduler's rules, as upstream's kubelet has them:
// extended resources the node does not advertise are ignored (they may be
// cluster-level or backed by dynamic resource allocation); static pods skip
// the taint check. Two simplifications of this package: critical pods
// (static pods, mirror pods and pods with a priority of at least
// system-critical) skip the resource checks, where upstream's kubelet would
// evict lower-priority pods to make room; and an empty allocatable list means
// the node's resources are unknown, so only the pod count is checked. Without
// a node, the checks that need one (3, 4 and 6) are skipped.
package admission

import (
	"fmt"
	"runtime"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podspec"
	"github.com/heartlet/heartlet/internal/qos"
)

// Reasons of a refused admission, as the upstream kubelet reports them in
// the pod's status.
const (
	// ReasonOutOfPrefix starts the reason of every insufficient resource;
	// the resource name follows.
	ReasonOutOfPrefix = "OutOf"
	// ReasonOutOfPods: the node runs as many pods as it may.
	ReasonOutOfPods = ReasonOutOfPrefix + string(v1.ResourcePods)
	// ReasonOutOfCPU: not enough allocatable cpu.
	ReasonOutOfCPU = ReasonOutOfPrefix + string(v1.ResourceCPU)
	// ReasonOutOfMemory: not enough allocatable memory.
	ReasonOutOfMemory = ReasonOutOfPrefix + string(v1.ResourceMemory)
	// ReasonOutOfEphemeralStorage: not enough allocatable ephemeral storage.
	ReasonOutOfEphemeralStorage = ReasonOutOfPrefix + string(v1.ResourceEphemeralStorage)
	// ReasonNodeAffinity: the node selector or required node affinity does
	// not match the node.
	ReasonNodeAffinity = "NodeAffinity"
	// ReasonNodeName: the pod is bound to another node.
	ReasonNodeName = "NodeName"
	// ReasonNodePorts: a requested host port is in use by an active pod.
	ReasonNodePorts = "NodePorts"
	// ReasonTaintToleration: the pod does not tolerate a NoExecute taint.
	ReasonTaintToleration = "TaintToleration"
	// ReasonOSSelectorMismatch: the pod's kubernetes.io/os label names
	// another operating system.
	ReasonOSSelectorMismatch = "PodOSSelectorNodeLabelDoesNotMatch"
	// ReasonOSNotSupported: the pod's spec.os names another operating
	// system.
	ReasonOSNotSupported = "PodOSNotSupported"
)

// Descriptions of the failed predicates, the second half of a predicate
// failure's message.
const (
	descNodeAffinity = "node(s) didn't match Pod's node affinity/selector"
	descNodeName     = "node(s) didn't match the requested node name"
	descNodePorts    = "node(s) didn't have free ports for the requested pod ports"
	descTaint        = "node(s) had taints that the pod didn't tolerate"
)

// systemCriticalPriority is the priority of the system-cluster-critical
// class; pods at or above it are critical.
const systemCriticalPriority = 2_000_000_000

// bindAllHostIP is the host IP that stands for every address of the node;
// an unset host IP means it.
const bindAllHostIP = "0.0.0.0"

// Result is the outcome of Admit. When Admit is false, Reason is a short
// CamelCase reason for the pod's status and Message explains it.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// Admit decides whether pod may run on node next to the active pods (the
// admitted pods that have not terminated; pod itself is ignored among them).
// allocatable is the node's allocatable resources and maxPods the most pods
// the node runs (0 or less: no limit of its own); the pod capacity is the
// smaller of maxPods and allocatable's pods. node may be nil when it is not
// known yet; see the package documentation for what is then checked.
func Admit(pod *v1.Pod, node *v1.Node, allocatable v1.ResourceList, active []*v1.Pod, maxPods int) Result {
	others := make([]*v1.Pod, 0, len(active))
	for _, p := range active {
		if p != nil && p.UID != pod.UID {
			others = append(others, p)
		}
	}

	if os, ok := pod.Labels[v1.LabelOSStable]; ok && os != runtime.GOOS {
		return Result{
			Reason:  ReasonOSSelectorMismatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
		}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return Result{
			Reason:  ReasonOSNotSupported,
			Message: "Failed to admit pod as the OS field doesn't match node OS",
		}
	}

	if !isCritical(pod) {
		if r, ok := fitsResources(pod, allocatable, others, maxPods); !ok {
			return r
		}
	}
	if node != nil {
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
			return predicateFailure(ReasonNodeAffinity, descNodeAffinity)
		}
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
			return predicateFailure(ReasonNodeName, descNodeName)
		}
	}
	if !fitsPorts(pod, others) {
		return predicateFailure(ReasonNodePorts, descNodePorts)
	}
	if node != nil && !podconfig.IsStatic(pod) {
		noExecute := func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }
		if _, untolerated := corev1.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noExecute, false); untolerated {
			return predicateFailure(ReasonTaintToleration, descTaint)
		}
	}
	return Result{Admit: true}
}

func predicateFailure(name, desc string) Result {
	return Result{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, desc)}
}

func insufficient(name v1.ResourceName, requested, used, capacity int64) Result {
	return Result{
		Reason: ReasonOutOfPrefix + string(name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity),
	}
}

// isCritical reports whether the pod is critical to the node: a static pod,
// a mirror pod or a pod of system-critical priority.
func isCritical(pod *v1.Pod) bool {
	if podconfig.IsStatic(pod) {
		return true
	}
	if _, ok := pod.Annotations[podconfig.AnnotationConfigMirror]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// fitsResources checks the pod count and the pod's requests against the
// allocatable resources left by the other pods.
func fitsResources(pod *v1.Pod, allocatable v1.ResourceList, others []*v1.Pod, maxPods int) (Result, bool) {
	capacity := int64(-1)
	if q, ok := allocatable[v1.ResourcePods]; ok {
		capacity = q.Value()
	}
	if maxPods > 0 && (capacity < 0 || int64(maxPods) < capacity) {
		capacity = int64(maxPods)
	}
	if used := int64(len(others)); capacity >= 0 && used+1 > capacity {
		return insufficient(v1.ResourcePods, 1, used, capacity), false
	}
	if len(allocatable) == 0 {
		return Result{}, true
	}

	want := amounts(pod)
	if len(want) == 0 {
		return Result{}, true
	}
	used := map[v1.ResourceName]int64{}
	for _, p := range others {
		for name, v := range amounts(p) {
			used[name] += v
		}
	}
	for _, name := range orderedNames(want) {
		q, advertised := allocatable[name]
		if !advertised && isExtended(name) {
			continue
		}
		capacity := amount(name, q)
		if want[name] > capacity-used[name] {
			return insufficient(name, want[name], used[name], capacity), false
		}
	}
	return Result{}, true
}

// amounts returns the pod's positive effective requests of the resources
// admission accounts, as integers: millicores for cpu, the plain value for
// everything else.
func amounts(pod *v1.Pod) map[v1.ResourceName]int64 {
	reqs, _ := qos.PodRequestsAndLimits(pod)
	out := map[v1.ResourceName]int64{}
	for name, q := range reqs {
		if !accounted(name) {
			continue
		}
		if v := amount(name, q); v > 0 {
			out[name] = v
		}
	}
	return out
}

func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// accounted reports whether admission checks the resource: cpu, memory,
// ephemeral-storage and the scalar resources (hugepages, attachable volumes,
// extended resources and kubernetes.io-prefixed resources).
func accounted(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	s := string(name)
	return strings.HasPrefix(s, v1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix) ||
		strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		isExtended(name)
}

// isExtended reports whether the resource is an extended resource: a name
// with a domain prefix outside kubernetes.io, not a quota "requests." name.
func isExtended(name v1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") &&
		!strings.Contains(s, v1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}

// orderedNames returns cpu, memory and ephemeral-storage first, in that
// order, then the other names sorted.
func orderedNames(m map[v1.ResourceName]int64) []v1.ResourceName {
	rank := func(n v1.ResourceName) int {
		switch n {
		case v1.ResourceCPU:
			return 0
		case v1.ResourceMemory:
			return 1
		case v1.ResourceEphemeralStorage:
			return 2
		}
		return 3
	}
	names := make([]v1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// hostPort is one (host IP, protocol, port) a pod binds on the node.
type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

// hostPorts returns the host ports of the pod's app containers and of its
// sidecars (the init containers that run for the pod's whole life), with an
// unset IP meaning every address and an unset protocol meaning TCP.
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = bindAllHostIP
			}
			if hp.protocol == "" {
				hp.protocol = v1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if podspec.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// fitsPorts reports whether none of the pod's host ports conflicts with one
// of the other pods: same protocol and port, and the same IP or either side
// bound to every address.
func fitsPorts(pod *v1.Pod, others []*v1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return true
	}
	var inUse []hostPort
	for _, p := range others {
		inUse = append(inUse, hostPorts(p)...)
	}
	for _, w := range want {
		for _, u := range inUse {
			if w.port == u.port && w.protocol == u.protocol &&
				(w.ip == u.ip || w.ip == bindAllHostIP || u.ip == bindAllHostIP) {
				return false
			}
		}
	}
	return true
}
