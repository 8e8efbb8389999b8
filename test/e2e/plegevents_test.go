//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// exitLatencies runs a pod of three containers that exit 2, 3.5 and 5 s
// after they start and returns, for each, the time from its exit (the
// runtime's finishedAt) to /pods reporting it terminated, polled every
// 20 ms.
func exitLatencies(t *testing.T, h *heartlet, c *cri, name string) []time.Duration {
	t.Helper()
	exits := []string{"2", "3.5", "5"}
	h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		for i, s := range exits {
			p.Spec.Containers = append(p.Spec.Containers, shContainer(fmt.Sprintf("c%d", i), "sleep "+s+"; exit 3"))
		}
	}))
	seen := map[string]time.Time{}
	deadline := time.Now().Add(podStartTimeout + 30*time.Second)
	for len(seen) < len(exits) {
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: only %v seen terminated", name, seen)
		}
		if !h.running() {
			t.Fatalf("heartlet exited: %v", h.err)
		}
		p, err := h.pod(name)
		now := time.Now()
		if err == nil && p != nil {
			for _, cs := range p.Status.ContainerStatuses {
				if _, ok := seen[cs.Name]; !ok && cs.State.Terminated != nil {
					seen[cs.Name] = now
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p, err := h.pod(name)
	if err != nil || p == nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	var out []time.Duration
	for i := range exits {
		n := fmt.Sprintf("c%d", i)
		ctrs := c.podContainers(t, string(p.UID), n)
		if len(ctrs) != 1 {
			t.Fatalf("%s: %d containers in the runtime, want 1", n, len(ctrs))
		}
		st := c.mustStatus(t, ctrs[0].Id)
		if st.FinishedAt == 0 {
			t.Fatalf("%s: seen terminated but the runtime has no finishedAt", n)
		}
		out = append(out, seen[n].Sub(time.Unix(0, st.FinishedAt)))
	}
	return out
}

func summarize(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	var parts []string
	for _, d := range s {
		parts = append(parts, d.Round(time.Millisecond).String())
	}
	return strings.Join(parts, " ")
}

// TestPLEGContainerEvents: on containerd 2.x, which sends CRI container
// events, a container's exit reaches the pod status at once even with a
// relist period of a minute; containerd 1.6 answers Unimplemented and the
// relist (1 s) alone finds exits, as before. The latencies are logged for
// docs/benchmarks.md.
func TestPLEGContainerEvents(t *testing.T) {
	t.Run("containerd2-relist-60s", func(t *testing.T) {
		c2 := startContainerd2(t)
		h := newHeartlet(t, "")
		t.Cleanup(h.cleanup)
		h.startOnWith(c2, "--pleg-relist-period=60s")
		lat := exitLatencies(t, h, newCRIAt(t, c2.endpoint), "pleg-events-slow")
		t.Logf("containerd 2.x, events, relist 60s: exit to status %s", summarize(lat))
		for _, d := range lat {
			// Without events the first relist after the exits is about
			// a minute after heartlet started.
			if d > 3*time.Second {
				t.Errorf("an exit reached the pod status %v after it happened, want well under the 60 s relist period", d)
			}
		}
	})
	t.Run("containerd2-relist-1s", func(t *testing.T) {
		c2 := startContainerd2(t)
		h := newHeartlet(t, "")
		t.Cleanup(h.cleanup)
		h.startOnWith(c2)
		lat := exitLatencies(t, h, newCRIAt(t, c2.endpoint), "pleg-events-fast")
		t.Logf("containerd 2.x, events, relist 1s: exit to status %s", summarize(lat))
	})
	t.Run("containerd1.6-relist-1s", func(t *testing.T) {
		h := startHeartlet(t)
		lat := exitLatencies(t, h, newCRI(t), "pleg-relist")
		t.Logf("containerd 1.6, no events, relist 1s: exit to status %s", summarize(lat))
		b, err := os.ReadFile(h.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "does not implement container events"); n != 1 {
			t.Errorf("the log says %d times that the runtime has no container events, want once", n)
		}
	})
}

// startOnWith is startOn with extra flags.
func (h *heartlet) startOnWith(c *smallContainerd, extra ...string) {
	h.t.Helper()
	h.run("standalone", append([]string{
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", c.endpoint,
		"--hostname-override", nodeName,
		"--v", "2",
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
	}, extra...)...)
}
