//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The security tests look at a container from inside, through CRI exec, as
// upstream's test/e2e/common/node/security_context.go and sysctl.go do with
// the pod's own output.

func ptrTo[T any](v T) *T { return &v }

// sleeperAs is a busybox container that sleeps, with a security context.
func sleeperAs(name string, sc *v1.SecurityContext) v1.Container {
	c := shContainer(name, sleeper)
	c.SecurityContext = sc
	return c
}

// execOK runs cmd in the running container name of pod uid and returns its
// stdout; a non-zero exit fails the test.
func execOK(t *testing.T, c *cri, uid, name string, cmd ...string) string {
	t.Helper()
	out, errOut, code := execIn(t, c, uid, name, cmd...)
	if code != 0 {
		t.Fatalf("%q in container %s exited %d: %s%s", cmd, name, code, out, errOut)
	}
	return out
}

// execIn runs cmd in the running container name of pod uid.
func execIn(t *testing.T, c *cri, uid, name string, cmd ...string) (string, string, int) {
	t.Helper()
	for _, ctr := range c.podContainers(t, uid, name) {
		if ctr.State.String() == "CONTAINER_RUNNING" {
			return c.exec(t, ctr.Id, cmd...)
		}
	}
	t.Fatalf("no running container %s in pod %s", name, uid)
	return "", "", 0
}

