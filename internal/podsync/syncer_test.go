package podsync

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/heartlet/heartlet/internal/images"
	"github.com/heartlet/heartlet/internal/podresources"
	"github.com/heartlet/heartlet/internal/podworker"
	"github.com/heartlet/heartlet/internal/runtime"
	"github.com/heartlet/heartlet/internal/runtime/fakecri"
	"github.com/heartlet/heartlet/internal/status"
)

type harness struct {
	t      *testing.T
	ctx    context.Context
	fake   *fakecri.Server
	rt     *runtime.Runtime
	clock  *testingclock.FakeClock
	syncer *Syncer
	status *status.Manager
	images *fakeImages
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := fakecri.Start(t, fakecri.WithClock(clk))
	fake.AddImage("busybox:1.35")
	rt, err := runtime.New(ctx, fake.Endpoint(), 5*time.Second)
	if err != nil {
		t.Fatalf("connect to fake CRI: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch example.org\noptions ndots:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := status.NewManager(clk)
	imgs := &fakeImages{fake: fake}
	s := New(Options{
		Images:      imgs,
		NodeIPs:     []string{"192.0.2.10"},
		PodLogsDir:  t.TempDir(),
		ResolvConf:  resolv,
		RuntimeName: "fakecri",
		Clock:       clk,
	}, rt, nil, st)
	h := &harness{t: t, ctx: ctx, fake: fake, rt: rt, clock: clk, syncer: s, status: st, images: imgs}
	h.useVolumes(nil)
	return h
}

// testVolumes are what a volume manager is to the syncer.
type testVolumes interface {
	podresources.VolumeManager
	VolumeMounts
	EnvValues
}

// useVolumes gives the syncer the node's resource handlers as the agent
// wires them, from the syncer's current options, with v (nil for none) as
// the volumes, their mounts and env values.
func (h *harness) useVolumes(v testVolumes) {
	o := &h.syncer.opts
	o.Mounts, o.Env = nil, nil
	var vh podresources.Handler
	if v != nil {
		o.Mounts, o.Env = v, v
		vh = podresources.Volumes(v)
	}
	o.Resources = podresources.ForNode(podresources.NodeHandlers{
		Logs:           LogDir(o.PodLogsDir),
		Volumes:        vh,
		ContainerFiles: ContainerFiles(o.RootDir),
	})
}

func (h *harness) sync(pod *v1.Pod) podworker.SyncResult {
	h.t.Helper()
	res, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
	if err != nil {
		h.t.Fatalf("SyncPod: %v", err)
	}
	return res
}

// containers returns the fake's containers of one name, oldest first.
func (h *harness) containers(name string) []fakecri.Container {
	var out []fakecri.Container
	for _, c := range h.fake.Containers() {
		if c.Config.GetMetadata().GetName() == name {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) running(name string) fakecri.Container {
	h.t.Helper()
	for _, c := range h.containers(name) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c
		}
	}
	h.t.Fatalf("no running container %q; have %+v", name, h.containers(name))
	return fakecri.Container{}
}

func syncPod() *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, []string{"init"}, "app", "side")
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].Image = "busybox:1.35"
		p.Spec.InitContainers[i].ImagePullPolicy = v1.PullIfNotPresent
	}
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Image = "busybox:1.35"
		p.Spec.Containers[i].ImagePullPolicy = v1.PullIfNotPresent
	}
	p.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GREETING", Value: "hi $(POD)"},
	}
	p.Spec.Containers[0].Command = []string{"echo", "$(GREETING)", "$$(GREETING)"}
	p.Spec.Containers[0].Resources.Limits = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("500m"),
		v1.ResourceMemory: resource.MustParse("64Mi"),
	}
	return p
}

