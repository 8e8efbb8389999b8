//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Readiness is probed as soon as the startup probe succeeds, as upstream
// (pkg/kubelet/prober: the readiness worker is triggered once the container
// has started), not a readiness period later: with a 60 s readiness
// period, the pod is Ready well before that period passes. The readiness
// worker starts right after heartlet, within its initial random delay.
func TestProbeReadinessAfterStartup(t *testing.T) {
	h := startHeartlet(t)
	h.addPod(t, "pr-ready-at-once.yaml", "pr-ready-at-once", manifest(t, "pr-ready-at-once", func(p *v1.Pod) {
		c := serverScript("app", "sleep 3; touch /tmp/startup")
		c.StartupProbe = fastProbe(execAction("cat", "/tmp/startup"))
		c.StartupProbe.FailureThreshold = 60
		c.ReadinessProbe = fastProbe(execAction("true"))
		c.ReadinessProbe.PeriodSeconds = 60
		p.Spec.Containers = []v1.Container{c}
	}))
	p := h.waitPod(t, "pr-ready-at-once", podStartTimeout, "to run", func(p *v1.Pod) bool {
		cs := statusOf(p, "app")
		return cs != nil && cs.State.Running != nil
	})
	start := statusOf(p, "app").State.Running.StartedAt.Time
	h.waitPod(t, "pr-ready-at-once", 30*time.Second, "to be Ready before its 60 s readiness period", isReady)
	t.Logf("Ready %v after the container started (startup probe passes after about 3 s)", time.Since(start).Round(100*time.Millisecond))
}
