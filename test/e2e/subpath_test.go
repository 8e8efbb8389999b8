//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// subPathVictims is how many init containers mount the attacked subPath,
// each a fresh mount; the app container adds its restarts.
const subPathVictims = 10

// subPathAppStarts is how many starts of the app container the test waits
// for.
const subPathAppStarts = 5

// TestSubPathSymlinkRace attacks subPath mounting as CVE-2017-1002101 and
// CVE-2021-25741 did: a sidecar swaps the directory "d" of an emptyDir
// between a real directory (for 0.4 s) and a symbolic link to a host
// directory that holds a marker file (for 0.2 s), while init containers
// and a restarting app container mount that directory by subPath. (Swapped
// as fast as it can, the directory never lives from heartlet's opening it
// to the runtime's mount, so no container ever starts: the runtime cannot
// mount a removed directory, and the test would only wait.) None of them
// may ever see the marker. Then: restarts do not stack mounts, the subPath
// mounts of a pod removed normally are gone, and so are those of a pod
// removed while heartlet was down (killed with SIGKILL).
func TestSubPathSymlinkRace(t *testing.T) {
	h := newHeartlet(t, "crashLoopBackOff:\n  maxContainerRestartPeriod: 1s\n")
	t.Cleanup(h.cleanup)
	// Registered after the temporary directory: runs before its removal,
	// which must never go through a mount left by a failed run.
	t.Cleanup(func() { unmountLeftovers(t, h.rootDir) })
	h.start()

	hostDir := filepath.Join(t.TempDir(), "host-secret")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostDir, "marker"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The attacker: a sidecar with the whole emptyDir.
	attacker := shContainer("attacker", fmt.Sprintf(`trap 'exit 0' TERM
while true; do
  rm -rf /v/d; mkdir /v/d; touch /v/d/inside; sleep 0.4
  rm -rf /v/d; ln -s %s /v/d; sleep 0.2
done`, hostDir))
	always := v1.ContainerRestartPolicyAlways
	attacker.RestartPolicy = &always
	attacker.VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: "/v"}}
	// A victim records what its subPath mount shows.
	victim := func(name string) v1.Container {
		c := shContainer(name, `if [ -e /mnt/marker ]; then r=HOST; elif [ -e /mnt/inside ]; then r=inside; else r=empty; fi
echo "$NAME $r" >> /r/log`)
		c.Env = []v1.EnvVar{{Name: "NAME", Value: name}}
		c.VolumeMounts = []v1.VolumeMount{
			{Name: "shared", MountPath: "/mnt", SubPath: "d"},
			{Name: "results", MountPath: "/r"},
		}
		return c
	}
	h.addPod(t, "subpath-race.yaml", "subpath-race", manifest(t, "subpath-race", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{
			{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "results", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}
		p.Spec.InitContainers = []v1.Container{attacker}
		for i := range subPathVictims {
			p.Spec.InitContainers = append(p.Spec.InitContainers, victim(fmt.Sprintf("victim-%d", i)))
		}
		// Exits at once and is restarted (back-off capped at 1 s).
		p.Spec.Containers = []v1.Container{victim("app")}
	}))
	pod := h.waitPod(t, "subpath-race", podStartTimeout, "to exist with a UID", func(p *v1.Pod) bool { return p.UID != "" })
	podDir := filepath.Join(h.rootDir, "pods", string(pod.UID))
	logPath := filepath.Join(podDir, "volumes/kubernetes.io~empty-dir/results/log")
	subPaths := filepath.Join(podDir, "volume-subpaths")

	var lines []string
	maxStacked := 0
	waitFor(t, 6*time.Minute, fmt.Sprintf("%d victims and %d app starts", subPathVictims, subPathAppStarts), func() (bool, string) {
		// Restarts never stack mounts on one target.
		for _, n := range countByPath(mountsUnder(t, subPaths)) {
			maxStacked = max(maxStacked, n)
		}
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, err.Error()
		}
		lines = strings.Split(strings.TrimSpace(string(data)), "\n")
		victims, app := 0, 0
		for _, l := range lines {
			if strings.HasPrefix(l, "app ") {
				app++
			} else {
				victims++
			}
		}
		return victims >= subPathVictims && app >= subPathAppStarts, fmt.Sprintf("%d victim and %d app lines", victims, app)
	})
	seen := map[string]int{}
	for _, l := range lines {
		_, r, _ := strings.Cut(l, " ")
		seen[r]++
	}
	t.Logf("%d container starts saw: %v", len(lines), seen)
	if n := seen["HOST"]; n > 0 {
		t.Errorf("%d of %d container starts saw the host directory's marker through their subPath", n, len(lines))
	}
	if maxStacked > 1 {
		t.Errorf("up to %d mounts stacked on one subPath target", maxStacked)
	}
	if got := mountsUnder(t, subPaths); len(got) == 0 || len(got) > subPathVictims+1 {
		t.Errorf("%d subPath mounts for %d containers: %v", len(got), subPathVictims+1, got)
	}

	// Removed normally: the mounts and the pod directory go.
	h.removeManifest(t, "subpath-race.yaml")
	h.waitPodGone(t, "subpath-race")
	waitFor(t, podRemoveTimeout, "the pod's mounts and directory to be removed", func() (bool, string) {
		left := mountsUnder(t, podDir)
		_, err := os.Stat(podDir)
		return len(left) == 0 && errors.Is(err, os.ErrNotExist), fmt.Sprintf("mounts %v, pod directory: %v", left, err)
	})

	// Removed while heartlet was down: found again after the restart.
	plain := shContainer("main", sleeper)
	plain.VolumeMounts = []v1.VolumeMount{{Name: "shared", MountPath: "/mnt", SubPath: "a/b"}}
	h.addPod(t, "subpath-kill.yaml", "subpath-kill", manifest(t, "subpath-kill", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		p.Spec.Containers = []v1.Container{plain}
	}))
	pod = h.waitRunning(t, "subpath-kill")
	podDir = filepath.Join(h.rootDir, "pods", string(pod.UID))
	if got := mountsUnder(t, filepath.Join(podDir, "volume-subpaths")); len(got) != 1 {
		t.Fatalf("subPath mounts of the running pod: %v, want one", got)
	}
	h.kill()
	h.removeManifest(t, "subpath-kill.yaml")
	h.start()
	h.waitPodGone(t, "subpath-kill")
	waitFor(t, podRemoveTimeout, "the killed heartlet's pod mounts and directory to be removed", func() (bool, string) {
		left := mountsUnder(t, podDir)
		_, err := os.Stat(podDir)
		return len(left) == 0 && errors.Is(err, os.ErrNotExist), fmt.Sprintf("mounts %v, pod directory: %v", left, err)
	})
}

// mountsUnder lists the mount points at or below dir in heartlet's (the
// host's) mount table, one entry per mount.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mountinfo: %v", err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := f[4]; mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

func countByPath(paths []string) map[string]int {
	n := map[string]int{}
	for _, p := range paths {
		n[p]++
	}
	return n
}