func TestSyncPodLifecycle(t *testing.T) {
	h := newHarness(t)
	pod := syncPod()

	// First sync: a sandbox and the init container only.
	h.sync(pod)
	if n := len(h.fake.Sandboxes()); n != 1 {
		t.Fatalf("sandboxes after first sync = %d, want 1", n)
	}
	initC := h.running("init")
	if len(h.containers("app")) != 0 {
		t.Fatal("app container started before the init container finished")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodPending {
		t.Errorf("phase while initializing = %s, want Pending", st.Phase)
	}

	// The init container succeeds: the app containers start.
	h.fake.SetExit(initC.ID, 0, "")
	h.sync(pod)
	app := h.running("app")
	h.running("side")

	cfg := app.Config
	if got := strings.Join(cfg.Command, " "); got != "echo hi p $(GREETING)" {
		t.Errorf("expanded command = %q, want %q", got, "echo hi p $(GREETING)")
	}
	if got := cfg.GetLinux().GetResources(); got.GetMemoryLimitInBytes() != 64<<20 || got.GetCpuQuota() != 50000 || got.GetCpuPeriod() != 100000 {
		t.Errorf("resources = %+v, want memory 64Mi, quota 50000/100000", got)
	}
	if cfg.LogPath != "app/0.log" {
		t.Errorf("log path = %q, want app/0.log", cfg.LogPath)
	}
	sb := h.fake.Sandboxes()[0]
	if sb.Config.GetLogDirectory() != podLogDir(h.syncer.opts.PodLogsDir, pod) {
		t.Errorf("sandbox log directory = %q", sb.Config.GetLogDirectory())
	}
	if got := sb.Config.GetDnsConfig().GetServers(); len(got) != 1 || got[0] != "192.0.2.53" {
		t.Errorf("DNS servers = %v, want the host's", got)
	}
	if sb.Config.GetLabels()[runtime.LabelPodUID] != string(pod.UID) {
		t.Errorf("sandbox labels = %v, want the pod UID label", sb.Config.GetLabels())
	}
	st, _ = h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodRunning {
		t.Errorf("phase = %s, want Running", st.Phase)
	}

	// A sync with nothing changed does nothing.
	h.fake.ResetCalls()
	h.sync(pod)
	for _, c := range h.fake.Calls() {
		if c == "CreateContainer" || c == "StopContainer" || c == "RunPodSandbox" {
			t.Errorf("idle sync made a %s call", c)
		}
	}

	// The app container crashes: restarted at once the first time.
	h.fake.SetExit(app.ID, 1, "")
	h.sync(pod)
	app2 := h.running("app")
	if app2.Config.GetMetadata().GetAttempt() != 1 {
		t.Errorf("restart attempt = %d, want 1", app2.Config.GetMetadata().GetAttempt())
	}

	// It crashes again: now held by the backoff, reported CrashLoopBackOff.
	h.fake.SetExit(app2.ID, 1, "")
	res := h.sync(pod)
	if res.RequeueAfter <= 0 || res.RequeueAfter > initialBackoff {
		t.Errorf("RequeueAfter = %v, want within (0, %v]", res.RequeueAfter, initialBackoff)
	}
	st, _ = h.status.GetPodStatus(pod.UID)
	if w := findStatus(st, "app").State.Waiting; w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Errorf("app state = %+v, want waiting CrashLoopBackOff", findStatus(st, "app").State)
	}
	if findStatus(st, "app").LastTerminationState.Terminated == nil {
		t.Error("app lastState.terminated is empty after a crash")
	}

	// Once the backoff expires it starts again, and the next hold doubles.
	h.clock.Step(res.RequeueAfter + time.Second)
	h.sync(pod)
	app3 := h.running("app")
	h.fake.SetExit(app3.ID, 1, "")
	res = h.sync(pod)
	if res.RequeueAfter <= initialBackoff || res.RequeueAfter > 2*initialBackoff {
		t.Errorf("second hold = %v, want within (%v, %v]", res.RequeueAfter, initialBackoff, 2*initialBackoff)
	}

	// A changed image restarts the container without waiting for
	// backoff; a change the hash does not cover (the API never allows it
	// on a running pod) does not.
	h.clock.Step(res.RequeueAfter + time.Second)
	h.sync(pod)
	side := h.running("side")
	envChanged := pod.DeepCopy()
	envChanged.Spec.Containers[1].Env = []v1.EnvVar{{Name: "NEW", Value: "1"}}
	h.sync(envChanged)
	if h.running("side").ID != side.ID {
		t.Error("container restarted for an env change that upstream ignores")
	}
	h.fake.AddImage("busybox:1.36")
	changed := pod.DeepCopy()
	changed.Spec.Containers[1].Image = "busybox:1.36"
	h.sync(changed)
	if h.running("side").ID == side.ID {
		t.Error("container with a changed image was not replaced")
	}

	// Terminating stops everything with the grace period.
	if err := h.syncer.SyncTerminatingPod(h.ctx, changed, 7); err != nil {
		t.Fatalf("SyncTerminatingPod: %v", err)
	}
	for _, c := range h.fake.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s still running after termination", c.Config.GetMetadata().GetName())
		}
	}
	for _, c := range h.containers("app") {
		if c.StopTimeout != 0 && c.StopTimeout != 7 {
			t.Errorf("stop timeout = %d, want 7", c.StopTimeout)
		}
	}
	if s := h.fake.Sandboxes()[0]; s.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox state after termination = %v", s.State)
	}

	// Removal deletes every record and the log directory.
	if err := h.syncer.RemovePod(h.ctx, pod.UID); err != nil {
		t.Fatalf("RemovePod: %v", err)
	}
	if n, m := len(h.fake.Containers()), len(h.fake.Sandboxes()); n != 0 || m != 0 {
		t.Errorf("after RemovePod: %d containers, %d sandboxes left", n, m)
	}
	if _, err := os.Stat(podLogDir(h.syncer.opts.PodLogsDir, pod)); !os.IsNotExist(err) {
		t.Errorf("pod log directory still there: %v", err)
	}
	if err := h.syncer.RemovePod(h.ctx, pod.UID); err != nil {
		t.Errorf("second RemovePod: %v", err)
	}
}

