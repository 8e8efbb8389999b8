//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A container's own restartPolicy and restartPolicyRules override the
// pod's restartPolicy, as upstream with ContainerRestartRules (KEP-5307;
// the scenarios of test/e2e/common/node/container_restart_policy.go,
// "should restart container on rule match" and "should not restart
// container on rule mismatch").
func TestClusterContainerRestartRules(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	status := func(p *v1.Pod, name string) *v1.ContainerStatus {
		for i := range p.Status.ContainerStatuses {
			if p.Status.ContainerStatuses[i].Name == name {
				return &p.Status.ContainerStatuses[i]
			}
		}
		return nil
	}

	// Pod Always: "once" (restartPolicy Never) exits 3 and stays
	// terminated, while its sibling, under the pod's Always, restarts.
	once := shContainer("once", "exit 3")
	once.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
	createPod(t, apiPod("api-restart-never", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyAlways
		p.Spec.Containers = []v1.Container{once, shContainer("again", "sleep 1; exit 1")}
	}))

	// Pod Never: the container restarts on exit code 42 by its rule, then
	// exits 1, which no rule matches: its own Never applies and the pod
	// fails.
	rules := shContainer("main", "if [ -f /mnt/ran ]; then exit 1; fi; touch /mnt/ran; exit 42")
	rules.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
	rules.RestartPolicyRules = []v1.ContainerRestartRule{{
		Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{
			Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	rules.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/mnt"}}
	createPod(t, apiPod("api-restart-rules", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers = []v1.Container{rules}
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	}))

	t.Run("Never container in an Always pod", func(t *testing.T) {
		p := waitAPIPod(t, h, "api-restart-never", 2*time.Minute, "to restart its sibling", func(p *v1.Pod) bool {
			a := status(p, "again")
			return a != nil && a.RestartCount >= 1
		})
		o := status(p, "once")
		if o == nil || o.State.Terminated == nil || o.State.Terminated.ExitCode != 3 || o.RestartCount != 0 {
			t.Errorf("once = %+v, want terminated with exit code 3 and no restart", o)
		}
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("phase = %s, want Running (upstream: a sibling is restarting)", p.Status.Phase)
		}
		t.Logf("once: %+v; again restarts %d; phase %s", o.State, status(p, "again").RestartCount, p.Status.Phase)
	})

	t.Run("restart rule on exit code 42 in a Never pod", func(t *testing.T) {
		p := waitAPIPod(t, h, "api-restart-rules", 2*time.Minute, "to fail", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed
		})
		m := status(p, "main")
		if m == nil || m.RestartCount != 1 || m.State.Terminated == nil || m.State.Terminated.ExitCode != 1 {
			t.Fatalf("main = %+v, want one restart (after 42) and terminated with exit code 1", m)
		}
		if last := m.LastTerminationState.Terminated; last == nil || last.ExitCode != 42 {
			t.Errorf("main last termination = %+v, want exit code 42", m.LastTerminationState)
		}
		// Failed is final: nothing more runs.
		c := newCRI(t)
		for _, ctr := range c.podContainers(t, string(p.UID), "") {
			if ctr.State.String() == "CONTAINER_RUNNING" {
				t.Errorf("container %s still running in the failed pod", ctr.Id)
			}
		}
	})
}
