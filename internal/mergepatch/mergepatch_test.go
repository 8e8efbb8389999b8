package mergepatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var (
	t1 = metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	t2 = metav1.NewTime(time.Date(2024, 5, 1, 10, 5, 0, 0, time.UTC))
)

// patchCase is an object before and after a change. noApply marks
// changes whose patch strategicpatch does not apply back to the new
// object (duplicate merge keys), where only the patch is compared.
type patchCase struct {
	name     string
	old, new any
	noApply  bool
	// want, when set, is the patch expected (checked besides the
	// comparison with strategicpatch).
	want string
}

// runCases checks each case's patch against strategicpatch's and that it
// applies to give the new object.
func runCases(t *testing.T, dataStruct any, cases []patchCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, mod := mustJSON(t, c.old), mustJSON(t, c.new)
			patch := comparePatch(t, old, mod, dataStruct)
			if patch == nil {
				t.Fatal("no patch")
			}
			t.Logf("patch: %s", patch)
			if c.want != "" && !jsonEqual(patch, []byte(c.want)) {
				t.Errorf("patch %s, want %s", patch, c.want)
			}
			if !c.noApply {
				checkApplies(t, old, mod, patch, dataStruct)
			}
		})
	}
}

func podCond(typ v1.PodConditionType, status v1.ConditionStatus, at metav1.Time) v1.PodCondition {
	return v1.PodCondition{Type: typ, Status: status, LastTransitionTime: at}
}

func running(name string, ready bool, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{
		Name: name, Ready: ready, RestartCount: restarts, Image: "img:" + name, ImageID: "sha256:" + name,
		ContainerID: "containerd://" + name,
		State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t1}},
	}
}

func basePodStatus() v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			podCond(v1.PodInitialized, v1.ConditionTrue, t1),
			podCond(v1.PodReady, v1.ConditionFalse, t1),
			podCond(v1.ContainersReady, v1.ConditionFalse, t1),
			podCond(v1.PodScheduled, v1.ConditionTrue, t1),
		},
		HostIP:            "10.0.0.1",
		HostIPs:           []v1.HostIP{{IP: "10.0.0.1"}},
		PodIP:             "192.168.1.5",
		PodIPs:            []v1.PodIP{{IP: "192.168.1.5"}},
		StartTime:         &t1,
		QOSClass:          v1.PodQOSBurstable,
		ContainerStatuses: []v1.ContainerStatus{running("app", false, 0), running("sidecar", false, 0)},
	}
}

// statusPod is a pod the way the status syncer encodes it: only its status,
// the new one with the UID.
func statusPod(uid types.UID, s v1.PodStatus) v1.Pod {
	return v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: s}
}

func TestPodStatus(t *testing.T) {
	edit := func(f func(*v1.PodStatus)) v1.PodStatus {
		s := basePodStatus()
		f(&s)
		return s
	}
	base := v1.Pod{Status: basePodStatus()}
	cases := []patchCase{
		{name: "unchanged", old: base, new: base, want: `{}`},
		{name: "uid only", old: base, new: statusPod("u1", basePodStatus()), want: `{"metadata":{"uid":"u1"}}`},
		{name: "condition changed", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions[1] = podCond(v1.PodReady, v1.ConditionTrue, t2)
			s.Conditions[2] = podCond(v1.ContainersReady, v1.ConditionTrue, t2)
		}))},
		{name: "condition added", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions, podCond(v1.DisruptionTarget, v1.ConditionTrue, t2))
		}))},
		{name: "condition added in the middle", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions[:1:1], append([]v1.PodCondition{podCond("PodReadyToStartContainers", v1.ConditionTrue, t2)}, s.Conditions[1:]...)...)
		}))},
		{name: "condition removed", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions[:1:1], s.Conditions[2:]...)
		}))},
		{name: "conditions reordered", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions[0], s.Conditions[3] = s.Conditions[3], s.Conditions[0]
		}))},
		{name: "conditions reordered without uid", old: base, new: v1.Pod{Status: edit(func(s *v1.PodStatus) {
			s.Conditions[1], s.Conditions[2] = s.Conditions[2], s.Conditions[1]
		})}},
		{name: "first conditions", old: v1.Pod{Status: v1.PodStatus{Phase: v1.PodPending}}, new: statusPod("u1", basePodStatus())},
		{name: "all conditions removed", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) { s.Conditions = nil }))},
		{name: "condition removed and added", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions[3] = podCond("Custom", v1.ConditionUnknown, t2)
		}))},
		{name: "pod IPs", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: "fd00::5"})
		}))},
		{name: "pod IPs cleared", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.PodIP, s.PodIPs = "", nil
		}))},
		{name: "container terminated", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Phase = v1.PodFailed
			s.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: t1, FinishedAt: t2}}
			s.ContainerStatuses[0].LastTerminationState = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: t1}}
		}))},
		{name: "container ready and restarted", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.ContainerStatuses[1] = running("sidecar", true, 3)
			s.ContainerStatuses[1].Started = ptr.To(true)
		}))},
		{name: "container added and removed", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.ContainerStatuses = []v1.ContainerStatus{running("other", true, 0), running("app", false, 0)}
		}))},
		{name: "init and ephemeral containers", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed"}}}}
			s.EphemeralContainerStatuses = []v1.ContainerStatus{running("debug", false, 0)}
		}))},
		{name: "resize in progress", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, LastTransitionTime: t2})
			s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")}
			s.ContainerStatuses[0].Resources = &v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			}
		}))},
		{name: "resize done", old: v1.Pod{Status: edit(func(s *v1.PodStatus) {
			s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: "Deferred", LastTransitionTime: t1})
			s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("256Mi")}
		})}, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		}))},
		{name: "resource claim statuses", old: v1.Pod{Status: edit(func(s *v1.PodStatus) {
			s.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("pod-gpu-1")}, {Name: "net"}}
		})}, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu"}, {Name: "net", ResourceClaimName: ptr.To("pod-net-1")}}
		}))},
		{name: "message and reason", old: base, new: statusPod("u1", edit(func(s *v1.PodStatus) {
			s.Phase, s.Reason, s.Message = v1.PodFailed, "Evicted", "The node was low on resource: memory."
		}))},
	}
	runCases(t, v1.Pod{}, cases)
}