func TestSyncPodRestartPolicyNever(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyNever, nil, "job")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	h.sync(pod)
	h.fake.SetExit(h.running("job").ID, 0, "")
	res := h.sync(pod)
	if !res.Terminal {
		t.Fatal("a finished Never pod is not reported terminal")
	}
	st, _ := h.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodSucceeded {
		t.Errorf("phase = %s, want Succeeded", st.Phase)
	}
	if n := len(h.containers("job")); n != 1 {
		t.Errorf("containers = %d, want the one that ran", n)
	}
}

// An image failure leaves the container waiting with the reason the image
// manager's error wraps and its text as the message, creates nothing, and
// fails the sync so the worker retries.
func TestSyncPodImageFailures(t *testing.T) {
	tests := []struct {
		err    error
		reason string
	}{
		{fmt.Errorf("pull image \"private:1\": %w", images.ErrImagePull), "ErrImagePull"},
		{fmt.Errorf("back-off pulling image \"private:1\": %w", images.ErrImagePullBackOff), "ImagePullBackOff"},
		{fmt.Errorf("container image \"private:1\" is not present with pull policy of Never: %w", images.ErrImageNeverPull), "ErrImageNeverPull"},
		{fmt.Errorf("failed to apply default image tag \"private:1\": %w", images.ErrInvalidImageName), "InvalidImageName"},
		{errors.New("an error wrapping no reason"), "ErrImagePull"},
	}
	for _, tt := range tests {
		t.Run(tt.reason+"/"+tt.err.Error(), func(t *testing.T) {
			h := newHarness(t)
			h.images.failWith("private:1", tt.err)
			pod := testPod(v1.RestartPolicyAlways, nil, "c", "ok")
			pod.Spec.Containers[0].Image = "private:1"
			_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, pod)
			if !errors.Is(err, tt.err) {
				t.Fatalf("SyncPod = %v, want an error wrapping %v", err, tt.err)
			}
			st, _ := h.status.GetPodStatus(pod.UID)
			w := findStatus(st, "c").State.Waiting
			if w == nil || w.Reason != tt.reason || w.Message != tt.err.Error() {
				t.Fatalf("state = %+v, want waiting %s with %q", findStatus(st, "c").State, tt.reason, tt.err)
			}
			if n := len(h.containers("c")); n != 0 {
				t.Errorf("%d containers c created without their image", n)
			}
			h.running("ok")
		})
	}
}

