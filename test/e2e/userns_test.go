//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// containerd2Dir holds containerd 2.x, its runc shim and a runc new enough
// for user namespaces with idmapped mounts (hack/setup.sh builds them).
func containerd2Dir() string {
	if d := os.Getenv("HEARTLET_CONTAINERD2_DIR"); d != "" {
		return d
	}
	return "/var/cache/heartlet/containerd2/bin"
}

// startContainerd2 runs a containerd 2.x of its own (its own root, state,
// socket and copy of the environment's CNI configuration, so that a
// restart of the environment's containerd does not touch it) with the
// runc built beside it.
func startContainerd2(t *testing.T) *smallContainerd {
	t.Helper()
	bin := containerd2Dir()
	for _, f := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Skipf("containerd 2.x is not built (hack/setup.sh builds it into %s): %v", bin, err)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "hl-c2-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The pods' mapped users must reach their rootfs below the state
	// directory, as below /run/containerd (MkdirTemp makes 0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &smallContainerd{dir: dir, root: filepath.Join(dir, "root"), sock: filepath.Join(dir, "c.sock")}
	c.endpoint = "unix://" + c.sock
	netd := filepath.Join(dir, "net.d")
	for _, d := range []string{c.root, netd, filepath.Join(dir, "state"), filepath.Join(dir, "runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	envRun := envRunDir()
	conflists, _ := filepath.Glob(filepath.Join(envRun, "cni", "net.d", "*.conflist"))
	if len(conflists) == 0 {
		t.Fatalf("no CNI configuration in %s/cni/net.d (is hack/env.sh started?)", envRun)
	}
	for _, f := range conflists {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(netd, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pause := pauseImage()
	// containerd 2.x reads version 3 configurations: the CRI images and
	// runtime plugins are separate.
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
oom_score = 0
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = %[5]q
  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    restrict_oom_score_adj = true
    disable_apparmor = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = %[6]q
          Root = %[7]q
          SystemdCgroup = false
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = %[8]q
      max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`, c.root, filepath.Join(dir, "state"), c.sock, filepath.Join(dir, "opt"), pause,
		filepath.Join(bin, "runc"), filepath.Join(dir, "runc"), netd)
	// The shim is found on PATH: the one built with this containerd.
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	c.launch(t, filepath.Join(bin, "containerd"), config, env)
	t.Cleanup(func() {
		// Namespace and shm mounts containerd 2.x keeps below its state.
		out, _ := exec.Command("sh", "-c", "grep -o ' "+dir+"/[^ ]*' /proc/self/mounts | sort -r").Output()
		for _, m := range strings.Fields(string(out)) {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	return c
}

// usernsPod writes the user namespace mapping the container sees, whether
// /proc/keys is masked, and the owner of a file it creates in an
// emptyDir, then sleeps. unmasked sets procMount: Unmasked.
func usernsPod(t *testing.T, name string, unmasked bool) string {
	return manifest(t, name, func(p *v1.Pod) {
		p.Spec.HostUsers = ptr.To(false)
		p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		c := shContainer("app", `echo "map $(cat /proc/self/uid_map)"; echo "id $(id -u)"; echo "masked $(grep -c ' /proc/keys ' /proc/self/mounts)"; touch /scratch/mine && echo "owner $(stat -c %u /scratch/mine)"; `+sleeper)
		c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		if unmasked {
			c.SecurityContext = &v1.SecurityContext{ProcMount: ptr.To(v1.UnmaskedProcMount)}
		}
		p.Spec.Containers = []v1.Container{c}
	})
}

// userMapping reads the "map" line a usernsPod logged: the host ID its
// root is mapped to and the mapping's length; and whether its /proc/keys
// was masked.
func userMapping(t *testing.T, h *heartlet, pod *v1.Pod) (host, length uint64, masked bool) {
	t.Helper()
	logPath := filepath.Join(h.podLogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID), "app", "0.log")
	var lines string
	waitFor(t, 30*time.Second, pod.Name+"'s output", func() (bool, string) {
		b, err := os.ReadFile(logPath)
		lines = string(b)
		return err == nil && strings.Contains(lines, "owner "), lines
	})
	for _, l := range strings.Split(lines, "\n") {
		i := strings.Index(l, " map ")
		if i < 0 {
			continue
		}
		f := strings.Fields(l[i+len(" map "):])
		if len(f) != 3 || f[0] != "0" {
			t.Fatalf("%s: uid_map %q, want one line mapping ID 0", pod.Name, l)
		}
		host, _ = strconv.ParseUint(f[1], 10, 32)
		length, _ = strconv.ParseUint(f[2], 10, 32)
	}
	for _, want := range []string{" id 0", " owner 0"} {
		if !strings.Contains(lines, want) {
			t.Fatalf("%s logged %q, want %q: root in its namespace, owning what it writes to its volume", pod.Name, lines, want)
		}
	}
	return host, length, strings.Contains(lines, " masked 1")
}

// TestUserNamespaces runs pods with hostUsers: false on a containerd 2.x
// that supports user namespaces (upstream's e2e "Security Context should
// be able to run a pod with hostUsers: false" and the user namespace
// semantics of KEP-127): each pod's root is mapped to 65536 host IDs of
// its own, from 65536 up, disjoint from every other pod's; it is root in
// its namespace and owns what it writes to its emptyDir, which on the host
// belongs to its mapped ID (the runtime idmaps the volume); its process on
// the host runs as that ID, never as root. The mapping is recorded in the
// pod directory in upstream's file, kept across a restart of heartlet
// (the pod is not restarted, and a new pod does not get its IDs), and
// removed with the pod.
func TestUserNamespaces(t *testing.T) {
	c := startContainerd2(t)
	h := newHeartlet(t, "")
	t.Cleanup(h.cleanup)
	h.startOn(c)
	t.Cleanup(func() {
		for _, f := range []string{"userns-a.yaml", "userns-b.yaml", "userns-c.yaml"} {
			h.removeManifest(t, f)
		}
		if h.running() {
			for _, n := range []string{"userns-a", "userns-b", "userns-c"} {
				h.waitPodGone(t, n)
			}
		}
	})
	h.writeManifest(t, "userns-a.yaml", usernsPod(t, "userns-a", false))
	h.writeManifest(t, "userns-b.yaml", usernsPod(t, "userns-b", true))
	a := h.waitRunning(t, "userns-a")
	b := h.waitRunning(t, "userns-b")
	hostA, lenA, maskedA := userMapping(t, h, a)
	hostB, lenB, maskedB := userMapping(t, h, b)
	// procMount: the default masks /proc/keys (and the other masked
	// paths); Unmasked, which the API allows only with hostUsers: false,
	// masks nothing.
	if !maskedA || maskedB {
		t.Errorf("/proc/keys masked: %v with the default procMount (want true), %v with Unmasked (want false)", maskedA, maskedB)
	}
	for _, m := range []struct {
		pod          *v1.Pod
		host, length uint64
	}{{a, hostA, lenA}, {b, hostB, lenB}} {
		if m.length != 65536 || m.host < 65536 || m.host%65536 != 0 {
			t.Errorf("%s: root mapped to %d+%d, want 65536 IDs from a multiple of 65536 at or above 65536", m.pod.Name, m.host, m.length)
		}
		scratch := filepath.Join(h.rootDir, "pods", string(m.pod.UID), "volumes", "kubernetes.io~empty-dir", "scratch", "mine")
		var st syscall.Stat_t
		if err := syscall.Stat(scratch, &st); err != nil {
			t.Errorf("%s: %v", m.pod.Name, err)
		} else if uint64(st.Uid) != m.host {
			t.Errorf("%s: the file its root wrote is owned by host user %d, want its mapped %d", m.pod.Name, st.Uid, m.host)
		}
		rec, err := os.ReadFile(filepath.Join(h.rootDir, "pods", string(m.pod.UID), "userns"))
		want := fmt.Sprintf(`{"uidMappings":[{"hostId":%d,"containerId":0,"length":65536}],"gidMappings":[{"hostId":%d,"containerId":0,"length":65536}]}`, m.host, m.host)
		if err != nil || string(rec) != want {
			t.Errorf("%s: recorded mapping %q (%v), want %q", m.pod.Name, rec, err, want)
		}
	}
	if hostA == hostB {
		t.Fatalf("pods a and b share host IDs %d", hostA)
	}
	assertProcessesRunAs(t, hostA, hostB)

	// A restart keeps both pods running, with their IDs, and a third pod
	// gets IDs of its own.
	before := containerIDs(t, h, "userns-a", "userns-b")
	h.stop()
	h.startOn(c)
	h.writeManifest(t, "userns-c.yaml", usernsPod(t, "userns-c", false))
	cpod := h.waitRunning(t, "userns-c")
	hostC, _, _ := userMapping(t, h, cpod)
	if hostC == hostA || hostC == hostB {
		t.Errorf("after a restart pod c got host IDs %d, which a running pod holds (a %d, b %d)", hostC, hostA, hostB)
	}
	h.waitRunning(t, "userns-a")
	h.waitRunning(t, "userns-b")
	after := containerIDs(t, h, "userns-a", "userns-b")
	for _, n := range []string{"userns-a", "userns-b"} {
		if before[n] == "" || before[n] != after[n] {
			t.Errorf("%s: container %q before the restart, %q after: restarted", n, before[n], after[n])
		}
	}

	// Removed with the pod.
	h.removeManifest(t, "userns-a.yaml")
	h.waitPodGone(t, "userns-a")
	waitFor(t, podRemoveTimeout, "pod a's directory removed", func() (bool, string) {
		_, err := os.Stat(filepath.Join(h.rootDir, "pods", string(a.UID)))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// containerIDs maps each named static pod of h to its first container's
// ID.
func containerIDs(t *testing.T, h *heartlet, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		p, err := h.pod(n)
		if err != nil || p == nil {
			t.Fatalf("pod %s: %v", n, err)
		}
		if len(p.Status.ContainerStatuses) > 0 {
			out[n] = p.Status.ContainerStatuses[0].ContainerID
		}
	}
	return out
}

// assertProcessesRunAs checks, from the host, that for each host ID a
// sleep process runs as that user: the pods' processes (their shell's
// sleeps) run as their mapped IDs, which no host process uses.
func assertProcessesRunAs(t *testing.T, hosts ...uint64) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	seen := map[uint64]bool{}
	for _, p := range procs {
		dir := filepath.Dir(p)
		cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		if !strings.Contains(string(cmd), "sleep") {
			continue
		}
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				uid, _ := strconv.ParseUint(f[1], 10, 32)
				seen[uid] = true
			}
		}
	}
	for _, h := range hosts {
		if !seen[h] {
			t.Errorf("no process runs as host user %d: the pod's processes are not in its user namespace", h)
		}
	}
}
