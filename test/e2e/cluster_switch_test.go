//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// switchHold is how long the pods must stay unchanged after each switch:
// longer than a few probe periods and the first status updates of the
// agent that took over.
const switchHold = 20 * time.Second

// upstreamKubelet is the upstream kubelet binary hack/setup.sh builds
// (HEARTLET_KUBELET_BIN overrides it).
func upstreamKubelet(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HEARTLET_KUBELET_BIN")
	if bin == "" {
		bin = "/var/cache/heartlet/kube/v1.37.2/bin/kubelet"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("upstream kubelet: %v (hack/setup.sh builds it)", err)
	}
	return bin
}

// A node run by the upstream kubelet switches to heartlet and back, with
// the same flags, config file, kubeconfig and root dir, without a single
// container being restarted: the container and sandbox IDs and restart
// counts stay, the mirror pod keeps its UID, the pods and the node stay
// Ready, and kubectl logs and exec keep working through the API server.
func TestClusterKubeletSwitch(t *testing.T) {
	requireCluster(t)
	kubelet := upstreamKubelet(t)
	// failCgroupV1: false lets the upstream kubelet (1.35 and later) start
	// on this cgroup v1 host; heartlet accepts the field with the same
	// meaning. syncFrequency: 10s makes either agent refresh configMap
	// volumes within the hold time. The probes run every second, so that
	// a readiness lost by the agent that takes over shows within it too.
	h := newClusterHeartlet(t, clusterOptions{config: "failCgroupV1: false\nsyncFrequency: 10s\n"})
	// The upstream kubelet bind-mounts its root directory onto itself (to
	// make it a shared mount); that mount is its, not a pod's, and goes
	// once the agent has stopped, before the leftover-mount check.
	t.Cleanup(func() { unmountSelfBind(t, h.rootDir) })
	t.Cleanup(h.cleanup)
	h.bin = kubelet
	startCluster(t, h, clusterOptions{})
	waitNodeSchedulable(t, h)

	// A static pod shaped like kubeadm's etcd: host network, a hostPath
	// data directory, an HTTP liveness probe on 127.0.0.1 and a
	// readiness probe.
	etcdPort := freePort(t)
	dataDir := filepath.Join(h.dir, "etcd-data")
	const etcdFile, etcdName = "etcd.yaml", "etcd"
	mirrorName := etcdName + "-" + clusterNode
	h.writeManifest(t, etcdFile, manifest(t, etcdName, func(p *v1.Pod) {
		p.Namespace = "default"
		p.Labels = map[string]string{"component": "etcd", "tier": "control-plane"}
		p.Spec.HostNetwork = true
		dir := v1.HostPathDirectoryOrCreate
		p.Spec.Volumes = []v1.Volume{{Name: "etcd-data", VolumeSource: v1.VolumeSource{
			HostPath: &v1.HostPathVolumeSource{Path: dataDir, Type: &dir},
		}}}
		c := shContainer("etcd", fmt.Sprintf(`echo started >> /var/lib/etcd/starts
echo ok > /var/lib/etcd/health
httpd -f -p 127.0.0.1:%d -h /var/lib/etcd &
trap 'kill $!; exit 0' TERM
wait`, etcdPort))
		c.VolumeMounts = []v1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}}
		c.LivenessProbe = &v1.Probe{
			ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Host: "127.0.0.1", Path: "/health", Port: intstr.FromInt(etcdPort),
			}},
			PeriodSeconds: 1, FailureThreshold: 3,
		}
		c.ReadinessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/var/lib/etcd/health"}}},
			PeriodSeconds: 1,
		}
		p.Spec.Containers = []v1.Container{c}
	}))
	t.Cleanup(func() {
		h.removeManifest(t, etcdFile)
		if h.running() {
			waitFor(t, podRemoveTimeout, "the mirror pod to be deleted with the manifest", func() (bool, string) {
				p, err := getAPIPod(mirrorName)
				if err != nil {
					return false, err.Error()
				}
				return p == nil, "still present"
			})
		}
		deletePodAndWait(t, mirrorName)
	})

	// An API pod with an init container, a sidecar, probes and every
	// kind of volume the kubelet lays out under the pod directory.
	createObject(t, &v1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "switch-config", Namespace: "default"},
		Data:       map[string]string{"greeting": "hello from the configmap"},
	}, "configmap", "switch-config")
	createObject(t, &v1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "switch-secret", Namespace: "default"},
		StringData: map[string]string{"password": "s3cret"},
	}, "secret", "switch-secret")
	const appName = "switch-app"
	always := v1.ContainerRestartPolicyAlways
	createPod(t, apiPod(appName, func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
			{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "switch-config"},
			}}},
			{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "switch-secret"}}},
		}
		mounts := []v1.VolumeMount{
			{Name: "scratch", MountPath: "/scratch"},
			{Name: "mem", MountPath: "/mem"},
			{Name: "config", MountPath: "/etc/config"},
			{Name: "secret", MountPath: "/etc/secret"},
		}
		setup := shContainer("setup", "echo initialized > /scratch/init")
		setup.VolumeMounts = mounts
		sidecar := shContainer("shipper", `trap 'exit 0' TERM; echo shipper up; while true; do date > /mem/heartbeat; sleep 1 & wait $!; done`)
		sidecar.RestartPolicy = &always
		sidecar.VolumeMounts = mounts
		sidecar.StartupProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/mem/heartbeat"}}},
			PeriodSeconds: 1, FailureThreshold: 30,
		}
		p.Spec.InitContainers = []v1.Container{setup, sidecar}
		app := shContainer("app", `echo app up; cat /etc/config/greeting; echo
mkdir -p /www && echo ready > /www/index.html
httpd -f -p 8080 -h /www &
trap 'kill $!; exit 0' TERM
wait`)
		app.VolumeMounts = mounts
		app.ReadinessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt(8080)}},
			PeriodSeconds: 1,
		}
		app.LivenessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "/scratch/init"}}},
			PeriodSeconds: 1, FailureThreshold: 3,
		}
		// flaky fails once, so that the switch meets a restart count of
		// 1 and a dead container record, both of which must stay.
		flaky := shContainer("flaky", "if [ ! -f /scratch/flaky ]; then touch /scratch/flaky; exit 1; fi; "+sleeper)
		flaky.VolumeMounts = mounts
		p.Spec.Containers = []v1.Container{app, flaky}
	}))

	names := []string{mirrorName, appName}
	waitAPIPod(t, h, mirrorName, podStartTimeout, "to be a Running and Ready mirror pod", func(p *v1.Pod) bool {
		return p.Annotations[mirrorAnnotation] != "" && podRunningReady(p)
	})
	waitAPIPod(t, h, appName, podStartTimeout, "to be Running and Ready with its sidecar", func(p *v1.Pod) bool {
		s, f := statusOf(p, "shipper"), statusOf(p, "flaky")
		return podRunningReady(p) && s != nil && s.Ready && f != nil && f.RestartCount == 1 && f.Ready
	})
	c := newCRI(t)
	before := snapshotSwitch(t, c, names)
	readySince := nodeReadySince(t)
	checkAPIAccess(t, mirrorName, appName)

	// Not subtests: the agent process belongs to this test.
	for _, to := range []struct {
		what, bin string
	}{
		{"heartlet", heartletBin},
		{"the upstream kubelet", kubelet},
	} {
		t.Logf("switching to %s", to.what)
		switchedAt := time.Now().Truncate(time.Second)
		h.stop()
		h.bin = to.bin
		startCluster(t, h, clusterOptions{})
		// The agent that took over refreshes the configMap volume the
		// other one laid out.
		greeting := "hello from " + to.what
		mustKubectl(t, "patch", "configmap", "-n", "default", "switch-config", "--type=merge",
			"-p", fmt.Sprintf(`{"data":{"greeting":%q}}`, greeting))
		// Every check polls for the hold time: the pods must stay as
		// they were, not merely come back.
		deadline := time.Now().Add(switchHold)
		for {
			if !h.running() {
				t.Fatalf("%s exited: %v", to.what, h.err)
			}
			after := snapshotSwitch(t, c, names)
			if diff := before.diff(after); diff != "" {
				t.Fatalf("after switching to %s:\n%s", to.what, diff)
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		if got := nodeReadySince(t); !got.Equal(readySince) {
			t.Errorf("after switching to %s: node Ready condition changed at %v (Ready since %v before)", to.what, got, readySince)
		}
		// Nothing happened to the pods that would be worth an event:
		// no container killed, created or started, no resize.
		for _, name := range names {
			evs, err := podEvents(name, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if last := eventTime(e); last.After(switchedAt) {
					t.Errorf("after switching to %s: event about pod %s at %v: %s %s: %s", to.what, name, last, e.Type, e.Reason, e.Message)
				}
			}
		}
		checkAPIAccess(t, mirrorName, appName)
		waitFor(t, 30*time.Second, "the configMap volume to show the new greeting", func() (bool, string) {
			out, err := kubectl("exec", "-n", "default", appName, "-c", "app", "--", "cat", "/etc/config/greeting")
			if err != nil {
				return false, err.Error()
			}
			return out == greeting, fmt.Sprintf("greeting %q", out)
		})
	}
}

// eventTime is when an event last happened.
func eventTime(e v1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// unmountSelfBind unmounts dir where it is mounted on itself.
func unmountSelfBind(t *testing.T, dir string) {
	t.Helper()
	for range 3 {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Logf("read mountinfo: %v", err)
			return
		}
		mounted := false
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
				mounted = true
			}
		}
		if !mounted {
			return
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Logf("unmount %s: %v", dir, err)
			return
		}
	}
}