func TestSandboxConfig(t *testing.T) {
	h := newHarness(t)
	h.syncer.opts.ClusterDNS = []string{"10.96.0.10"}
	h.syncer.opts.ClusterDomain = "cluster.local"
	pod := testPod(v1.RestartPolicyAlways, nil, "web")
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, Protocol: v1.ProtocolUDP}}

	cfg, err := h.syncer.sandboxConfig(pod, 2)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "p" || cfg.Metadata.Attempt != 2 {
		t.Errorf("hostname %q attempt %d", cfg.Hostname, cfg.Metadata.Attempt)
	}
	if len(cfg.PortMappings) != 1 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[0].ContainerPort != 80 {
		t.Errorf("port mappings = %v, want only the hostPort one", cfg.PortMappings)
	}
	dns := cfg.DnsConfig
	if strings.Join(dns.Servers, ",") != "10.96.0.10" {
		t.Errorf("ClusterFirst servers = %v", dns.Servers)
	}
	if want := "default.svc.cluster.local,svc.cluster.local,cluster.local,example.org"; strings.Join(dns.Searches, ",") != want {
		t.Errorf("searches = %v, want %s", dns.Searches, want)
	}
	if strings.Join(dns.Options, ",") != "ndots:5" {
		t.Errorf("options = %v, want ndots:5", dns.Options)
	}

	host := pod.DeepCopy()
	host.Spec.HostNetwork = true
	cfg, err = h.syncer.sandboxConfig(host, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE {
		t.Error("hostNetwork pod does not use the node's network namespace")
	}
	if strings.Join(cfg.DnsConfig.Servers, ",") != "192.0.2.53" {
		t.Errorf("hostNetwork ClusterFirst servers = %v, want the host's resolver", cfg.DnsConfig.Servers)
	}
}

func TestReadResolvConfMissing(t *testing.T) {
	_, err := readResolvConf(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "resolvConf") {
		t.Errorf("error = %v, want one naming resolvConf", err)
	}
}

func findStatus(st v1.PodStatus, name string) v1.ContainerStatus {
	for _, cs := range append(st.InitContainerStatuses, st.ContainerStatuses...) {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

// Sidecars start in order before the app containers, and on termination
// stop after them in reverse order (upstream KEP-753).
func TestSidecarStartAndStopOrder(t *testing.T) {
	h := newHarness(t)
	pod := withSidecars(testPod(v1.RestartPolicyAlways, []string{"s1", "s2"}, "app1", "app2"), "s1", "s2")
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			cs[i].Image = "busybox:1.35"
			cs[i].ImagePullPolicy = v1.PullIfNotPresent
		}
	}
	// One container per sync: s1, then s2 once s1 runs, then both apps.
	for range 3 {
		h.sync(pod)
	}
	var order []string
	for _, c := range h.fake.Containers() {
		order = append(order, c.Config.GetMetadata().GetName())
	}
	if got := strings.Join(order, ","); got != "s1,s2,app1,app2" && got != "s1,s2,app2,app1" {
		t.Fatalf("creation order = %s, want s1,s2 then the apps", got)
	}
	for _, n := range []string{"s1", "s2", "app1", "app2"} {
		h.running(n)
	}

	if err := h.syncer.SyncTerminatingPod(h.ctx, pod, 30); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, c := range h.fake.Containers() {
		names[c.ID] = c.Config.GetMetadata().GetName()
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			t.Fatalf("container %s still %s after termination", names[c.ID], c.State)
		}
		if c.StopTimeout != 30 {
			t.Errorf("%s stopped with %ds grace, want the 30s left", names[c.ID], c.StopTimeout)
		}
	}
	var stops []string
	for _, id := range h.fake.StopCalls() {
		stops = append(stops, names[id])
	}
	if got := strings.Join(stops, ","); got != "app1,app2,s2,s1" && got != "app2,app1,s2,s1" {
		t.Errorf("stop order = %s, want the apps, then s2, then s1", got)
	}
}

// The crash-loop delays double from 10 s up to the configured cap
// (crashLoopBackOff.maxContainerRestartPeriod; 300 s by default).
func TestCrashLoopBackoffCap(t *testing.T) {
	tests := []struct {
		limit time.Duration
		want  []time.Duration
	}{
		{0, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}},
		{30 * time.Second, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}},
		{4 * time.Second, []time.Duration{4 * time.Second, 4 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.limit.String(), func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			b := crashLoopBackoff(tt.limit, clk)
			for i, want := range tt.want {
				b.Next("c", clk.Now())
				if got := b.Get("c"); got != want {
					t.Fatalf("delay %d = %v, want %v", i+1, got, want)
				}
				clk.Step(time.Second)
			}
		})
	}
}

