//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod created through the API is scheduled onto the node, runs, and its
// status reaches the API.
func TestClusterPodRuns(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	createPod(t, apiPod("api-run", nil))
	p := waitAPIPodRunning(t, h, "api-run")

	if p.Spec.NodeName != clusterNode {
		t.Errorf("spec.nodeName = %q, want %q", p.Spec.NodeName, clusterNode)
	}
	if net.ParseIP(p.Status.PodIP) == nil || len(p.Status.PodIPs) == 0 {
		t.Errorf("status.podIP %q / podIPs %v", p.Status.PodIP, p.Status.PodIPs)
	}
	if net.ParseIP(p.Status.HostIP) == nil {
		t.Errorf("status.hostIP %q is not an IP", p.Status.HostIP)
	}
	if p.Status.StartTime == nil {
		t.Error("status.startTime is not set")
	}
	if p.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("status.qosClass = %q, want BestEffort", p.Status.QOSClass)
	}
	for _, ct := range []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if got := podCondition(p, ct); got != v1.ConditionTrue {
			t.Errorf("condition %s = %s, want True", ct, got)
		}
	}
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("%d container statuses, want 1", len(p.Status.ContainerStatuses))
	}
	cs := p.Status.ContainerStatuses[0]
	if !strings.HasPrefix(cs.ContainerID, "containerd://") {
		t.Errorf("containerID = %q, want containerd://...", cs.ContainerID)
	}
	if !cs.Ready || cs.State.Running == nil || cs.Name != "main" || cs.ImageID == "" {
		t.Errorf("container status %+v: want main, ready, running, with an imageID", cs)
	}
	c := newCRI(t)
	var found bool
	for _, ctr := range c.podContainers(t, string(p.UID), "main") {
		found = found || ctr.Id == containerID(cs.ContainerID)
	}
	if !found {
		t.Errorf("no CRI container %s for pod uid %s", cs.ContainerID, p.UID)
	}
}

// kubectl delete stops the pod within its grace period and the object
// disappears from the API; a pod that ignores SIGTERM is killed once the
// grace period ends.
func TestClusterPodGracefulDelete(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	tests := []struct {
		name    string
		script  string
		grace   int64
		minTook time.Duration // deletion takes at least this long
		maxTook time.Duration // and at most this long
	}{
		{name: "api-del-quick", script: sleeper, grace: 30, maxTook: 20 * time.Second},
		{name: "api-del-stubborn", script: `trap '' TERM; while true; do sleep 1; done`, grace: 4,
			minTook: 3 * time.Second, maxTook: 25 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			grace := tt.grace
			createPod(t, apiPod(tt.name, func(p *v1.Pod) {
				p.Spec.TerminationGracePeriodSeconds = &grace
				p.Spec.Containers = []v1.Container{shContainer("main", tt.script)}
			}))
			p := waitAPIPodRunning(t, h, tt.name)
			start := time.Now()
			mustKubectl(t, "delete", "pod", "-n", "default", tt.name, "--wait=true", "--timeout=2m")
			took := time.Since(start)
			if took > tt.maxTook || took < tt.minTook {
				t.Errorf("deletion took %v, want between %v and %v (grace %ds)", took, tt.minTook, tt.maxTook, tt.grace)
			}
			if got, err := getAPIPod(tt.name); err != nil || got != nil {
				t.Errorf("pod still in the API after deletion (err %v)", err)
			}
			c := newCRI(t)
			waitFor(t, podRemoveTimeout, "the pod's containers to stop", func() (bool, string) {
				for _, ctr := range c.podContainers(t, string(p.UID), "") {
					if st, err := c.status(ctr.Id); err == nil && st.GetFinishedAt() == 0 {
						return false, "container " + ctr.Id + " still running"
					}
				}
				return true, ""
			})
		})
	}
}