// idOf parses busybox id output: uid, gid and the supplementary groups.
func idOf(t *testing.T, out string) (uid, gid int, groups []int) {
	t.Helper()
	num := func(field string) int {
		m := regexp.MustCompile(field + `=(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s in id output %q", field, out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	uid, gid = num("uid"), num("gid")
	if _, list, ok := strings.Cut(out, "groups="); ok {
		for _, m := range regexp.MustCompile(`(\d+)`).FindAllString(strings.Fields(list)[0], -1) {
			n, _ := strconv.Atoi(m)
			groups = append(groups, n)
		}
	}
	return uid, gid, groups
}

func hasAll(list []int, want ...int) bool {
	for _, w := range want {
		found := false
		for _, v := range list {
			found = found || v == w
		}
		if !found {
			return false
		}
	}
	return true
}

// statusField returns a field of /proc/self/status as seen by cmd's output.
func statusField(t *testing.T, status, field string) string {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/self/status:\n%s", field, status)
	return ""
}

// lsOwner parses the mode and numeric group of one `ls -ln` line.
func lsOwner(t *testing.T, line string) (mode string, gid int) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 4 {
		t.Fatalf("unexpected ls -ln output %q", line)
	}
	gid, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatalf("group of %q: %v", line, err)
	}
	return f[0], gid
}

// TestSecurityContext runs standalone static pods with security contexts
// and checks what their containers see.
func TestSecurityContext(t *testing.T) {
	h := startHeartlet(t)
	c := newCRI(t)

	// Pod values are the defaults, container values override them; fsGroup
	// joins the groups and owns the volumes with the setgid bit
	// (upstream "should run the container with uid/gid specified",
	// "should support pod.Spec.SecurityContext.SupplementalGroups",
	// fsGroup volume tests in test/e2e/common/storage).
	t.Run("users groups fsGroup", func(t *testing.T) {
		t.Parallel()
		const name = "sec-user"
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{
				RunAsUser: ptrTo(int64(1000)), RunAsGroup: ptrTo(int64(3000)),
				SupplementalGroups: []int64{5000}, FSGroup: ptrTo(int64(2000)),
			}
			mounts := []v1.VolumeMount{{Name: "scratch", MountPath: "/data"}, {Name: "info", MountPath: "/info"}}
			pod := sleeperAs("pod-level", nil)
			pod.VolumeMounts = mounts
			override := sleeperAs("override", &v1.SecurityContext{RunAsUser: ptrTo(int64(1001)), RunAsGroup: ptrTo(int64(3001))})
			override.VolumeMounts = mounts
			p.Spec.Containers = []v1.Container{pod, override}
			p.Spec.Volumes = []v1.Volume{
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
					Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				}}},
			}
		}))
		p := h.waitRunning(t, name)
		uid := string(p.UID)
		for _, tc := range []struct {
			container string
			uid, gid  int
		}{{"pod-level", 1000, 3000}, {"override", 1001, 3001}} {
			out := execOK(t, c, uid, tc.container, "id")
			u, g, groups := idOf(t, out)
			if u != tc.uid || g != tc.gid || !hasAll(groups, 2000, 5000) {
				t.Errorf("%s: id = %q, want uid=%d gid=%d and groups 2000 (fsGroup) and 5000", tc.container, strings.TrimSpace(out), tc.uid, tc.gid)
			}
		}
		// The emptyDir belongs to fsGroup with setgid; a new file inherits
		// the group.
		mode, gid := lsOwner(t, execOK(t, c, uid, "pod-level", "ls", "-lnd", "/data"))
		if gid != 2000 || !strings.HasPrefix(mode, "drwxrws") {
			t.Errorf("emptyDir: mode %s group %d, want drwxrws... group 2000", mode, gid)
		}
		execOK(t, c, uid, "override", "touch", "/data/new")
		if _, gid := lsOwner(t, execOK(t, c, uid, "pod-level", "ls", "-ln", "/data/new")); gid != 2000 {
			t.Errorf("file created in the emptyDir has group %d, want 2000 (setgid)", gid)
		}
		mode, gid = lsOwner(t, execOK(t, c, uid, "pod-level", "ls", "-lnL", "/info/name"))
		if gid != 2000 || !strings.HasPrefix(mode, "-rw-r-") {
			t.Errorf("downwardAPI file: mode %s group %d, want group 2000 readable", mode, gid)
		}
	})

	// Capabilities, privileged, no_new_privs, read-only root, seccomp and
	// masked paths (upstream security_context.go: "should run the
	// container as privileged/unprivileged", "allowPrivilegeEscalation",
	// "readOnlyRootFilesystem"; seccomp and procMount cases).
	t.Run("capabilities privileged nnp seccomp readonly proc", func(t *testing.T) {
		t.Parallel()
		const name = "sec-caps"
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{
				sleeperAs("plain", nil),
				sleeperAs("add-net-admin", &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}}}),
				sleeperAs("drop-all", &v1.SecurityContext{Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}}),
				sleeperAs("privileged", &v1.SecurityContext{Privileged: ptrTo(true)}),
				sleeperAs("no-escalation", &v1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false)}),
				sleeperAs("read-only", &v1.SecurityContext{ReadOnlyRootFilesystem: ptrTo(true)}),
				sleeperAs("seccomp-default", &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}),
				sleeperAs("seccomp-unconfined", &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}),
				sleeperAs("proc-default", &v1.SecurityContext{ProcMount: ptrTo(v1.DefaultProcMount)}),
			}
		}))
		p := h.waitRunning(t, name)
		uid := string(p.UID)
		status := func(container string) string {
			return execOK(t, c, uid, container, "cat", "/proc/self/status")
		}
		capEff := func(container string) uint64 {
			v, err := strconv.ParseUint(statusField(t, status(container), "CapEff"), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		const capNetAdmin = 1 << 12
		plain := capEff("plain")
		if plain == 0 || plain&capNetAdmin != 0 {
			t.Errorf("plain CapEff %#x: want the runtime's default set, without NET_ADMIN", plain)
		}
		if got := capEff("add-net-admin"); got != plain|capNetAdmin {
			t.Errorf("add NET_ADMIN: CapEff %#x, want %#x", got, plain|capNetAdmin)
		}
		if got := capEff("drop-all"); got != 0 {
			t.Errorf("drop ALL: CapEff %#x, want 0", got)
		}
		// A privileged container has every capability the host's root has.
		host, err := os.ReadFile("/proc/self/status")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := statusField(t, status("privileged"), "CapEff"), statusField(t, string(host), "CapBnd"); got != want {
			t.Errorf("privileged: CapEff %s, want the host's bounding set %s", got, want)
		}

		// no_new_privs only with allowPrivilegeEscalation false.
		if got := statusField(t, status("no-escalation"), "NoNewPrivs"); got != "1" {
			t.Errorf("allowPrivilegeEscalation false: NoNewPrivs %s, want 1", got)
		}
		if got := statusField(t, status("plain"), "NoNewPrivs"); got != "0" {
			t.Errorf("default: NoNewPrivs %s, want 0 (escalation allowed by default)", got)
		}

		// Seccomp mode 2 is a filter (RuntimeDefault), 0 none (Unconfined,
		// also the default without seccompDefault).
		for container, want := range map[string]string{"seccomp-default": "2", "seccomp-unconfined": "0", "plain": "0"} {
			if got := statusField(t, status(container), "Seccomp"); got != want {
				t.Errorf("%s: Seccomp %s, want %s", container, got, want)
			}
		}

		// A read-only root refuses writes; volumes aside, others may write.
		if _, errOut, code := execIn(t, c, uid, "read-only", "touch", "/probe"); code == 0 || !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("touch / in read-only container: exit %d %q, want a Read-only file system error", code, errOut)
		}
		execOK(t, c, uid, "plain", "touch", "/probe")

		// procMount Default: the masked paths the kernel has (this one has
		// no /proc/kcore) are covered and /proc/sys is read-only; a
		// privileged container sees them unmasked.
		for _, container := range []string{"proc-default", "plain"} {
			mounts := execOK(t, c, uid, container, "cat", "/proc/self/mounts")
			for _, masked := range []string{" /proc/keys ", " /proc/timer_list ", " /proc/acpi ", " /sys/firmware "} {
				if !strings.Contains(mounts, masked) {
					t.Errorf("%s: %s is not masked:\n%s", container, masked, mounts)
				}
			}
			if !regexp.MustCompile(`(?m) /proc/sys \S+ ro[, ]`).MatchString(mounts) {
				t.Errorf("%s: /proc/sys is not read-only:\n%s", container, mounts)
			}
			if _, _, code := execIn(t, c, uid, container, "sh", "-c", "echo 1 > /proc/sys/kernel/shm_rmid_forced"); code == 0 {
				t.Errorf("%s: writing /proc/sys succeeded", container)
			}
		}
		if mounts := execOK(t, c, uid, "privileged", "cat", "/proc/self/mounts"); strings.Contains(mounts, " /proc/keys ") {
			t.Errorf("privileged: /proc/keys is masked")
		}
	})

	// A Localhost seccomp profile is read from <root-dir>/seccomp, as the
	// kubelet's seccomp root (upstream seccomp e2e "should support seccomp
	// localhost/profile").
	t.Run("localhost seccomp", func(t *testing.T) {
		t.Parallel()
		const name = "sec-seccomp-local"
		dir := filepath.Join(h.rootDir, "seccomp", "e2e")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
		if err := os.WriteFile(filepath.Join(dir, "no-mkdir.json"), []byte(profile), 0o644); err != nil {
			t.Fatal(err)
		}
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{sleeperAs("main", &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{
				Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("e2e/no-mkdir.json"),
			}})}
		}))
		p := h.waitRunning(t, name)
		uid := string(p.UID)
		if got := statusField(t, execOK(t, c, uid, "main", "cat", "/proc/self/status"), "Seccomp"); got != "2" {
			t.Errorf("Seccomp %s, want 2", got)
		}
		if _, errOut, code := execIn(t, c, uid, "main", "mkdir", "/tmp/denied"); code == 0 || !strings.Contains(errOut, "Operation not permitted") {
			t.Errorf("mkdir under the profile: exit %d %q, want Operation not permitted", code, errOut)
		}
		execOK(t, c, uid, "main", "touch", "/tmp/allowed")
	})

	// Safe sysctls are set in the pod's namespaces (upstream sysctl.go
	// "should support sysctls").
	t.Run("safe sysctls", func(t *testing.T) {
		t.Parallel()
		const name = "sec-sysctl"
		h.addPod(t, name+".yaml", name, manifest(t, name, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
				{Name: "kernel.shm_rmid_forced", Value: "1"},
				{Name: "net.ipv4.ip_local_port_range", Value: "32768 32999"},
			}}
			p.Spec.Containers = []v1.Container{sleeperAs("main", nil)}
		}))
		p := h.waitRunning(t, name)
		uid := string(p.UID)
		if got := strings.TrimSpace(execOK(t, c, uid, "main", "cat", "/proc/sys/kernel/shm_rmid_forced")); got != "1" {
			t.Errorf("kernel.shm_rmid_forced = %q, want 1", got)
		}
		if got := strings.Join(strings.Fields(execOK(t, c, uid, "main", "cat", "/proc/sys/net/ipv4/ip_local_port_range")), " "); got != "32768 32999" {
			t.Errorf("net.ipv4.ip_local_port_range = %q, want 32768 32999", got)
		}
	})

	// An unsafe sysctl is refused at admission (upstream sysctl.go "should
	// not launch unsafe, but not explicitly enabled sysctls on the node").
	t.Run("unsafe sysctl refused", func(t *testing.T) {
		t.Parallel()
		const name = "sec-sysctl-unsafe"
		h.addPod(t, name+".yaml", name, unsafeSysctlPod(t, name))
		p := h.waitPod(t, name, podStartTimeout, "to fail with SysctlForbidden", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed
		})
		if p.Status.Reason != "SysctlForbidden" || !strings.Contains(p.Status.Message, `forbidden sysctl: "kernel.msgmax" not allowlisted`) {
			t.Errorf("status reason %q message %q, want SysctlForbidden / forbidden sysctl: \"kernel.msgmax\" not allowlisted", p.Status.Reason, p.Status.Message)
		}
		if n := len(c.podSandboxes(t, string(p.UID))); n != 0 {
			t.Errorf("refused pod has %d sandboxes, want none", n)
		}
	})

	// shareProcessNamespace: one container sees the other's processes;
	// hostPID: the host's (upstream "should be able to see processes of
	// other containers" and host PID namespace tests).
	t.Run("process namespaces", func(t *testing.T) {
		t.Parallel()
		const shared, host = "sec-sharepid", "sec-hostpid"
		h.addPod(t, shared+".yaml", shared, manifest(t, shared, func(p *v1.Pod) {
			p.Spec.ShareProcessNamespace = ptrTo(true)
			p.Spec.Containers = []v1.Container{shContainer("marker", "exec sleep 3601"), sleeperAs("viewer", nil)}
		}))
		h.addPod(t, host+".yaml", host, manifest(t, host, func(p *v1.Pod) {
			p.Spec.HostPID = true
			p.Spec.Containers = []v1.Container{sleeperAs("viewer", nil)}
		}))
		p := h.waitRunning(t, shared)
		if ps := execOK(t, c, string(p.UID), "viewer", "ps", "-o", "pid,args"); !strings.Contains(ps, "sleep 3601") {
			t.Errorf("shareProcessNamespace: viewer does not see the marker container:\n%s", ps)
		}
		p = h.waitRunning(t, host)
		ps := execOK(t, c, string(p.UID), "viewer", "ps", "-o", "pid,args")
		if !strings.Contains(ps, "containerd") {
			t.Errorf("hostPID: the host's containerd is not visible:\n%s", ps)
		}
		if !strings.Contains(ps, heartletBin) {
			t.Errorf("hostPID: heartlet (%s) is not visible:\n%s", heartletBin, ps)
		}
	})

	// runAsNonRoot with the root busybox image is refused with upstream's
	// message; with runAsUser 1000 it runs ("should not run with an
	// explicit root user ID", "should run with an explicit non-root user
	// ID", "should not run without a specified user ID").
	t.Run("runAsNonRoot", func(t *testing.T) {
		t.Parallel()
		const refused, accepted = "sec-nonroot", "sec-nonroot-uid"
		h.addPod(t, refused+".yaml", refused, manifest(t, refused, func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{sleeperAs("main", &v1.SecurityContext{RunAsNonRoot: ptrTo(true)})}
		}))
		h.addPod(t, accepted+".yaml", accepted, manifest(t, accepted, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptrTo(true)}
			p.Spec.Containers = []v1.Container{sleeperAs("main", &v1.SecurityContext{RunAsUser: ptrTo(int64(1000))})}
		}))
		p := h.waitPod(t, refused, podStartTimeout, "to wait with CreateContainerConfigError", func(p *v1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
		})
		want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: main)",
			fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID))
		if got := p.Status.ContainerStatuses[0].State.Waiting.Message; got != want {
			t.Errorf("waiting message %q, want %q", got, want)
		}
		if n := len(c.podContainers(t, string(p.UID), "main")); n != 0 {
			t.Errorf("%d containers created for the refused container, want 0", n)
		}
		p = h.waitRunning(t, accepted)
		if u, _, _ := idOf(t, execOK(t, c, string(p.UID), "main", "id")); u != 1000 {
			t.Errorf("runAsUser 1000: uid %d", u)
		}
	})
}

func unsafeSysctlPod(t *testing.T, name string) string {
	return manifest(t, name, func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000"}}}
		p.Spec.Containers = []v1.Container{sleeperAs("main", nil)}
	})
}

// With allowedUnsafeSysctls the same unsafe sysctl is admitted and set
// (upstream sysctl.go "should support unsafe sysctls which are actually
// allowed").
func TestSecurityUnsafeSysctlAllowed(t *testing.T) {
	h := newHeartlet(t, "allowedUnsafeSysctls:\n- kernel.msg*\n")
	t.Cleanup(h.cleanup)
	h.start()
	c := newCRI(t)
	const name = "sec-sysctl-allowed"
	h.addPod(t, name+".yaml", name, unsafeSysctlPod(t, name))
	p := h.waitRunning(t, name)
	if got := strings.TrimSpace(execOK(t, c, string(p.UID), "main", "cat", "/proc/sys/kernel/msgmax")); got != "10000" {
		t.Errorf("kernel.msgmax = %q, want 10000", got)
	}
}

// In cluster mode, a pod created with kubectl: runAsNonRoot with the root
// image waits with CreateContainerConfigError and upstream's message, an
// unsafe sysctl fails the pod with SysctlForbidden, and a runAsUser pod
// with fsGroup runs as that user with its ConfigMap volume in fsGroup.
func TestClusterSecurityContext(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	c := newCRI(t)

	t.Run("runAsNonRoot refused", func(t *testing.T) {
		const name = "api-sec-nonroot"
		createPod(t, apiPod(name, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptrTo(true)}
		}))
		p := waitAPIPod(t, h, name, podStartTimeout, "to wait with CreateContainerConfigError", func(p *v1.Pod) bool {
			return waitingReason(p, "main") == "CreateContainerConfigError"
		})
		want := fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: main)",
			fmt.Sprintf("%s_%s(%s)", p.Name, p.Namespace, p.UID))
		if got := p.Status.ContainerStatuses[0].State.Waiting.Message; got != want {
			t.Errorf("waiting message %q, want %q", got, want)
		}
		waitFor(t, 30*time.Second, "a Failed event naming runAsNonRoot", func() (bool, string) {
			evs, err := podEvents(name, "Failed")
			if err != nil {
				return false, err.Error()
			}
			for _, e := range evs {
				if strings.Contains(e.Message, "runAsNonRoot and image will run as root") {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d Failed events", len(evs))
		})
	})

	t.Run("unsafe sysctl refused", func(t *testing.T) {
		const name = "api-sec-sysctl"
		createPod(t, apiPod(name, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "10000"}}}
		}))
		p := waitAPIPod(t, h, name, podStartTimeout, "to fail", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "SysctlForbidden" || !strings.Contains(p.Status.Message, "forbidden sysctl") {
			t.Errorf("reason %q message %q, want SysctlForbidden / forbidden sysctl", p.Status.Reason, p.Status.Message)
		}
	})

	t.Run("runAsUser and fsGroup", func(t *testing.T) {
		const name = "api-sec-user"
		cm := &v1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-sec-cm", Namespace: "default"},
			Data:       map[string]string{"key": "value"},
		}
		createObject(t, cm, "configmap", cm.Name)
		createPod(t, apiPod(name, func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(1000)), FSGroup: ptrTo(int64(2000))}
			p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: cm.Name}, DefaultMode: ptrTo(int32(0o400)),
			}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		}))
		p := waitAPIPodRunning(t, h, name)
		uid := string(p.UID)
		u, _, groups := idOf(t, execOK(t, c, uid, "main", "id"))
		if u != 1000 || !hasAll(groups, 2000) {
			t.Errorf("uid %d groups %v, want 1000 with group 2000", u, groups)
		}
		mode, gid := lsOwner(t, execOK(t, c, uid, "main", "ls", "-lnL", "/cfg/key"))
		if gid != 2000 || mode != "-r--r-----" {
			t.Errorf("configMap file: mode %s group %d, want -r--r----- group 2000", mode, gid)
		}
		if got := execOK(t, c, uid, "main", "cat", "/cfg/key"); got != "value" {
			t.Errorf("user 1000 reads %q from the configMap file, want value", got)
		}
	})
}