// TestRemovedPodsLeaveNoBackoff: the crash-loop backoffs of a pod go with
// the pod, and the image manager is told to forget it, whether it is
// removed (RemovePod) or has terminated for good (SyncTerminatedPod);
// otherwise every pod that ever crashed or failed a pull stays in memory.
func TestRemovedPodsLeaveNoBackoff(t *testing.T) {
	for _, how := range []string{"RemovePod", "SyncTerminatedPod"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			h.images.failWith("private:1", images.ErrImagePull)
			const n = 5
			var pods []*v1.Pod
			for i := range n {
				pod := testPod(v1.RestartPolicyAlways, nil, "c", "p")
				pod.Name = fmt.Sprintf("p%d", i)
				pod.UID = types.UID(fmt.Sprintf("uid-%d", i))
				pod.Spec.Containers[0].Image = "busybox:1.35"
				pod.Spec.Containers[1].Image = "private:1"
				for j := range pod.Spec.Containers {
					pod.Spec.Containers[j].ImagePullPolicy = v1.PullIfNotPresent
				}
				pods = append(pods, pod)
				// c starts, p fails its pull.
				if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateCreate, pod); err == nil {
					t.Fatal("sync with an unpullable image succeeded")
				}
				// c crashes and is restarted: its crash-loop backoff starts.
				for _, c := range h.containers("c") {
					if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						h.fake.SetExit(c.ID, 1, "")
					}
				}
				_, _ = h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pod)
			}
			if got := h.syncer.crash.len(); got != n {
				t.Fatalf("crash-loop entries before removal = %d, want %d", got, n)
			}
			crashKeys := map[string]bool{}
			for _, ks := range h.syncer.crash.keys {
				for k := range ks {
					crashKeys[k] = true
				}
			}
			for _, pod := range pods {
				var err error
				if how == "RemovePod" {
					err = h.syncer.RemovePod(h.ctx, pod.UID)
				} else {
					err = h.syncer.SyncTerminatedPod(h.ctx, pod)
				}
				if err != nil {
					t.Fatalf("%s %s: %v", how, pod.UID, err)
				}
			}
			if got := h.syncer.crash.len(); got != 0 {
				t.Errorf("crash-loop entries after removing every pod = %d, want 0", got)
			}
			for _, pod := range pods {
				if !h.images.forgotten(pod.UID) {
					t.Errorf("the image manager was not told to forget %s", pod.UID)
				}
			}
			// The backoff itself holds nothing either.
			for k := range crashKeys {
				if d := h.syncer.crash.Get(k); d != 0 {
					t.Errorf("crash-loop backoff of %s still %v after removal", k, d)
				}
			}
		})
	}
}

// While CheckDisk fails, a new pod gets no sandbox, a warning event names
// the disk problem and the sync fails (to be retried); once it passes, the
// pod starts. A pod that already runs is not touched by it.
func TestSyncPodWaitsForDiskSpace(t *testing.T) {
	h := newHarness(t)
	rec := &recorder{}
	full := errors.New("no space left on device: the filesystem of /var/lib/heartlet (root-dir) has 0 B free")
	var diskErr error
	h.syncer.opts.Recorder = rec
	h.syncer.opts.CheckDisk = func() error { return diskErr }

	running := testPod(v1.RestartPolicyAlways, nil, "app")
	running.Spec.Containers[0].Image = "busybox:1.35"
	running.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	h.sync(running)
	before := len(h.fake.Sandboxes())

	diskErr = full
	if _, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, running); err != nil {
		t.Fatalf("SyncPod of a running pod with the disk full: %v", err)
	}
	pending := testPod(v1.RestartPolicyAlways, nil, "app")
	pending.Name, pending.UID = "pending", "uid-pending"
	pending.Spec.Containers[0].Image = "busybox:1.35"
	pending.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	_, err := h.syncer.SyncPod(h.ctx, podworker.UpdateSync, pending)
	if err == nil || !errors.Is(err, full) {
		t.Fatalf("SyncPod with the disk full = %v, want an error wrapping %v", err, full)
	}
	if got := len(h.fake.Sandboxes()); got != before {
		t.Fatalf("%d sandboxes with the disk full, want %d (no new one)", got, before)
	}
	var named bool
	for _, e := range rec.events {
		named = named || (e.reason == "FailedCreatePodSandBox" && strings.Contains(e.message, "no space left on device"))
	}
	if !named {
		t.Errorf("events %+v: none names the disk problem", rec.events)
	}
	if st, ok := h.status.GetPodStatus(pending.UID); !ok || st.Phase != v1.PodPending {
		t.Errorf("status of the waiting pod: %+v (found %v), want Pending", st, ok)
	}

	diskErr = nil
	h.sync(pending)
	if got := len(h.fake.Sandboxes()); got != before+1 {
		t.Errorf("%d sandboxes once the disk has space, want %d", got, before+1)
	}
}