// With maxPods: 2, a third pod bound to the node is rejected by admission:
// Failed with reason OutOfpods. The pods name the node directly, as the
// scheduler would not place the third one.
func TestClusterMaxPods(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{config: "maxPods: 2\n"})
	bound := func(p *v1.Pod) { p.Spec.NodeName = clusterNode }
	for _, name := range []string{"api-max-1", "api-max-2"} {
		createPod(t, apiPod(name, bound))
		waitAPIPodRunning(t, h, name)
	}
	createPod(t, apiPod("api-max-3", bound))
	p := waitAPIPod(t, h, "api-max-3", time.Minute, "to be rejected", func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodFailed
	})
	if p.Status.Reason != "OutOfpods" {
		t.Errorf("status.reason = %q, want OutOfpods (message %q)", p.Status.Reason, p.Status.Message)
	}
	if p.Status.Message == "" {
		t.Error("status.message is empty")
	}
	c := newCRI(t)
	if sbs := c.podSandboxes(t, string(p.UID)); len(sbs) != 0 {
		t.Errorf("the rejected pod has %d sandboxes", len(sbs))
	}
	for _, name := range []string{"api-max-1", "api-max-2"} {
		if q, err := getAPIPod(name); err != nil || q == nil || !podRunningReady(q) {
			t.Errorf("admitted pod %s is no longer running after the rejection: %v", name, err)
		}
	}
}

// Restarting heartlet with ten running pods restarts none of them: the
// container IDs and restart counts stay, and the pods stay Ready.
func TestClusterRestartKeepsPods(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const n = 10
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("api-keep-%d", i)
		createPod(t, apiPod(names[i], nil))
	}
	before := make(map[string]string)
	for _, name := range names {
		p := waitAPIPodRunning(t, h, name)
		before[name] = containerSummary(p)
	}

	h.stop()
	startCluster(t, h, clusterOptions{})
	waitNodeReady(t, h, v1.ConditionTrue, nodeReadyTimeout)

	// The statuses must stay the same for a while after the restart, not
	// merely come back.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, name := range names {
			p, err := getAPIPod(name)
			if err != nil {
				t.Fatal(err)
			}
			if p == nil {
				t.Fatalf("pod %s disappeared after the restart", name)
			}
			if !podRunningReady(p) {
				t.Fatalf("pod %s is not Running and Ready after the restart: %s", name, describeStatus(p))
			}
			if got := containerSummary(p); got != before[name] {
				t.Fatalf("pod %s containers changed across the restart:\nbefore %s\nafter  %s", name, before[name], got)
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// containerSummary is "name=id restarts" for each container status.
func containerSummary(p *v1.Pod) string {
	var parts []string
	for _, cs := range p.Status.ContainerStatuses {
		parts = append(parts, fmt.Sprintf("%s=%s restarts=%d", cs.Name, cs.ContainerID, cs.RestartCount))
	}
	return strings.Join(parts, " ")
}

// Pods deleted from the API while heartlet was down are cleaned up when it
// starts again: their containers stop and their volumes are unmounted and
// removed, also when the runtime no longer knows the pod at all.
func TestClusterPodsDeletedWhileDown(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	c := newCRI(t)
	// Every API pod gets the projected service-account volume (a tmpfs).
	kept, lost := "api-down-kept", "api-down-lost"
	uids := map[string]string{}
	for _, name := range []string{kept, lost} {
		createPod(t, apiPod(name, nil))
		uids[name] = string(waitAPIPodRunning(t, h, name).UID)
	}
	h.stop()
	for _, name := range []string{kept, lost} {
		mustKubectl(t, "delete", "pod", "-n", "default", name, "--grace-period=0", "--force", "--wait=false")
	}
	// The runtime loses one of them entirely: only its directory is left.
	c.forceRemovePod(t, lost)

	startCluster(t, h, clusterOptions{})
	waitFor(t, 90*time.Second, "the deleted pods' containers and directories to be gone", func() (bool, string) {
		for _, ctr := range c.podContainers(t, uids[kept], "") {
			if ctr.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				return false, fmt.Sprintf("%s still has a running container", kept)
			}
		}
		for name, uid := range uids {
			dir := filepath.Join(h.rootDir, "pods", uid)
			if _, err := os.Stat(dir); err == nil {
				return false, fmt.Sprintf("%s: %s still exists", name, dir)
			}
		}
		return true, ""
	})
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), filepath.Join(h.rootDir, "pods")) {
		t.Errorf("mounts left below %s", filepath.Join(h.rootDir, "pods"))
	}
}
