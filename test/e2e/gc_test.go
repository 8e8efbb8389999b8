//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/heartlet/heartlet/internal/criclient"
)

// smallContainerd is a containerd of its own whose root (and so image
// filesystem) is a small loop-mounted ext4 filesystem, sharing the test
// environment's CNI configuration and registry.
type smallContainerd struct {
	dir      string
	root     string // the mounted filesystem
	sock     string
	endpoint string
	cmd      *exec.Cmd
	rs       internalapi.RuntimeService
	is       internalapi.ImageManagerService
}

// startSmallContainerd makes a size-byte ext4 filesystem in a file, mounts
// it, runs containerd with its root there, and undoes it all when the
// test ends: every sandbox removed, containerd stopped, the filesystem
// unmounted.
func startSmallContainerd(t *testing.T, size int64) *smallContainerd {
	t.Helper()
	for _, tool := range []string{"containerd", "mkfs.ext4", "ctr", "umoci", "skopeo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "hl-gc-")
	if err != nil {
		t.Fatal(err)
	}
	c := &smallContainerd{dir: dir, root: filepath.Join(dir, "root"), sock: filepath.Join(dir, "c.sock")}
	c.endpoint = "unix://" + c.sock
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	img := filepath.Join(dir, "fs.ext4")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.ext4", "-q", "-F", "-m", "0", img)
	for _, d := range []string{c.root, filepath.Join(dir, "state"), filepath.Join(dir, "runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "mount", "-o", "loop", img, c.root)
	t.Cleanup(func() {
		if err := syscall.Unmount(c.root, 0); err != nil {
			t.Errorf("unmount %s: %v", c.root, err)
			_ = syscall.Unmount(c.root, syscall.MNT_DETACH)
		}
	})
	envRun := envRunDir()
	pause := pauseImage()
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
oom_score = 0
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[4]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[5]q
    restrict_oom_score_adj = true
    disable_apparmor = true
    enable_selinux = false
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "/usr/sbin/runc"
          Root = %[6]q
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = %[7]q
      max_conf_num = 1
`, filepath.Join(c.root, "containerd"), filepath.Join(dir, "state"), c.sock, filepath.Join(dir, "opt"), pause,
		filepath.Join(dir, "runc"), filepath.Join(envRun, "cni", "net.d"))
	c.launch(t, "containerd", config, nil)
	return c
}

// launch writes config and runs the containerd binary with it, its log
// beside the config (shown when the test fails), and undoes it when the
// test ends: every sandbox removed, containerd stopped. env, when not
// nil, is the process environment.
func (c *smallContainerd) launch(t *testing.T, binary, config string, env []string) {
	t.Helper()
	dir := c.dir
	cfgPath := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(binary, "--config", cfgPath)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.Env = env
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = c.cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		c.removeEverything(t)
		if c.rs != nil {
			_ = c.rs.Close(context.Background())
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("containerd did not exit within 30s of SIGTERM; killing it")
			_ = c.cmd.Process.Kill()
			<-exited
		}
		// Mounts containerd may have left below its state directory.
		_ = syscall.Unmount(filepath.Join(dir, "state"), syscall.MNT_DETACH)
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "containerd.log")); err == nil {
				t.Logf("containerd log:\n%s", tail(string(b), 200))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitFor(t, 30*time.Second, "the small containerd's socket", func() (bool, string) {
		_, err := os.Stat(c.sock)
		return err == nil, fmt.Sprint(err)
	})
	if c.rs, err = criclient.NewRuntimeService(ctx, c.endpoint, 30*time.Second); err != nil {
		t.Fatalf("connect to %s: %v", c.endpoint, err)
	}
	if c.is, err = criclient.NewImageService(ctx, c.endpoint, 30*time.Second); err != nil {
		t.Fatalf("connect to %s: %v", c.endpoint, err)
	}
}

// envRunDir is hack/env.sh's run directory (its CNI configuration).
func envRunDir() string {
	if d := os.Getenv("HEARTLET_ENV_RUN"); d != "" {
		return d
	}
	return "/run/heartlet-env"
}

// pauseImage is the environment's sandbox image.
func pauseImage() string {
	if p := os.Getenv("HEARTLET_PAUSE_IMAGE"); p != "" {
		return p
	}
	return "localhost:5000/pause:3.10"
}

// removeEverything stops and removes every sandbox (and so container).
func (c *smallContainerd) removeEverything(t *testing.T) {
	if c.rs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sbs, err := c.rs.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Logf("list sandboxes of the small containerd: %v", err)
		return
	}
	for _, sb := range sbs {
		if err := c.rs.StopPodSandbox(ctx, sb.Id); err != nil {
			t.Logf("stop sandbox %s: %v", sb.Id, err)
		}
		if err := c.rs.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Logf("remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// images returns the tags of the images the small containerd has.
func (c *smallContainerd) images(t *testing.T) []string {
	t.Helper()
	ctx, cancel := ctx30()
	defer cancel()
	list, err := c.is.ListImages(ctx, nil)
	if err != nil {
		t.Fatalf("list images: %v", err)
	}
	var out []string
	for _, im := range list {
		out = append(out, im.RepoTags...)
	}
	slices.Sort(out)
	return out
}

// usage is the image filesystem's capacity and used bytes.
func (c *smallContainerd) usage(t *testing.T) (capacity, used uint64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.root, &st); err != nil {
		t.Fatal(err)
	}
	capacity = st.Blocks * uint64(st.Bsize)
	return capacity, capacity - st.Bavail*uint64(st.Bsize)
}

// importImage builds an image from the busybox image with one more layer
// of extraMiB random MiB (so that its ID and layers are its own) and
// imports it into the small containerd as ref.
func (c *smallContainerd) importImage(t *testing.T, ref string, extraMiB int) {
	t.Helper()
	src := os.Getenv("HEARTLET_IMAGE_DIR")
	if src == "" {
		src = "/var/cache/heartlet/images"
	}
	work := t.TempDir()
	layout := filepath.Join(work, "layout")
	run(t, "cp", "-r", filepath.Join(src, "busybox"), layout)
	bundle := filepath.Join(work, "bundle")
	run(t, "umoci", "unpack", "--image", layout+":1.35", bundle)
	run(t, "dd", "if=/dev/urandom", "of="+filepath.Join(bundle, "rootfs", "extra"), "bs=1M", fmt.Sprintf("count=%d", extraMiB), "status=none")
	run(t, "umoci", "repack", "--image", layout+":new", bundle)
	archive := filepath.Join(work, "image.tar")
	run(t, "skopeo", "copy", "-q", "oci:"+layout+":new", "docker-archive:"+archive+":"+ref)
	run(t, "ctr", "-a", c.sock, "-n", "k8s.io", "images", "import", archive)
}

// startOn runs h against the small containerd.
func (h *heartlet) startOn(c *smallContainerd) {
	h.t.Helper()
	h.run("standalone",
		"--config", h.configPath,
		"--root-dir", h.rootDir,
		"--pod-manifest-path", h.manifestDir,
		"--container-runtime-endpoint", c.endpoint,
		"--hostname-override", nodeName,
		"--v", "2",
		"--anonymous-auth=true", "--authentication-token-webhook=false", "--authorization-mode=AlwaysAllow",
	)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// TestImageGCFreesTheImageFilesystem runs heartlet on a containerd whose
// image filesystem is a 256 MiB loop-mounted ext4. It holds the sandbox
// (pause) image, busybox used by a running pod, an image used only by
// the exited container of a finished pod, and an unused image of 24 MiB.
// A ballast file brings the filesystem's usage above
// imageGCHighThresholdPercent (set a few points above the usage measured
// once the pods run): image garbage collection removes the unused image,
// and only it, and the usage falls below imageGCLowThresholdPercent; the
// running pod is not touched and the metric counts the removal.
func TestImageGCFreesTheImageFilesystem(t *testing.T) {
	c := startSmallContainerd(t, 256<<20)
	const (
		freeImage   = "localhost:5000/gc-free:1"
		exitedImage = "localhost:5000/gc-exited:1"
	)
	c.importImage(t, freeImage, 24)
	c.importImage(t, exitedImage, 1)

	// First without image GC, to run the pods and measure.
	h := newHeartlet(t, "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n")
	t.Cleanup(h.cleanup)
	h.startOn(c)
	h.writeManifest(t, "gc-running.yaml", manifest(t, "gc-running", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("sleep", sleeper)}
	}))
	h.writeManifest(t, "gc-exited.yaml", manifest(t, "gc-exited", func(p *v1.Pod) {
		p.Spec.RestartPolicy = v1.RestartPolicyNever
		p.Spec.Containers = []v1.Container{{Name: "done", Image: exitedImage, ImagePullPolicy: v1.PullNever, Command: []string{"true"}}}
	}))
	t.Cleanup(func() {
		// heartlet removes the pods (and their cgroups and directories)
		// before it stops.
		h.removeManifest(t, "gc-running.yaml")
		h.removeManifest(t, "gc-exited.yaml")
		if !h.running() {
			return
		}
		waitFor(t, podRemoveTimeout, "the pods removed", func() (bool, string) {
			ctx, cancel := ctx30()
			defer cancel()
			sbs, err := c.rs.ListPodSandbox(ctx, nil)
			return err == nil && len(sbs) == 0, fmt.Sprintf("%d sandboxes, %v", len(sbs), err)
		})
	})
	h.waitRunning(t, "gc-running")
	h.waitPod(t, "gc-exited", podStartTimeout, "to succeed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	before := c.images(t)
	for _, want := range []string{freeImage, exitedImage, busyboxImage} {
		if !slices.Contains(before, want) {
			t.Fatalf("images before GC = %v; %s missing", before, want)
		}
	}
	h.stop()

	capacity, used := c.usage(t)
	high := int(used*100/capacity) + 3
	low := high - 5
	// Fill to high+1.5% with a ballast file beside containerd's root.
	target := capacity * uint64(2*high+3) / 200
	ballast := filepath.Join(c.root, "ballast")
	run(t, "dd", "if=/dev/zero", "of="+ballast, "bs=1M", fmt.Sprintf("count=%d", (target-used+(1<<20)-1)>>20), "conv=fsync", "status=none")
	_, used = c.usage(t)
	t.Logf("image filesystem: %d MiB, %d MiB used (%.1f%%); imageGCHighThresholdPercent %d, imageGCLowThresholdPercent %d",
		capacity>>20, used>>20, float64(used)*100/float64(capacity), high, low)

	config, err := os.ReadFile(h.configPath)
	if err != nil {
		t.Fatal(err)
	}
	config = []byte(strings.Replace(strings.Replace(string(config),
		"imageGCHighThresholdPercent: 100", fmt.Sprintf("imageGCHighThresholdPercent: %d", high), 1),
		"imageGCLowThresholdPercent: 99", fmt.Sprintf("imageGCLowThresholdPercent: %d", low), 1))
	if err := os.WriteFile(h.configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	h.startOn(c)
	// The first pass runs 30 s after the start.
	waitFor(t, 2*time.Minute, "image GC to remove "+freeImage, func() (bool, string) {
		now := c.images(t)
		return !slices.Contains(now, freeImage), fmt.Sprint(now)
	})
	t.Logf("unused image removed %v after the start", time.Since(started).Round(time.Second))
	after := c.images(t)
	for _, keep := range []string{exitedImage, busyboxImage} {
		if !slices.Contains(after, keep) {
			t.Errorf("images after GC = %v; %s, in use, was removed", after, keep)
		}
	}
	pause := pauseImage()
	if !slices.Contains(after, pause) {
		t.Errorf("images after GC = %v; the sandbox image %s was removed", after, pause)
	}
	if _, used := c.usage(t); used*100 > capacity*uint64(low) {
		t.Errorf("usage after GC %.1f%%, want at most the low threshold %d%%", float64(used)*100/float64(capacity), low)
	}
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_image_garbage_collected_total", "reason", "space"); !ok || v != 1 {
		t.Errorf("kubelet_image_garbage_collected_total{reason=space} = %v (present %v), want 1", v, ok)
	}
	p := h.waitRunning(t, "gc-running")
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("running pod touched: %s", describeStatus(p))
	}
	if p, err := h.pod("gc-exited"); err != nil || p == nil || p.Status.Phase != v1.PodSucceeded {
		t.Errorf("finished pod: %v %v", err, p)
	}
	if err := os.Remove(ballast); err != nil {
		t.Error(err)
	}
}

// TestContainerGCCrashLoop runs a crash-looping pod: after restarts only
// the running (or starting) instance and the newest dead one are left in
// the runtime, with only their log files; once the pod is deleted, none
// of its sandboxes or containers is left.
func TestContainerGCCrashLoop(t *testing.T) {
	h := startHeartlet(t)
	cr := newCRI(t)
	h.addPod(t, "gc-crash.yaml", "gc-crash", manifest(t, "gc-crash", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("crash", "echo started; sleep 1; exit 1")}
	}))
	p := h.waitPod(t, "gc-crash", 3*time.Minute, "to have restarted twice", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	uid := string(p.UID)
	waitFor(t, 90*time.Second, "at most one dead instance and its log", func() (bool, string) {
		cs := cr.podContainers(t, uid, "crash")
		dead := 0
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				dead++
			}
		}
		logs, _ := filepath.Glob(filepath.Join(h.podLogsDir, "default_"+p.Name+"_"+uid, "crash", "*.log*"))
		return dead <= 1 && len(cs) <= 2 && len(logs) <= len(cs), fmt.Sprintf("%d containers (%d dead), logs %v", len(cs), dead, logs)
	})
	if st := p.Status.ContainerStatuses[0]; st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("lastState = %+v, want terminated with exit code 1", st.LastTerminationState)
	}
	h.removeManifest(t, "gc-crash.yaml")
	waitFor(t, podRemoveTimeout, "the deleted pod's sandboxes and containers gone", func() (bool, string) {
		n := len(cr.podContainers(t, uid, "")) + len(cr.podSandboxes(t, uid))
		return n == 0, fmt.Sprintf("%d left", n)
	})
	if logs, _ := filepath.Glob(filepath.Join(h.podLogsDir, "default_"+p.Name+"_"+uid, "*")); len(logs) != 0 {
		t.Errorf("logs of the deleted pod left: %v", logs)
	}
}

// TestEvictionReclaimsImagesFirst runs heartlet on the small image
// filesystem with image garbage collection off and an evictionHard
// imagefs.available threshold a few points above what a ballast file
// leaves available: the eviction manager first removes the unused image
// (node-level reclaim), which brings the signal back above the threshold,
// so the BestEffort pod that would be its victim keeps running and
// nothing is evicted.
func TestEvictionReclaimsImagesFirst(t *testing.T) {
	c := startSmallContainerd(t, 256<<20)
	const freeImage = "localhost:5000/gc-free:1"
	c.importImage(t, freeImage, 24)

	h := newHeartlet(t, "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n")
	t.Cleanup(h.cleanup)
	h.startOn(c)
	h.writeManifest(t, "reclaim-victim.yaml", manifest(t, "reclaim-victim", func(p *v1.Pod) {
		p.Spec.Containers = []v1.Container{shContainer("sleep", sleeper)}
	}))
	t.Cleanup(func() {
		h.removeManifest(t, "reclaim-victim.yaml")
		if !h.running() {
			return
		}
		waitFor(t, podRemoveTimeout, "the pod removed", func() (bool, string) {
			ctx, cancel := ctx30()
			defer cancel()
			sbs, err := c.rs.ListPodSandbox(ctx, nil)
			return err == nil && len(sbs) == 0, fmt.Sprintf("%d sandboxes, %v", len(sbs), err)
		})
	})
	h.waitRunning(t, "reclaim-victim")
	h.stop()

	capacity, used := c.usage(t)
	// Leave 40% available; the threshold is at 43%, the unused image is
	// about 10% of the filesystem.
	target := capacity * 60 / 100
	if used >= target {
		t.Fatalf("the image filesystem is already %d%% used", used*100/capacity)
	}
	ballast := filepath.Join(c.root, "ballast")
	run(t, "dd", "if=/dev/zero", "of="+ballast, "bs=1M", fmt.Sprintf("count=%d", (target-used)>>20), "conv=fsync", "status=none")
	config, err := os.ReadFile(h.configPath)
	if err != nil {
		t.Fatal(err)
	}
	config = append(config, []byte("evictionHard:\n  imagefs.available: \"43%\"\nevictionPressureTransitionPeriod: 10s\n")...)
	if err := os.WriteFile(h.configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	_, used = c.usage(t)
	t.Logf("image filesystem: %d MiB, %.1f%% available; evictionHard imagefs.available<43%%", capacity>>20, 100-float64(used)*100/float64(capacity))
	h.startOn(c)
	// The image leaves the runtime's list before containerd's garbage
	// collection has deleted its content, so wait for the space as well.
	waitFor(t, 90*time.Second, "node-level reclaim to remove "+freeImage+" and free the space", func() (bool, string) {
		now := c.images(t)
		_, used := c.usage(t)
		avail := 100 - float64(used)*100/float64(capacity)
		return !slices.Contains(now, freeImage) && avail >= 43, fmt.Sprintf("images %v, %.1f%% available", now, avail)
	})
	// Two more passes on fresh stats: nobody is evicted.
	time.Sleep(25 * time.Second)
	p := h.waitRunning(t, "reclaim-victim")
	if p.Status.Reason == "Evicted" || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod touched by the eviction manager: %s", describeStatus(p))
	}
	mfs := families(t, scrape(t, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/metrics", h.roPort)))
	if v, ok := sample(mfs, "kubelet_evictions", "eviction_signal", "imagefs.available"); ok && v != 0 {
		t.Errorf("kubelet_evictions{eviction_signal=imagefs.available} = %v, want none", v)
	}
	if !h.logContains("node-level reclaim freed disk") {
		t.Error("heartlet's log does not mention the node-level reclaim")
	}
	if !slices.Contains(c.images(t), busyboxImage) {
		t.Errorf("images after reclaim = %v; the running pod's image was removed", c.images(t))
	}
	if err := os.Remove(ballast); err != nil {
		t.Error(err)
	}
}
