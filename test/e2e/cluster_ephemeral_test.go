//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ephemeralStatus is the status of the pod's ephemeral container name, or
// nil.
func ephemeralStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == name {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

// Ephemeral containers, as upstream's e2e tests in
// test/e2e/common/node/ephemeral_containers.go use them: kubectl debug adds
// one to a running pod, targeting the app container; it runs in that
// container's PID namespace (ps shows the app's processes), is reported
// Running in ephemeralContainerStatuses, and serves logs and exec. A
// second one added later with client-go (UpdateEphemeralContainers)
// without a target sees only its own processes, exits, is reported
// Terminated with its exit code and is never started again; the pod and
// its app container go on untouched.
func TestClusterEphemeralContainer(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	const name = "api-ephemeral"
	createPod(t, apiPod(name, nil))
	pod := waitAPIPodRunning(t, h, name)
	appID := statusOf(pod, "main").ContainerID

	// kubectl debug, as a user would (without -it: no terminal here).
	mustKubectl(t, "debug", "-n", "default", name, "-c", "dbg", "--image="+busyboxImage, "--target=main",
		"--", "sh", "-c", "echo debugger-started; "+sleeper)
	pod = waitAPIPod(t, h, name, podStartTimeout, "to report dbg Running", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "dbg")
		return st != nil && st.State.Running != nil
	})
	if st := ephemeralStatus(pod, "dbg"); st.ContainerID == "" || st.Ready || st.RestartCount != 0 {
		t.Errorf("dbg status %+v: want a container ID, not ready, no restarts", st)
	}
	// The target's processes are visible: its shell loop runs there.
	out := mustKubectl(t, "exec", "-n", "default", name, "-c", "dbg", "--", "ps", "-o", "pid,args")
	if !strings.Contains(out, "while true") {
		t.Errorf("ps in dbg does not show the target's processes:\n%s", out)
	}
	t.Logf("ps in dbg:\n%s", out)
	waitFor(t, 30*time.Second, "kubectl logs of dbg", func() (bool, string) {
		out, err := kubectl("logs", "-n", "default", name, "-c", "dbg")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(out, "debugger-started"), "logs: " + out
	})

	// kubectl debug -i attaches to the new container's output (attach
	// through the kubelet API) until it exits.
	out = mustKubectl(t, "debug", "-i", "-n", "default", name, "-c", "dbg-attach", "--image="+busyboxImage,
		"--", "sh", "-c", "sleep 3; echo attached-output")
	if !strings.Contains(out, "attached-output") {
		t.Errorf("kubectl debug -i printed %q, want the container's output", out)
	}

	// A second one through the subresource with client-go.
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		t.Fatalf("load %s: %v", adminKubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cur, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, v1.EphemeralContainer{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name:                     "dbg-exit",
			Image:                    busyboxImage,
			Command:                  []string{"sh", "-c", "ps -o pid,args; echo done; exit 3"},
			TerminationMessagePolicy: v1.TerminationMessageReadFile,
		},
	})
	if _, err := cs.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, name, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update ephemeral containers: %v", err)
	}
	pod = waitAPIPod(t, h, name, podStartTimeout, "to report dbg-exit Terminated", func(p *v1.Pod) bool {
		st := ephemeralStatus(p, "dbg-exit")
		return st != nil && st.State.Terminated != nil
	})
	if term := ephemeralStatus(pod, "dbg-exit").State.Terminated; term.ExitCode != 3 {
		t.Errorf("dbg-exit terminated with %d, want 3", term.ExitCode)
	}
	logs := mustKubectl(t, "logs", "-n", "default", name, "-c", "dbg-exit")
	if !strings.Contains(logs, "done") || strings.Contains(logs, "while true") {
		t.Errorf("dbg-exit (no target) should see only its own processes:\n%s", logs)
	}

	// Not started again, and nothing else restarted.
	time.Sleep(15 * time.Second)
	c := newCRI(t)
	if n := len(c.podContainers(t, string(pod.UID), "dbg-exit")); n != 1 {
		t.Errorf("%d dbg-exit containers in the runtime, want 1 (never restarted)", n)
	}
	pod, err = getAPIPod(name)
	if err != nil || pod == nil {
		t.Fatalf("get pod: %v", err)
	}
	if st := ephemeralStatus(pod, "dbg-exit"); st.State.Terminated == nil || st.RestartCount != 0 {
		t.Errorf("dbg-exit status %+v, want Terminated without restarts", st)
	}
	if st := ephemeralStatus(pod, "dbg"); st.State.Running == nil {
		t.Errorf("dbg status %+v, want still Running", st)
	}
	if main := statusOf(pod, "main"); main.ContainerID != appID || main.RestartCount != 0 || !podRunningReady(pod) {
		t.Errorf("main %s (restarts %d), pod %s: want the same container %s, Running and Ready", main.ContainerID, main.RestartCount, describeStatus(pod), appID)
	}
	// Deleting the pod (createPod's cleanup) stops the ephemeral containers
	// with it and leaves nothing in the runtime.
}