// switchSnapshot is what must not change across a switch, for each pod by
// name: the API's view and the runtime's.
type switchSnapshot map[string]podSnapshot

type podSnapshot struct {
	uid string
	// api holds "name id restarts=N ready=B" for every container status.
	api []string
	// ready is the pod's Ready condition.
	ready v1.ConditionStatus
	// sandboxes and containers are the CRI records of the pod, as
	// "id state" (containers with their restart-count annotation).
	sandboxes, containers []string
}

// snapshotSwitch reads the pods' API objects and their CRI records.
func snapshotSwitch(t *testing.T, c *cri, names []string) switchSnapshot {
	t.Helper()
	s := switchSnapshot{}
	for _, name := range names {
		p, err := getAPIPod(name)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			s[name] = podSnapshot{uid: "(absent)"}
			continue
		}
		ps := podSnapshot{uid: string(p.UID), ready: podCondition(p, v1.PodReady)}
		for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
			for _, cs := range list {
				ps.api = append(ps.api, fmt.Sprintf("%s %s restarts=%d ready=%v", cs.Name, cs.ContainerID, cs.RestartCount, cs.Ready))
			}
		}
		// A mirror pod's UID is not the static pod's: the runtime
		// records carry the static pod's (kubernetes.io/config.mirror).
		uid := string(p.UID)
		if m := p.Annotations[mirrorAnnotation]; m != "" {
			uid = m
		}
		for _, sb := range c.podSandboxes(t, uid) {
			ps.sandboxes = append(ps.sandboxes, fmt.Sprintf("%s %s", sb.Id, sb.State))
		}
		for _, ctr := range c.podContainers(t, uid, "") {
			ps.containers = append(ps.containers, fmt.Sprintf("%s %s %s restartCount=%s",
				ctr.Metadata.GetName(), ctr.Id, ctr.State, ctr.Annotations["io.kubernetes.container.restartCount"]))
		}
		slices.Sort(ps.sandboxes)
		slices.Sort(ps.containers)
		s[name] = ps
	}
	return s
}