func nodeCond(typ v1.NodeConditionType, status v1.ConditionStatus, beat metav1.Time) v1.NodeCondition {
	return v1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: beat, LastTransitionTime: t1, Reason: "Kubelet" + string(typ)}
}

func baseNode() v1.Node {
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n1", UID: "node-uid", ResourceVersion: "7",
			Labels:      map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Spec: v1.NodeSpec{PodCIDR: "192.168.1.0/24", PodCIDRs: []string{"192.168.1.0/24"}},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110"),
			},
			Allocatable: v1.ResourceList{
				v1.ResourceCPU: resource.MustParse("3800m"), v1.ResourceMemory: resource.MustParse("7Gi"), v1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []v1.NodeCondition{
				nodeCond(v1.NodeMemoryPressure, v1.ConditionFalse, t1),
				nodeCond(v1.NodeDiskPressure, v1.ConditionFalse, t1),
				nodeCond(v1.NodePIDPressure, v1.ConditionFalse, t1),
				nodeCond(v1.NodeReady, v1.ConditionTrue, t1),
			},
			Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n1"}},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID: "m", SystemUUID: "s", BootID: "b1", KernelVersion: "6.1.0", OSImage: "Debian",
				ContainerRuntimeVersion: "containerd://2.0.0", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
			},
			Images: []v1.ContainerImage{
				{Names: []string{"registry.k8s.io/pause@sha256:1", "registry.k8s.io/pause:3.10"}, SizeBytes: 300000},
				{Names: []string{"nginx:1"}, SizeBytes: 50000000},
			},
			VolumesInUse:    []v1.UniqueVolumeName{"kubernetes.io/csi/a^1"},
			VolumesAttached: []v1.AttachedVolume{{Name: "kubernetes.io/csi/a^1", DevicePath: "/dev/a"}},
		},
	}
}

