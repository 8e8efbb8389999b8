package admission

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// rl builds a resource list from name/quantity pairs.
func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

type podOpt func(*v1.Pod)

func mk(uid string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: uid, Namespace: "default", UID: types.UID(uid),
			Annotations: map[string]string{podconfig.AnnotationConfigSource: podconfig.SourceAPIServer},
		},
		Spec: v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(kv ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

func initRequests(sidecar bool, kv ...string) podOpt {
	return func(p *v1.Pod) {
		c := v1.Container{Name: fmt.Sprintf("init%d", len(p.Spec.InitContainers)), Image: "busybox"}
		c.Resources.Requests = rl(kv...)
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func overhead(kv ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Overhead = rl(kv...) }
}

func static(p *v1.Pod) { p.Annotations[podconfig.AnnotationConfigSource] = podconfig.SourceFile }

func mirrorPod(p *v1.Pod) { p.Annotations[podconfig.AnnotationConfigMirror] = "hash" }

func priority(v int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = &v } }

func nodeSelector(kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func req(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// affinity sets the required node affinity; each term is a pair of
// matchExpressions and matchFields.
func affinity(terms ...v1.NodeSelectorTerm) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func exprs(rs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: rs}
}

func fieldsTerm(rs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchFields: rs}
}

func port(ip string, proto v1.Protocol, hostPort int32) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports,
			v1.ContainerPort{ContainerPort: 80, HostPort: hostPort, HostIP: ip, Protocol: proto})
	}
}

func initPort(sidecar bool, hostPort int32) podOpt {
	return func(p *v1.Pod) {
		c := v1.Container{Name: "init-port", Image: "busybox",
			Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: hostPort}}}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

func tolerate(key string, effect v1.TaintEffect) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations,
			v1.Toleration{Key: key, Operator: v1.TolerationOpExists, Effect: effect})
	}
}

func osLabel(os string) podOpt {
	return func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: os} }
}

func osField(os v1.OSName) podOpt { return func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: os} } }

type nodeOpt func(*v1.Node)

func mkNode(opts ...nodeOpt) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{
		"zone": "a", "tier": "gold", "cores": "8", v1.LabelHostname: "node-a",
	}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func taint(key string, effect v1.TaintEffect) nodeOpt {
	return func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: effect}) }
}

func pods(ps ...*v1.Pod) []*v1.Pod { return ps }

// otherOS is an operating system this test does not run on.
func otherOS() string {
	if runtime.GOOS == "windows" {
		return "linux"
	}
	return "windows"
}

