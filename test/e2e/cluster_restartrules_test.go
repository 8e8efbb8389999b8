//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
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

// A Job's pod failure policy sees the statuses the restart rules leave:
// the container restarts in place on exit code 42 (the pod does not fail,
// so the Job counts no failure), then exits 1, which no rule restarts; the
// pod fails with that terminated exit code and the Job's FailJob rule on
// exit code 1 fails the Job (reason PodFailurePolicy), as upstream's job
// controller with container restart rules.
func TestClusterJobRestartRules(t *testing.T) {
	startClusterHeartlet(t, clusterOptions{})
	const name = "e2e-job-restart-rules"
	c := shContainer("main", "if [ -f /mnt/ran ]; then exit 1; fi; touch /mnt/ran; exit 42")
	c.RestartPolicy = ptr.To(v1.ContainerRestartPolicyNever)
	c.RestartPolicyRules = []v1.ContainerRestartRule{{
		Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{
			Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
	}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/mnt"}}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](3),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To("main"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
			}}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "heartlet-e2e"}},
				Spec: v1.PodSpec{
					RestartPolicy:                 v1.RestartPolicyNever,
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers:                    []v1.Container{c},
					Volumes:                       []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	b, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubectlIn(b, "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Foreground: the Job goes once its pods are gone, so nothing of
		// it outlives heartlet.
		if _, err := kubectl("delete", "job", "-n", "default", name, "--cascade=foreground", "--wait=true", "--timeout=90s"); err != nil {
			t.Errorf("delete job %s: %v", name, err)
		}
	})

	var j batchv1.Job
	waitFor(t, 3*time.Minute, "the Job to fail by its pod failure policy", func() (bool, string) {
		if err := getJSON(&j, "job", "-n", "default", name); err != nil {
			return false, err.Error()
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == v1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", j.Status)
	})
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobFailed && (cond.Reason != batchv1.JobReasonPodFailurePolicy || !strings.Contains(cond.Message, "exit code 1")) {
			t.Errorf("Failed condition %s %q, want reason PodFailurePolicy naming exit code 1", cond.Reason, cond.Message)
		}
	}
	if j.Status.Failed != 1 {
		t.Errorf("job failed pods = %d, want 1 (exit code 42 restarted in place)", j.Status.Failed)
	}
	var pods v1.PodList
	if err := getJSON(&pods, "pods", "-n", "default", "-l", "job-name="+name); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("job pods = %d, want 1", len(pods.Items))
	}
	p := &pods.Items[0]
	st := p.Status.ContainerStatuses
	if p.Status.Phase != v1.PodFailed || len(st) != 1 || st[0].RestartCount != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 1 {
		t.Errorf("job pod %s: phase %s, statuses %+v; want Failed, main restarted once, terminated with 1", p.Name, p.Status.Phase, st)
	}
	t.Logf("job %s: %+v", name, j.Status.Conditions)
}