// diff describes how after differs from s, or "".
func (s switchSnapshot) diff(after switchSnapshot) string {
	var b strings.Builder
	for name, p := range s {
		q := after[name]
		if p.uid != q.uid {
			fmt.Fprintf(&b, "pod %s: uid %s, was %s\n", name, q.uid, p.uid)
		}
		if q.ready != v1.ConditionTrue {
			fmt.Fprintf(&b, "pod %s: Ready=%s\n", name, q.ready)
		}
		for _, f := range []struct {
			what          string
			before, after []string
		}{
			{"API container statuses", p.api, q.api},
			{"CRI sandboxes", p.sandboxes, q.sandboxes},
			{"CRI containers", p.containers, q.containers},
		} {
			if !slices.Equal(f.before, f.after) {
				fmt.Fprintf(&b, "pod %s: %s\n  before %q\n  after  %q\n", name, f.what, f.before, f.after)
			}
		}
	}
	return b.String()
}

// nodeReadySince is when the node's Ready condition last changed; it fails
// t unless the node is Ready.
func nodeReadySince(t *testing.T) time.Time {
	t.Helper()
	n, err := getNode()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status != v1.ConditionTrue {
				t.Fatalf("node is not Ready: %s", describeConditions(n))
			}
			return c.LastTransitionTime.Time
		}
	}
	t.Fatalf("node has no Ready condition: %s", describeConditions(n))
	return time.Time{}
}

// checkAPIAccess reads logs and execs in both pods through the API server,
// which reaches the node's kubelet API.
func checkAPIAccess(t *testing.T, mirrorName, appName string) {
	t.Helper()
	if out := mustKubectl(t, "logs", "-n", "default", appName, "-c", "app"); !strings.Contains(out, "hello from the configmap") {
		t.Errorf("kubectl logs %s -c app = %q, want the configmap's greeting", appName, out)
	}
	if out := mustKubectl(t, "logs", "-n", "default", appName, "-c", "shipper"); !strings.Contains(out, "shipper up") {
		t.Errorf("kubectl logs %s -c shipper = %q", appName, out)
	}
	if out := mustKubectl(t, "exec", "-n", "default", appName, "-c", "app", "--", "cat", "/etc/secret/password", "/scratch/init"); out != "s3cret"+"initialized\n" {
		t.Errorf("kubectl exec %s cat = %q, want the secret and the init container's file", appName, out)
	}
	if out := mustKubectl(t, "exec", "-n", "default", appName, "-c", "app", "--", "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"); out != "default" {
		t.Errorf("service account namespace in %s = %q", appName, out)
	}
	if out := mustKubectl(t, "exec", "-n", "default", mirrorName, "--", "cat", "/var/lib/etcd/starts"); out != "started\n" {
		t.Errorf("the etcd-like static pod's start log = %q, want one start", out)
	}
}