func TestNodeStatus(t *testing.T) {
	edit := func(f func(*v1.Node)) v1.Node {
		n := baseNode()
		f(&n)
		return n
	}
	base := baseNode()
	cases := []patchCase{
		{name: "unchanged", old: base, new: base, want: `{}`},
		{name: "heartbeat", old: base, new: edit(func(n *v1.Node) {
			for i := range n.Status.Conditions {
				n.Status.Conditions[i].LastHeartbeatTime = t2
			}
		})},
		{name: "not ready", old: base, new: edit(func(n *v1.Node) {
			n.Status.Conditions[3] = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, LastHeartbeatTime: t2, LastTransitionTime: t2, Reason: "KubeletNotReady", Message: "runtime down"}
		})},
		{name: "condition added", old: base, new: edit(func(n *v1.Node) {
			n.Status.Conditions = append(n.Status.Conditions[:3:3], nodeCond("NetworkUnavailable", v1.ConditionFalse, t2), n.Status.Conditions[3])
		})},
		{name: "condition removed", old: base, new: edit(func(n *v1.Node) {
			n.Status.Conditions = n.Status.Conditions[1:]
		})},
		{name: "address changed", old: base, new: edit(func(n *v1.Node) {
			n.Status.Addresses[0].Address = "10.0.0.2"
		})},
		{name: "address added", old: base, new: edit(func(n *v1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "1.2.3.4"})
		})},
		{name: "second internal IP", old: base, noApply: true, new: edit(func(n *v1.Node) {
			n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "fd00::1"}, {Type: v1.NodeHostName, Address: "n1"}}
		})},
		{name: "first addresses", old: edit(func(n *v1.Node) { n.Status.Addresses = nil }), new: base},
		{name: "capacity and allocatable", old: base, new: edit(func(n *v1.Node) {
			n.Status.Capacity[v1.ResourceMemory] = resource.MustParse("16Gi")
			n.Status.Capacity["hugepages-2Mi"] = resource.MustParse("0")
			delete(n.Status.Allocatable, v1.ResourcePods)
			n.Status.Allocatable[v1.ResourceEphemeralStorage] = resource.MustParse("100Gi")
		})},
		{name: "images", old: base, new: edit(func(n *v1.Node) {
			n.Status.Images = append([]v1.ContainerImage{{Names: []string{"busybox:1"}, SizeBytes: 1000}}, n.Status.Images[:1]...)
		})},
		{name: "volumes in use and attached", old: base, new: edit(func(n *v1.Node) {
			n.Status.VolumesInUse = append(n.Status.VolumesInUse, "kubernetes.io/csi/b^2")
			n.Status.VolumesAttached = nil
		})},
		{name: "node info", old: base, new: edit(func(n *v1.Node) {
			n.Status.NodeInfo.BootID = "b2"
			n.Status.NodeInfo.KernelVersion = "6.2.0"
			n.Status.NodeInfo.Swap = &v1.NodeSwapStatus{Capacity: ptr.To[int64](1 << 30)}
		})},
		{name: "runtime handlers and features", old: base, new: edit(func(n *v1.Node) {
			n.Status.RuntimeHandlers = []v1.NodeRuntimeHandler{{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true)}}}
			n.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}
		})},
		{name: "daemon endpoints", old: base, new: edit(func(n *v1.Node) {
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10251
		})},
		{name: "pod CIDRs", old: base, new: edit(func(n *v1.Node) {
			n.Spec.PodCIDRs = append(n.Spec.PodCIDRs, "fd00:1::/64")
		})},
		{name: "taints", old: base, new: edit(func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoSchedule}}
			n.Spec.Unschedulable = true
		})},
	}
	runCases(t, v1.Node{}, cases)
}

func baseClaim() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", UID: "pvc-uid", ResourceVersion: "3"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}},
			VolumeName:  "pv-1",
		},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:       v1.ClaimBound,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []v1.PersistentVolumeClaimCondition{
				{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue, LastTransitionTime: t1},
			},
			AllocatedResources:        v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
			AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending},
		},
	}
}

func TestClaimStatus(t *testing.T) {
	edit := func(f func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
		c := baseClaim()
		f(c)
		return c
	}
	base := baseClaim()
	cases := []patchCase{
		{name: "unchanged", old: base, new: base, want: `{}`},
		{name: "resize done", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
			c.Status.Conditions = nil
			c.Status.AllocatedResourceStatuses = nil
		})},
		{name: "resize in progress", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.AllocatedResourceStatuses[v1.ResourceStorage] = v1.PersistentVolumeClaimNodeResizeInProgress
		})},
		{name: "resize failed", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.AllocatedResourceStatuses[v1.ResourceStorage] = v1.PersistentVolumeClaimNodeResizeInfeasible
			c.Status.Conditions = append(c.Status.Conditions, v1.PersistentVolumeClaimCondition{
				Type: v1.PersistentVolumeClaimNodeResizeError, Status: v1.ConditionTrue, Message: "resize2fs failed", LastTransitionTime: t2,
			})
		})},
		{name: "condition replaced", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue, LastProbeTime: t2}}
		})},
		{name: "allocated resources", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.AllocatedResources = v1.ResourceList{v1.ResourceStorage: resource.MustParse("4Gi"), "example.com/iops": resource.MustParse("100")}
		})},
		{name: "modify volume status", old: base, new: edit(func(c *v1.PersistentVolumeClaim) {
			c.Status.CurrentVolumeAttributesClassName = ptr.To("gold")
			c.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "platinum", Status: v1.PersistentVolumeClaimModifyVolumeInProgress}
		})},
	}
	runCases(t, &v1.PersistentVolumeClaim{}, cases)
}

