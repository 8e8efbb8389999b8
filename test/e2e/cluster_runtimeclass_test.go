//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// testRuntimeHandler is the second runc handler of the private containerd
// (hack/env.sh).
const testRuntimeHandler = "heartlet-test"

// runtimeClass returns a RuntimeClass named name with handler and
// overhead.
func runtimeClass(name, handler string, overhead v1.ResourceList) *nodev1.RuntimeClass {
	rc := &nodev1.RuntimeClass{Handler: handler}
	rc.APIVersion, rc.Kind, rc.Name = "node.k8s.io/v1", "RuntimeClass", name
	if overhead != nil {
		rc.Overhead = &nodev1.Overhead{PodFixed: overhead}
	}
	return rc
}

// sandboxHandler is the runtime handler the runtime reports for a sandbox:
// the listing's field, else the handler in containerd's verbose status.
func (c *cri) sandboxHandler(t *testing.T, sb *runtimeapi.PodSandbox) string {
	t.Helper()
	if sb.RuntimeHandler != "" {
		return sb.RuntimeHandler
	}
	ctx, cancel := ctx30()
	defer cancel()
	st, err := c.rs.PodSandboxStatus(ctx, sb.Id, true)
	if err != nil {
		t.Fatalf("status of sandbox %s: %v", sb.Id, err)
	}
	if h := st.GetStatus().GetRuntimeHandler(); h != "" {
		return h
	}
	var info struct {
		RuntimeHandler string `json:"runtimeHandler"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("decode verbose status of sandbox %s: %v", sb.Id, err)
	}
	return info.RuntimeHandler
}

// A pod's RuntimeClass decides the CRI runtime handler of its sandbox, and
// the overhead the API server copies from it into spec.overhead is added
// to the pod cgroup's limits. A RuntimeClass whose handler the runtime does
// not know, or one that does not exist, leaves the pod Pending with
// FailedCreatePodSandBox events (upstream's behaviour: the sandbox
// creation fails and is retried).
func TestClusterRuntimeClass(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	c := newCRI(t)

	t.Run("handler and overhead", func(t *testing.T) {
		createObject(t, runtimeClass("heartlet-e2e-rc", testRuntimeHandler, v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse("100m"),
			v1.ResourceMemory: resource.MustParse("16Mi"),
		}), "runtimeclass", "heartlet-e2e-rc")
		createPod(t, apiPod("api-runtimeclass", func(p *v1.Pod) {
			p.Spec.RuntimeClassName = ptrTo("heartlet-e2e-rc")
			p.Spec.Containers[0].Resources.Limits = v1.ResourceList{
				v1.ResourceCPU:    resource.MustParse("500m"),
				v1.ResourceMemory: resource.MustParse("64Mi"),
			}
		}))
		pod := waitAPIPodRunning(t, h, "api-runtimeclass")
		if got := pod.Spec.Overhead.Memory().String(); got != "16Mi" {
			t.Fatalf("spec.overhead memory = %s, want 16Mi (the API server's RuntimeClass admission)", got)
		}
		sbs := c.podSandboxes(t, string(pod.UID))
		if len(sbs) != 1 {
			t.Fatalf("%d sandboxes, want 1", len(sbs))
		}
		if got := c.sandboxHandler(t, sbs[0]); got != testRuntimeHandler {
			t.Errorf("sandbox runtime handler = %q, want %q", got, testRuntimeHandler)
		}
		// Guaranteed: 64Mi + 16Mi and 500m + 100m on the pod cgroup.
		mem := readInt(t, filepath.Join(podCgroupDir("memory", v1.PodQOSGuaranteed, string(pod.UID)), "memory.limit_in_bytes"))
		if mem != 80<<20 {
			t.Errorf("pod cgroup memory limit = %d, want %d (limits plus overhead)", mem, 80<<20)
		}
		quota := readInt(t, filepath.Join(podCgroupDir("cpu", v1.PodQOSGuaranteed, string(pod.UID)), "cpu.cfs_quota_us"))
		if quota != 60000 {
			t.Errorf("pod cgroup cfs quota = %d, want 60000 (600m: limits plus overhead)", quota)
		}
	})

	t.Run("unknown handler", func(t *testing.T) {
		createObject(t, runtimeClass("heartlet-e2e-nohandler", "no-such-handler", nil), "runtimeclass", "heartlet-e2e-nohandler")
		createPod(t, apiPod("api-runtimeclass-unknown", func(p *v1.Pod) {
			p.Spec.RuntimeClassName = ptrTo("heartlet-e2e-nohandler")
		}))
		wantSandboxFailure(t, h, c, "api-runtimeclass-unknown", "no-such-handler")
	})

	t.Run("missing RuntimeClass", func(t *testing.T) {
		// The API server refuses to create a pod that names a missing
		// RuntimeClass, so the class is deleted while the pod waits for
		// scheduling behind a gate, which is lifted then.
		createObject(t, runtimeClass("heartlet-e2e-gone", testRuntimeHandler, nil), "runtimeclass", "heartlet-e2e-gone")
		createPod(t, apiPod("api-runtimeclass-gone", func(p *v1.Pod) {
			p.Spec.RuntimeClassName = ptrTo("heartlet-e2e-gone")
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "heartlet.e2e/hold"}}
		}))
		mustKubectl(t, "delete", "runtimeclass", "heartlet-e2e-gone", "--wait=true")
		mustKubectl(t, "patch", "pod", "-n", "default", "api-runtimeclass-gone", "--type=json",
			"-p", `[{"op":"remove","path":"/spec/schedulingGates"}]`)
		wantSandboxFailure(t, h, c, "api-runtimeclass-gone", `runtimeclass.node.k8s.io "heartlet-e2e-gone" not found`)
	})
}

// wantSandboxFailure waits for a FailedCreatePodSandBox event naming want
// on pod name, and checks that the pod stays Pending without a sandbox.
func wantSandboxFailure(t *testing.T, h *heartlet, c *cri, name, want string) {
	t.Helper()
	waitFor(t, podStartTimeout, "a FailedCreatePodSandBox event naming "+want, func() (bool, string) {
		evs, err := podEvents(name, "FailedCreatePodSandBox")
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs {
			if strings.Contains(e.Message, want) {
				t.Logf("event: %s", e.Message)
				return true, ""
			}
		}
		return false, "events: " + describeEvents(evs)
	})
	// Retried, and still not running.
	time.Sleep(5 * time.Second)
	p, err := getAPIPod(name)
	if err != nil || p == nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", p.Status.Phase)
	}
	for _, sb := range c.podSandboxes(t, string(p.UID)) {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("sandbox %s is ready, want none", sb.Id)
		}
	}
	if !h.running() {
		t.Fatalf("heartlet exited: %v", h.err)
	}
}

func describeEvents(evs []v1.Event) string {
	var parts []string
	for _, e := range evs {
		parts = append(parts, e.Reason+": "+e.Message)
	}
	return strings.Join(parts, "; ")
}