func TestAdmit(t *testing.T) {
	alloc := rl("cpu", "1", "memory", "1Gi", "ephemeral-storage", "10Gi", "pods", "110", "example.com/gpu", "2")
	node := mkNode()
	admit := Result{Admit: true}
	nodeAffinity := Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
	nodePorts := Result{Reason: "NodePorts", Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}
	taintFailure := Result{Reason: "TaintToleration", Message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"}
	out := func(reason, name string, requested, used, capacity int64) Result {
		return Result{Reason: reason, Message: fmt.Sprintf(
			"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, requested, used, capacity)}
	}

	tests := []struct {
		name    string
		pod     *v1.Pod
		node    *v1.Node
		alloc   v1.ResourceList
		active  []*v1.Pod
		maxPods int
		want    Result
	}{
		{name: "plain pod", pod: mk("p"), node: node, alloc: alloc, maxPods: 110, want: admit},

		// Pod count.
		{name: "pod count full", pod: mk("p"), node: node, alloc: alloc, active: pods(mk("a"), mk("b")), maxPods: 2,
			want: out("OutOfpods", "pods", 1, 2, 2)},
		{name: "pod count with room", pod: mk("p"), node: node, alloc: alloc, active: pods(mk("a")), maxPods: 2, want: admit},
		{name: "pod itself among active is not counted", pod: mk("p"), node: node, alloc: alloc, active: pods(mk("a"), mk("p")), maxPods: 2, want: admit},
		{name: "allocatable pods below maxPods", pod: mk("p"), node: node, alloc: rl("pods", "1"), active: pods(mk("a")), maxPods: 110,
			want: out("OutOfpods", "pods", 1, 1, 1)},
		{name: "maxPods below allocatable pods", pod: mk("p"), node: node, alloc: alloc, active: pods(mk("a")), maxPods: 1,
			want: out("OutOfpods", "pods", 1, 1, 1)},
		{name: "no pod limit at all", pod: mk("p"), node: node, alloc: rl("cpu", "1"), active: pods(mk("a"), mk("b")), want: admit},
		{name: "pod count checked before cpu", pod: mk("p", requests("cpu", "2")), node: node, alloc: alloc, active: pods(mk("a")), maxPods: 1,
			want: out("OutOfpods", "pods", 1, 1, 1)},
		{name: "pod count checked without allocatable", pod: mk("p"), node: node, active: pods(mk("a")), maxPods: 1,
			want: out("OutOfpods", "pods", 1, 1, 1)},

		// cpu, memory, ephemeral-storage.
		{name: "cpu exceeded", pod: mk("p", requests("cpu", "500m")), node: node, alloc: alloc,
			active: pods(mk("a", requests("cpu", "600m"))), maxPods: 110, want: out("OutOfcpu", "cpu", 500, 600, 1000)},
		{name: "cpu exactly fits", pod: mk("p", requests("cpu", "400m")), node: node, alloc: alloc,
			active: pods(mk("a", requests("cpu", "600m"))), maxPods: 110, want: admit},
		{name: "cpu alone exceeds allocatable", pod: mk("p", requests("cpu", "1500m")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 1500, 0, 1000)},
		{name: "memory exceeded", pod: mk("p", requests("memory", "512Mi")), node: node, alloc: alloc,
			active: pods(mk("a", requests("memory", "768Mi"))), maxPods: 110,
			want: out("OutOfmemory", "memory", 512<<20, 768<<20, 1<<30)},
		{name: "ephemeral storage exceeded", pod: mk("p", requests("ephemeral-storage", "11Gi")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfephemeral-storage", "ephemeral-storage", 11<<30, 0, 10<<30)},
		{name: "cpu reported before memory", pod: mk("p", requests("cpu", "2", "memory", "2Gi")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 2000, 0, 1000)},
		{name: "init container peak counts", pod: mk("p", requests("cpu", "100m"), initRequests(false, "cpu", "2")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 2000, 0, 1000)},
		{name: "sidecar adds to app containers", pod: mk("p", requests("cpu", "600m"), initRequests(true, "cpu", "500m")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 1100, 0, 1000)},
		{name: "overhead counts", pod: mk("p", requests("memory", "1Gi"), overhead("memory", "1Mi")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfmemory", "memory", 1<<30+1<<20, 0, 1<<30)},
		{name: "active pod init peak counts as used", pod: mk("p", requests("cpu", "500m")), node: node, alloc: alloc,
			active: pods(mk("a", initRequests(false, "cpu", "800m"))), maxPods: 110, want: out("OutOfcpu", "cpu", 500, 800, 1000)},
		{name: "best effort pod on a full node", pod: mk("p"), node: node, alloc: alloc,
			active: pods(mk("a", requests("cpu", "2"))), maxPods: 110, want: admit},
		{name: "allocatable unknown", pod: mk("p", requests("cpu", "64")), node: node, maxPods: 110, want: admit},
		{name: "cpu missing from allocatable", pod: mk("p", requests("cpu", "100m")), node: node, alloc: rl("memory", "1Gi"), maxPods: 110,
			want: out("OutOfcpu", "cpu", 100, 0, 0)},

		// Scalar resources.
		{name: "extended resource exceeded", pod: mk("p", requests("example.com/gpu", "2")), node: node, alloc: alloc,
			active: pods(mk("a", requests("example.com/gpu", "1"))), maxPods: 110, want: out("OutOfexample.com/gpu", "example.com/gpu", 2, 1, 2)},
		{name: "extended resource fits", pod: mk("p", requests("example.com/gpu", "1")), node: node, alloc: alloc,
			active: pods(mk("a", requests("example.com/gpu", "1"))), maxPods: 110, want: admit},
		{name: "extended resource not advertised is ignored", pod: mk("p", requests("example.com/fpga", "1")), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "hugepages not advertised", pod: mk("p", requests("hugepages-2Mi", "4Mi")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfhugepages-2Mi", "hugepages-2Mi", 4<<20, 0, 0)},

		// Critical pods skip resource checks.
		{name: "static pod skips resources", pod: mk("p", static, requests("cpu", "4")), node: node, alloc: alloc,
			active: pods(mk("a")), maxPods: 1, want: admit},
		{name: "mirror pod skips resources", pod: mk("p", mirrorPod, requests("cpu", "4")), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "system critical priority skips resources", pod: mk("p", priority(2_000_000_000), requests("cpu", "4")), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "high but not critical priority", pod: mk("p", priority(1_999_999_999), requests("cpu", "4")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 4000, 0, 1000)},

		// Node selector and required node affinity.
		{name: "node selector matches", pod: mk("p", nodeSelector("zone", "a", "tier", "gold")), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "node selector value differs", pod: mk("p", nodeSelector("zone", "b")), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "node selector label missing", pod: mk("p", nodeSelector("gpu", "yes")), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "In matches", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpIn, "b", "a")))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "In does not match", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpIn, "b", "c")))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "NotIn matches", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpNotIn, "b")))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "NotIn does not match", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpNotIn, "a")))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "Exists", pod: mk("p", affinity(exprs(req("tier", v1.NodeSelectorOpExists)))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "Exists missing", pod: mk("p", affinity(exprs(req("gpu", v1.NodeSelectorOpExists)))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "DoesNotExist", pod: mk("p", affinity(exprs(req("gpu", v1.NodeSelectorOpDoesNotExist)))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "DoesNotExist present", pod: mk("p", affinity(exprs(req("tier", v1.NodeSelectorOpDoesNotExist)))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "Gt matches", pod: mk("p", affinity(exprs(req("cores", v1.NodeSelectorOpGt, "4")))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "Gt does not match", pod: mk("p", affinity(exprs(req("cores", v1.NodeSelectorOpGt, "8")))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "Lt matches", pod: mk("p", affinity(exprs(req("cores", v1.NodeSelectorOpLt, "16")))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "Lt does not match", pod: mk("p", affinity(exprs(req("cores", v1.NodeSelectorOpLt, "8")))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "Gt with a non-integer value", pod: mk("p", affinity(exprs(req("cores", v1.NodeSelectorOpGt, "many")))), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "expressions of a term are ANDed", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpIn, "a"), req("tier", v1.NodeSelectorOpIn, "silver")))),
			node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "terms are ORed", pod: mk("p", affinity(exprs(req("zone", v1.NodeSelectorOpIn, "b")), exprs(req("tier", v1.NodeSelectorOpIn, "gold")))),
			node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "matchFields metadata.name matches", pod: mk("p", affinity(fieldsTerm(req("metadata.name", v1.NodeSelectorOpIn, "node-a")))),
			node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "matchFields metadata.name differs", pod: mk("p", affinity(fieldsTerm(req("metadata.name", v1.NodeSelectorOpIn, "node-b")))),
			node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "node selector and affinity must both match", pod: mk("p", nodeSelector("zone", "b"), affinity(exprs(req("tier", v1.NodeSelectorOpExists)))),
			node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "resources checked before affinity", pod: mk("p", nodeSelector("zone", "b"), requests("cpu", "2")), node: node, alloc: alloc, maxPods: 110,
			want: out("OutOfcpu", "cpu", 2000, 0, 1000)},
		{name: "static pod still needs affinity", pod: mk("p", static, nodeSelector("zone", "b")), node: node, alloc: alloc, maxPods: 110, want: nodeAffinity},
		{name: "no node skips affinity", pod: mk("p", nodeSelector("zone", "b")), alloc: alloc, maxPods: 110, want: admit},
		{name: "no node still checks resources", pod: mk("p", requests("cpu", "2")), alloc: alloc, maxPods: 110, want: out("OutOfcpu", "cpu", 2000, 0, 1000)},

		// Node name.
		{name: "bound to another node", pod: mk("p", func(p *v1.Pod) { p.Spec.NodeName = "node-b" }), node: node, alloc: alloc, maxPods: 110,
			want: Result{Reason: "NodeName", Message: "Predicate NodeName failed: node(s) didn't match the requested node name"}},
		{name: "no node name", pod: mk("p", func(p *v1.Pod) { p.Spec.NodeName = "" }), node: node, alloc: alloc, maxPods: 110, want: admit},

		// Host ports.
		{name: "same host port", pod: mk("p", port("", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("", v1.ProtocolTCP, 8080))), maxPods: 110, want: nodePorts},
		{name: "other protocol", pod: mk("p", port("", v1.ProtocolUDP, 8080)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: admit},
		{name: "other port", pod: mk("p", port("", "", 8081)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: admit},
		{name: "different host IPs", pod: mk("p", port("10.0.0.1", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("10.0.0.2", "", 8080))), maxPods: 110, want: admit},
		{name: "same host IP", pod: mk("p", port("10.0.0.1", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("10.0.0.1", "", 8080))), maxPods: 110, want: nodePorts},
		{name: "wanted on all addresses", pod: mk("p", port("0.0.0.0", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("10.0.0.2", "", 8080))), maxPods: 110, want: nodePorts},
		{name: "used on all addresses", pod: mk("p", port("10.0.0.1", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: nodePorts},
		{name: "container port without host port", pod: mk("p", port("", "", 0)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 0))), maxPods: 110, want: admit},
		{name: "regular init container port is not held", pod: mk("p", port("", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", initPort(false, 8080))), maxPods: 110, want: admit},
		{name: "sidecar port is held", pod: mk("p", port("", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", initPort(true, 8080))), maxPods: 110, want: nodePorts},
		{name: "sidecar port is wanted", pod: mk("p", initPort(true, 8080)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: nodePorts},
		{name: "own port on restart is not a conflict", pod: mk("p", port("", "", 8080)), node: node, alloc: alloc, active: pods(mk("p", port("", "", 8080))), maxPods: 110, want: admit},
		{name: "static pod still needs free ports", pod: mk("p", static, port("", "", 8080)), node: node, alloc: alloc, active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: nodePorts},

		// Taints.
		{name: "untolerated NoExecute", pod: mk("p"), node: mkNode(taint("dedicated", v1.TaintEffectNoExecute)), alloc: alloc, maxPods: 110, want: taintFailure},
		{name: "tolerated NoExecute", pod: mk("p", tolerate("dedicated", v1.TaintEffectNoExecute)), node: mkNode(taint("dedicated", v1.TaintEffectNoExecute)), alloc: alloc, maxPods: 110, want: admit},
		{name: "toleration for another effect", pod: mk("p", tolerate("dedicated", v1.TaintEffectNoSchedule)), node: mkNode(taint("dedicated", v1.TaintEffectNoExecute)), alloc: alloc, maxPods: 110, want: taintFailure},
		{name: "untolerated NoSchedule is the scheduler's", pod: mk("p"), node: mkNode(taint("dedicated", v1.TaintEffectNoSchedule)), alloc: alloc, maxPods: 110, want: admit},
		{name: "untolerated PreferNoSchedule", pod: mk("p"), node: mkNode(taint("dedicated", v1.TaintEffectPreferNoSchedule)), alloc: alloc, maxPods: 110, want: admit},
		{name: "static pod ignores taints", pod: mk("p", static), node: mkNode(taint("dedicated", v1.TaintEffectNoExecute)), alloc: alloc, maxPods: 110, want: admit},
		{name: "ports checked before taints", pod: mk("p", port("", "", 8080)), node: mkNode(taint("dedicated", v1.TaintEffectNoExecute)), alloc: alloc,
			active: pods(mk("a", port("", "", 8080))), maxPods: 110, want: nodePorts},

		// Operating system.
		{name: "os label of this node", pod: mk("p", osLabel(runtime.GOOS)), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "os label of another OS", pod: mk("p", osLabel(otherOS()), requests("cpu", "4")), node: node, alloc: alloc, maxPods: 110,
			want: Result{Reason: "PodOSSelectorNodeLabelDoesNotMatch", Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}},
		{name: "os field of this node", pod: mk("p", osField(v1.OSName(runtime.GOOS))), node: node, alloc: alloc, maxPods: 110, want: admit},
		{name: "os field of another OS", pod: mk("p", osField(v1.OSName(otherOS()))), alloc: alloc, maxPods: 110,
			want: Result{Reason: "PodOSNotSupported", Message: "Failed to admit pod as the OS field doesn't match node OS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			got := Admit(tt.pod, tt.node, tt.alloc, tt.active, tt.maxPods)
			if got != tt.want {
				t.Errorf("Admit() = %+v\nwant       %+v", got, tt.want)
			}
			if tt.pod.String() != before.String() {
				t.Error("Admit modified the pod")
			}
		})
	}
}

func TestReasonConstants(t *testing.T) {
	for got, want := range map[string]string{
		ReasonOutOfPods:             "OutOfpods",
		ReasonOutOfCPU:              "OutOfcpu",
		ReasonOutOfMemory:           "OutOfmemory",
		ReasonOutOfEphemeralStorage: "OutOfephemeral-storage",
	} {
		if got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
}