func TestMetadata(t *testing.T) {
	meta := func(f func(*metav1.ObjectMeta)) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "u",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"a": "1"},
			Finalizers:  []string{"example.com/a", "example.com/b"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)},
				{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "node-uid"},
			},
		}}
		f(&p.ObjectMeta)
		return p
	}
	base := meta(func(*metav1.ObjectMeta) {})
	cases := []patchCase{
		{name: "labels", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Labels["app"] = "api"
			delete(m.Labels, "tier")
			m.Labels["new"] = ""
		}), want: `{"metadata":{"labels":{"app":"api","new":"","tier":null}}}`},
		{name: "labels removed", old: base, new: meta(func(m *metav1.ObjectMeta) { m.Labels = nil })},
		{name: "annotations", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"b": `{"json":true}`, "html": "<a&b>"}
		})},
		{name: "finalizer added", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Finalizers = append(m.Finalizers, "example.com/c")
		})},
		{name: "finalizer added first", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Finalizers = append([]string{"example.com/0"}, m.Finalizers...)
		})},
		{name: "finalizer removed", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Finalizers = m.Finalizers[1:]
		})},
		{name: "finalizers reordered", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.Finalizers = []string{"example.com/b", "example.com/a"}
		})},
		{name: "finalizers cleared", old: base, new: meta(func(m *metav1.ObjectMeta) { m.Finalizers = nil })},
		{
			// Unsorted and unchanged: the order directive is still
			// emitted, comparing the sorted old list with the new one.
			name: "unsorted finalizers unchanged",
			old:  meta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"z", "a"} }),
			new:  meta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"z", "a"} }),
			want: `{"metadata":{"$setElementOrder/finalizers":["z","a"]}}`,
		},
		{name: "duplicate finalizer removed", noApply: true,
			old: meta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"b", "a", "b", "c", "a"} }),
			new: meta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"c"} }),
		},
		{name: "owner reference changed", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true)
		})},
		{name: "owner reference removed", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.OwnerReferences = m.OwnerReferences[1:]
		}), want: `{"metadata":{"$setElementOrder/ownerReferences":[{"uid":"node-uid"}],"ownerReferences":[{"$patch":"delete","uid":"rs-uid"}]}}`},
		{name: "owner references replaced", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n2", UID: "node-2"}, m.OwnerReferences[0]}
		})},
		{name: "deletion", old: base, new: meta(func(m *metav1.ObjectMeta) {
			m.DeletionTimestamp = &t2
			m.DeletionGracePeriodSeconds = ptr.To[int64](30)
			m.ResourceVersion = "9"
		})},
	}
	runCases(t, v1.Pod{}, cases)
}

func TestPodSpec(t *testing.T) {
	spec := func(f func(*v1.PodSpec)) v1.Pod {
		p := v1.Pod{Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app", Image: "nginx",
				Ports: []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 443, Name: "https"}},
				Env:   []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}},
				VolumeMounts: []v1.VolumeMount{
					{Name: "data", MountPath: "/data"},
				},
			}},
			Volumes: []v1.Volume{
				{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
			},
			Tolerations: []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
		}}
		f(&p.Spec)
		return p
	}
	base := spec(func(*v1.PodSpec) {})
	cases := []patchCase{
		{name: "volume source switched", old: base, new: spec(func(s *v1.PodSpec) {
			s.Volumes[0].VolumeSource = v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}
		})},
		{name: "volume source changed in place", old: base, new: spec(func(s *v1.PodSpec) {
			s.Volumes[1].ConfigMap.Optional = ptr.To(true)
		})},
		{name: "volume added", old: base, new: spec(func(s *v1.PodSpec) {
			s.Volumes = append(s.Volumes, v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
		})},
		{name: "ports by number", old: base, new: spec(func(s *v1.PodSpec) {
			s.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8443, Name: "https"}, {ContainerPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 9}}
		})},
		{name: "env", old: base, new: spec(func(s *v1.PodSpec) {
			s.Containers[0].Env = []v1.EnvVar{{Name: "B", Value: "3"}, {Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		})},
		{name: "container added", old: base, new: spec(func(s *v1.PodSpec) {
			s.Containers = append(s.Containers, v1.Container{Name: "sidecar", Image: "busybox", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}})
		})},
		{name: "containers emptied", old: base, new: spec(func(s *v1.PodSpec) {
			s.Containers = []v1.Container{}
		}), want: `{"spec":{"containers":[{"$patch":"delete","name":"app"}]}}`},
		{name: "tolerations replaced", old: base, new: spec(func(s *v1.PodSpec) {
			s.Tolerations = append(s.Tolerations, v1.Toleration{Key: "k2", Operator: v1.TolerationOpEqual, Value: "v"})
		})},
	}
	runCases(t, v1.Pod{}, cases)
}