// TestSyncReadsRuntimeStatusOnlyAfterChanges: a sync reads the pod's
// runtime status once, and again for its report only when it changed the
// pod in the runtime; the IPs of a new sandbox come from that sandbox
// alone. The status it reports is the runtime's either way.
func TestSyncReadsRuntimeStatusOnlyAfterChanges(t *testing.T) {
	h := newHarness(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox:1.35"
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	count := func(method string) int {
		n := 0
		for _, c := range h.fake.Calls() {
			if c == method {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name string
		// before runs ahead of the sync, outside it.
		before                 func()
		lists, sandboxStatuses int
		wantRestarts           int32
		// wantWaiting is the container's waiting reason; "" is running.
		wantWaiting string
	}{
		// A start: the status (no sandbox yet), the new sandbox's IPs,
		// the report.
		{name: "start", lists: 2, sandboxStatuses: 2},
		// Nothing to do: the one read is reported.
		{name: "idle", lists: 1, sandboxStatuses: 1},
		// The container exited: the sync restarts it and reads again.
		{name: "restart", before: func() { h.fake.SetExit(h.running("app").ID, 1, "Error") },
			lists: 2, sandboxStatuses: 2, wantRestarts: 1},
		{name: "idle after restart", lists: 1, sandboxStatuses: 1, wantRestarts: 1},
		// Exited again: held by the crash-loop backoff; the sync removes
		// the first attempt's container and reads again.
		{name: "backoff", before: func() { h.fake.SetExit(h.running("app").ID, 1, "Error") },
			lists: 2, sandboxStatuses: 2, wantRestarts: 1, wantWaiting: ReasonCrashLoopBackOff},
		// Still held: nothing changes in the runtime; the report is the
		// one read, still with the exit.
		{name: "idle in backoff", lists: 1, sandboxStatuses: 1, wantRestarts: 1, wantWaiting: ReasonCrashLoopBackOff},
	}
	for _, tt := range tests {
		if tt.before != nil {
			tt.before()
		}
		h.fake.ResetCalls()
		h.sync(pod)
		if got := count("ListPodSandbox"); got != tt.lists {
			t.Errorf("%s: %d ListPodSandbox calls, want %d (calls %v)", tt.name, got, tt.lists, h.fake.Calls())
		}
		if got := count("ListContainers"); got != tt.lists {
			t.Errorf("%s: %d ListContainers calls, want %d", tt.name, got, tt.lists)
		}
		if got := count("PodSandboxStatus"); got != tt.sandboxStatuses {
			t.Errorf("%s: %d PodSandboxStatus calls, want %d", tt.name, got, tt.sandboxStatuses)
		}
		st, ok := h.status.GetPodStatus(pod.UID)
		if !ok || len(st.ContainerStatuses) != 1 {
			t.Fatalf("%s: status %+v", tt.name, st)
		}
		cs := st.ContainerStatuses[0]
		waiting := ""
		if cs.State.Waiting != nil {
			waiting = cs.State.Waiting.Reason
		}
		if st.Phase != v1.PodRunning || cs.RestartCount != tt.wantRestarts || waiting != tt.wantWaiting ||
			(tt.wantWaiting == "") != (cs.State.Running != nil) {
			t.Errorf("%s: phase %s, restarts %d, state %+v; want Running, %d restarts, waiting %q",
				tt.name, st.Phase, cs.RestartCount, cs.State, tt.wantRestarts, tt.wantWaiting)
		}
		if tt.wantWaiting != "" && cs.LastTerminationState.Terminated == nil {
			t.Errorf("%s: no last termination state", tt.name)
		}
	}
}
