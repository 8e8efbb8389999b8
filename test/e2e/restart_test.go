//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// crashLoopBackOff.maxContainerRestartPeriod caps the restart back-off: with
// 2 s, a container that crashes after 1 s is restarted about every 3 s
// instead of after 10 s, 20 s, 40 s (upstream KEP-4603).
func TestCrashLoopBackOffCap(t *testing.T) {
	h := newHeartlet(t, "crashLoopBackOff:\n  maxContainerRestartPeriod: 2s\n")
	t.Cleanup(h.cleanup)
	h.start()
	c := newCRI(t)
	h.addPod(t, "capped.yaml", "capped", manifest(t, "capped", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("crash", "sleep 1; exit 1")}
	}))
	pod := h.waitPod(t, "capped", podStartTimeout, "to exist with a UID", func(p *v1.Pod) bool { return p.UID != "" })
	var ids []string
	start := time.Now()
	waitFor(t, 60*time.Second, "five attempts of the crashing container", func() (bool, string) {
		for _, ctr := range c.podContainers(t, string(pod.UID), "crash") {
			if !slices.Contains(ids, ctr.Id) {
				ids = append(ids, ctr.Id)
			}
		}
		return len(ids) >= 5, fmt.Sprintf("%d attempts so far", len(ids))
	})
	// Uncapped, the fifth attempt comes after 1+0+11+21+41 s (> 70 s).
	if took := time.Since(start); took > 40*time.Second {
		t.Errorf("five attempts took %v; with a 2 s cap they take about 15 s", took)
	}
}

// A change of a running API pod's container image restarts that container
// (restartCount + 1, a new container ID); an update that does not touch the
// container hash (name and image, as upstream) restarts nothing.
func TestClusterImageChangeRestartsContainer(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const name = "api-image-change"
	createPod(t, apiPod(name, nil))
	before := waitAPIPodRunning(t, h, name)
	id0 := before.Status.ContainerStatuses[0].ContainerID

	// Labels change: same containers.
	mustKubectl(t, "label", "pod", "-n", "default", name, "e2e-extra=1")
	time.Sleep(5 * time.Second)
	p, err := getAPIPod(name)
	if err != nil || p == nil {
		t.Fatalf("get pod: %v", err)
	}
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != id0 || cs.RestartCount != 0 {
		t.Fatalf("a label change restarted the container: %s restarts %d (was %s)", cs.ContainerID, cs.RestartCount, id0)
	}

	// Image change: the container is replaced, and runs the new image.
	mustKubectl(t, "set", "image", "-n", "default", "pod/"+name, "main="+testserverImage)
	p = waitAPIPod(t, h, name, 90*time.Second, "to run the new image", func(p *v1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.ContainerID != id0 && cs.State.Running != nil && cs.Image == testserverImage
	})
	if cs := p.Status.ContainerStatuses[0]; cs.RestartCount != 1 {
		t.Errorf("restartCount after the image change = %d, want 1", cs.RestartCount)
	}
}