// TestRawDocuments covers documents no Go encoding makes: each patch (or
// failure) must be strategicpatch's.
func TestRawDocuments(t *testing.T) {
	cases := []struct {
		name, old, new string
		fails          bool
	}{
		{name: "empty documents", old: ``, new: ``},
		{name: "null documents", old: `null`, new: `{"metadata":{"name":"a"}}`},
		{name: "not an object", old: `[]`, new: `{}`, fails: true},
		{name: "bad JSON", old: `{`, new: `{}`, fails: true},
		{name: "type changed", old: `{"spec":{"containers":[]}}`, new: `{"spec":{"containers":{}}}`},
		{name: "null value", old: `{"metadata":{"labels":null}}`, new: `{"metadata":{"labels":{"a":"b"}}}`},
		{name: "unknown field unchanged", old: `{"x":{"a":1}}`, new: `{"x":{"a":1}}`},
		{name: "unknown field changed", old: `{"x":{"a":1}}`, new: `{"x":{"a":2}}`, fails: true},
		{name: "unknown list changed", old: `{"x":[1]}`, new: `{"x":[2]}`, fails: true},
		{name: "case-insensitive field", old: `{"Metadata":{"Finalizers":["a"]}}`, new: `{"Metadata":{"Finalizers":["b"]}}`},
		{name: "object under a map", old: `{"metadata":{"labels":{"a":{"b":1}}}}`, new: `{"metadata":{"labels":{"a":{"b":2}}}}`, fails: true},
		{name: "directive", old: `{"$patch":"replace"}`, new: `{"$patch":"delete"}`},
		{name: "bad directive", old: `{"$patch":1}`, new: `{"$patch":"delete"}`, fails: true},
		{name: "merge list emptied", old: `{"status":{"conditions":[{"type":"a"}]}}`, new: `{"status":{"conditions":[]}}`},
		{name: "scalar merge list emptied", old: `{"metadata":{"finalizers":["a"]}}`, new: `{"metadata":{"finalizers":[]}}`},
		{name: "missing merge key", old: `{"status":{"conditions":[{"type":"a"}]}}`, new: `{"status":{"conditions":[{"status":"a"}]}}`, fails: true},
		{name: "mixed element types", old: `{"status":{"conditions":[{"type":"a"}]}}`, new: `{"status":{"conditions":["a"]}}`, fails: true},
		{name: "list of lists", old: `{"metadata":{"finalizers":[["a"]]}}`, new: `{"metadata":{"finalizers":[["b"]]}}`, fails: true},
		{name: "null element first", old: `{"metadata":{"finalizers":[null]}}`, new: `{"metadata":{"finalizers":["b"]}}`, fails: true},
		{name: "object merge keys", old: `{"status":{"conditions":[{"type":{"a":1}}]}}`, new: `{"status":{"conditions":[{"type":{"a":1},"x":1}]}}`, fails: true},
		{name: "numbers", old: `{"status":{"conditions":[{"type":1},{"type":1.5}]}}`, new: `{"status":{"conditions":[{"type":1.5},{"type":10}]}}`},
		{name: "number merge keys", old: `{"status":{"conditions":[{"type":1},{"type":2}]}}`, new: `{"status":{"conditions":[{"type":10},{"type":2},{"type":1e21}]}}`},
		{name: "mixed number scalars", old: `{"metadata":{"finalizers":[1.5,1e21,3]}}`, new: `{"metadata":{"finalizers":[1e21,2.5]}}`, fails: true},
		{name: "float scalars", old: `{"metadata":{"finalizers":[1.5,1e21,3.5]}}`, new: `{"metadata":{"finalizers":[1e21,2.5]}}`},
		{name: "large integers", old: `{"metadata":{"generation":9007199254740993}}`, new: `{"metadata":{"generation":9007199254740995}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, panicked, upErr := upstream([]byte(c.old), []byte(c.new), v1.Pod{})
			if upFails := upErr != nil || panicked != nil; upFails != c.fails {
				t.Fatalf("strategicpatch fails: %v (%v, panic %v), case says %v", upFails, upErr, panicked, c.fails)
			}
			comparePatch(t, []byte(c.old), []byte(c.new), v1.Pod{})
		})
	}
}

// TestBadDocument: a document that is no JSON object is ErrBadJSONDoc,
// with the decoder's reason kept.
func TestBadDocument(t *testing.T) {
	for _, doc := range []string{`{`, `[]`, `"a"`} {
		_, err := CreateTwoWayMergePatch([]byte(doc), []byte(`{}`), v1.Pod{})
		if !errors.Is(err, ErrBadJSONDoc) {
			t.Errorf("%s: error %v, want ErrBadJSONDoc", doc, err)
			continue
		}
		if err.Error() == ErrBadJSONDoc.Error() {
			t.Errorf("%s: error %q does not say why", doc, err)
		}
	}
}

func TestDataStruct(t *testing.T) {
	for _, ds := range []any{nil, 1, "x", []v1.Pod{}, map[string]any{}} {
		if _, err := CreateTwoWayMergePatch([]byte(`{}`), []byte(`{}`), ds); err == nil {
			t.Errorf("data struct %T: no error", ds)
		}
	}
	for _, ds := range []any{v1.Pod{}, &v1.Pod{}} {
		if p, err := CreateTwoWayMergePatch([]byte(`{"a":1}`), []byte(`{"a":1}`), ds); err != nil || string(p) != `{}` {
			t.Errorf("data struct %T: %s, %v", ds, p, err)
		}
	}
}

// embedded types exercise the field lookup: promotion through embedded
// structs, json tags winning over Go names, names hidden by ambiguity.
type (
	inner struct {
		Tagged []string `json:"tagged" patchStrategy:"merge"`
		Plain  []string
		Shadow []string `json:"shadow" patchStrategy:"merge"`
		Both   []string `json:"both" patchStrategy:"merge"`
	}
	other struct {
		Both []string `json:"both" patchStrategy:"merge"`
	}
	deeper struct {
		inner
	}
	Exported struct {
		Exp []string `json:"exp" patchStrategy:"merge"`
	}
	outer struct {
		Inline  inner    `json:",inline"`
		Shadow  []string `json:"shadow"`
		Nested  *Exported
		Renamed []string `json:"-"`
		deeper
		other
		Exported
	}
)

func TestFieldLookup(t *testing.T) {
	docs := []string{
		`{"tagged":["b","a"],"Plain":["b","a"],"shadow":["b","a"],"both":["b","a"],"exp":["b","a"],"Nested":{"exp":["b","a"]},"Renamed":["x"]}`,
		`{"tagged":["a"],"Plain":["a"],"shadow":["a"],"both":["a"],"exp":["a","c"],"Nested":{"exp":["a"]},"Renamed":["y"]}`,
		`{"TAGGED":["a"],"plain":["c"],"Shadow":["a"],"BOTH":["a"],"Exp":["a","c"],"nested":{"EXP":["a"]}}`,
	}
	for _, ds := range []any{outer{}, &outer{}} {
		for _, a := range docs {
			for _, b := range docs {
				comparePatch(t, []byte(a), []byte(b), ds)
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	old, mod := mustJSON(t, baseNode()), mustJSON(t, func() v1.Node {
		n := baseNode()
		n.Status.Conditions = n.Status.Conditions[1:]
		n.Status.Capacity[v1.ResourceCPU] = resource.MustParse("8")
		return n
	}())
	want := comparePatch(t, old, mod, v1.Node{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			ds := any(v1.Node{})
			if i%2 == 1 {
				ds = &v1.Node{}
			}
			for range 50 {
				got, err := CreateTwoWayMergePatch(old, mod, ds)
				if err != nil || string(got) != string(want) {
					errs <- fmt.Errorf("got %s, %v; want %s", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPatchIsCompact checks the encoding: keys sorted, no spaces, HTML
// characters escaped as encoding/json does.
func TestPatchIsCompact(t *testing.T) {
	p, err := CreateTwoWayMergePatch([]byte(`{"metadata":{"annotations":{"b":"1","a":"1"}}}`), []byte(`{"metadata":{"annotations":{"a":"<x>","c":"&"}}}`), v1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{"a": "<x>", "b": nil, "c": "&"}}})
	if string(p) != string(want) || strings.ContainsAny(string(p), " <>&") {
		t.Errorf("patch %s, want %s", p, want)
	}
}
