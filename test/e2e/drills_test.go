//go:build e2e

package e2e

import (
	"context"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Drill 1: kill -9 heartlet while 100 pods run (80 API pods, 20 static
// pods; half with readiness or liveness probes). Restarted, heartlet
// restarts no container, and every pod's status in the API is unchanged or
// converges back.
func TestDrillKillHeartlet(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	cs := drillClient(t)
	c := newCRI(t)
	set := createDrillPods(t, h, "kill9", 80, 20)
	before, took := waitDrillRunning(t, cs, set, 10*time.Minute)
	t.Logf("drill kill9: %d pods Running and Ready %v after creation", len(before), ms(took))
	criBefore := snapshotAll(t, c, set.names())

	// The statuses settle (probes' first results) before the kill.
	time.Sleep(5 * time.Second)
	before, _ = waitDrillRunning(t, cs, set, time.Minute)

	ctx := context.Background()
	_, stopWatch := watchConvergence(ctx, cs, set.drill, before)
	h.kill()
	killed := time.Now()
	if diff := diffSnapshots(criBefore, snapshotAll(t, c, set.names())); len(diff) > 0 {
		t.Fatalf("pods changed when heartlet was killed:\n%s", strings.Join(diff, "\n"))
	}
	startCluster(t, h, clusterOptions{})
	restarted := time.Now()
	t.Logf("drill kill9: heartlet serving again %v after the kill", ms(restarted.Sub(killed)))

	// Watch for a minute: long enough for any wrong restart, probe flip or
	// status rewrite to show.
	deadline := restarted.Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if !h.running() {
			t.Fatalf("heartlet exited after the restart: %v", h.err)
		}
		time.Sleep(time.Second)
	}
	cv := stopWatch()
	if cv.firstAllOK.IsZero() {
		var bad []string
		for n := range cv.deviated {
			bad = append(bad, n)
		}
		t.Fatalf("the pods' statuses did not converge within 60 s of the restart (%d samples); pods that deviated: %v", cv.samples, bad)
	}
	conv := time.Duration(0)
	if !cv.lastBad.IsZero() && cv.lastBad.After(restarted) {
		conv = cv.firstAllOK.Sub(restarted)
	}
	t.Logf("drill kill9: API statuses: %d of %d pods deviated at some point (%d samples at 250 ms); converged %v after the restart",
		len(cv.deviated), len(before), cv.samples, ms(conv))
	for n := range cv.deviated {
		t.Logf("drill kill9: pod %s deviated", n)
	}
	if conv > 10*time.Second {
		t.Errorf("the pods' API statuses converged %v after the restart, want within 10 s", ms(conv))
	}
	if diff := diffSnapshots(criBefore, snapshotAll(t, c, set.names())); len(diff) > 0 {
		t.Errorf("heartlet restarted or replaced containers or sandboxes after the restart:\n%s", strings.Join(diff, "\n"))
	} else {
		t.Logf("drill kill9: 0 containers or sandboxes restarted (CRI IDs and attempts unchanged for %d pods)", len(criBefore))
	}
	after, err := listDrill(ctx, cs, set.drill)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range before {
		if got := podFingerprint(after[n]); got != podFingerprint(p) {
			t.Errorf("pod %s after the restart:\n  before %s\n  after  %s", n, podFingerprint(p), got)
		}
	}
}

// Drill 2: containerd stopped for 20 s under 50 running pods. No pod
// restarts, every pod keeps exactly one ready sandbox, /healthz reports the
// outage while it lasts, and heartlet's PLEG and statuses recover: a
// container killed after the outage is restarted and reported.
func TestDrillContainerdRestart(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	cs := drillClient(t)
	c := newCRI(t)
	set := createDrillPods(t, h, "ctrd", 45, 5)
	before, took := waitDrillRunning(t, cs, set, 8*time.Minute)
	t.Logf("drill containerd: %d pods Running and Ready %v after creation", len(before), ms(took))
	time.Sleep(5 * time.Second)
	before, _ = waitDrillRunning(t, cs, set, time.Minute)
	criBefore := snapshotAll(t, c, set.names())
	readyBefore := readySandboxes(t, c)

	healthz := recordHealthz(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.healthzPort))
	defer healthz.stop()
	cv0, stopWatch := watchConvergence(context.Background(), cs, set.drill, before)

	// Whatever happens, containerd runs again when the test ends.
	t.Cleanup(func() {
		if err := runHack("env.sh", "start-containerd"); err != nil {
			t.Errorf("start containerd again: %v", err)
		}
	})
	const down = 20 * time.Second
	hackScript(t, "env.sh", "stop-containerd")
	stopped := time.Now()
	t.Logf("drill containerd: containerd stopped; down for %v", down)
	var readyDuring v1.ConditionStatus
	var readyReason string
	waitUntil := stopped.Add(down)
	for time.Now().Before(waitUntil) {
		if n, err := getNode(); err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status != v1.ConditionTrue {
					readyDuring, readyReason = cond.Status, cond.Message
				}
			}
		}
		time.Sleep(time.Second)
	}
	hackScript(t, "env.sh", "start-containerd")
	started := time.Now()
	t.Logf("drill containerd: containerd serving again after %v down", ms(started.Sub(stopped)))
	// containerd 1.6 can come back with a sandbox it had ready reported
	// not ready (seen under load for 1 to 3 of 50 pods: its task state was
	// not recovered). Such a pod must get a new sandbox, as upstream's
	// kubelet gives it, so it is left out of the no-restart checks; it
	// must still run again with one ready sandbox. Read at once, before
	// heartlet, which reconnects with a backoff, can act on it.
	readyAfter := readySandboxes(t, c)
	var lost []string
	for id, name := range readyBefore {
		if _, ok := readyAfter[id]; !ok {
			lost = append(lost, name)
		}
	}
	slices.Sort(lost)
	t.Logf("drill containerd: %d of %d ready sandboxes reported not ready by containerd after its restart: %v", len(lost), len(readyBefore), lost)
	cv0.ignore(lost)
	for _, n := range lost {
		delete(criBefore, n)
	}
	if readyDuring != "" {
		t.Logf("drill containerd: node Ready=%s during the outage: %s", readyDuring, readyReason)
	} else {
		t.Logf("drill containerd: the node stayed Ready=True during the outage")
	}

	waitFor(t, 2*time.Minute, "/healthz to pass again", func() (bool, string) {
		hs := healthz.history()
		if len(hs) == 0 {
			return false, "no answer yet"
		}
		last := hs[len(hs)-1]
		return last.ok, last.detail
	})
	waitNodeReady(t, h, v1.ConditionTrue, 2*time.Minute)
	time.Sleep(20 * time.Second)
	healthz.stop()
	cv := stopWatch()

	// /healthz failed during the outage and passed afterwards.
	var firstFail, lastFail, okAgain time.Time
	var failDetail string
	for _, ch := range healthz.history() {
		t.Logf("drill containerd: /healthz at %+v: ok=%v %s", ms(ch.at.Sub(stopped)), ch.ok, ch.detail)
		if !ch.ok && firstFail.IsZero() {
			firstFail, failDetail = ch.at, ch.detail
		}
		if !ch.ok {
			lastFail = ch.at
		}
		if ch.ok && !lastFail.IsZero() && okAgain.IsZero() {
			okAgain = ch.at
		}
	}
	switch {
	case firstFail.IsZero():
		t.Errorf("/healthz passed throughout the %v containerd outage", down)
	default:
		t.Logf("drill containerd: /healthz failed %v after containerd stopped (%s); passed again %v after it started",
			ms(firstFail.Sub(stopped)), failDetail, ms(okAgain.Sub(started)))
		if okAgain.IsZero() {
			t.Errorf("/healthz never passed again after containerd came back")
		}
	}

	if cv.firstAllOK.IsZero() {
		t.Errorf("the pods' API statuses did not converge after the outage; deviated: %v", cv.deviated)
	} else {
		conv := time.Duration(0)
		if !cv.lastBad.IsZero() {
			conv = cv.firstAllOK.Sub(started)
		}
		t.Logf("drill containerd: %d of %d pods' API statuses deviated; converged %v after containerd started", len(cv.deviated), len(before), ms(conv))
	}
	if diff := diffSnapshots(criBefore, snapshotAll(t, c, set.names())); len(diff) > 0 {
		t.Errorf("sandboxes or containers changed across the containerd restart:\n%s", strings.Join(diff, "\n"))
	}
	// Exactly one sandbox per pod, ready.
	sbs, err := c.sandboxes(map[string]string{labelPodNamespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	perPod := map[string]int{}
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			perPod[sb.GetLabels()[labelPodName]]++
		}
	}
	for _, n := range set.names() {
		if perPod[n] != 1 {
			t.Errorf("pod %s has %d ready sandboxes after the containerd restart, want 1", n, perPod[n])
		}
	}
	// The pods whose sandbox containerd lost run again, ready.
	if len(lost) > 0 {
		now, err := listDrill(context.Background(), cs, set.drill)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range lost {
			if p := now[n]; p == nil || p.Status.Phase != v1.PodRunning || !isReady(p) {
				t.Errorf("pod %s, whose sandbox containerd lost, is not running and ready again: %v", n, p != nil && p.Status.Phase == v1.PodRunning)
			}
		}
	}

	// The PLEG works again: a container killed behind heartlet's back is
	// restarted and the restart reaches the API.
	victim := set.api[0]
	ctr := byName(c.podContainers(t, string(before[victim].UID), "main"))["main"]
	ctx, cancel := ctx30()
	defer cancel()
	killedAt := time.Now()
	if err := c.rs.StopContainer(ctx, ctr.Id, 0); err != nil {
		t.Fatalf("stop container of %s: %v", victim, err)
	}
	p := waitAPIPod(t, h, victim, 90*time.Second, "to report the killed container restarted", func(p *v1.Pod) bool {
		return restarts(p, "main") == 1 && podRunningReady(p)
	})
	t.Logf("drill containerd: a container stopped after the outage was restarted and Ready in the API %v later (%s)",
		ms(time.Since(killedAt)), containerSummary(p))
}

// Drill 3: kube-apiserver stopped for 60 s. Pods keep running; the node's
// status and Lease resume; pods created just before the stop and right
// after the return start; status changes during the outage (a container
// exits, a readiness probe starts failing) reach the API after it returns.
func TestDrillAPIServerOutage(t *testing.T) {
	h := startClusterHeartlet(t, clusterOptions{})
	cs := drillClient(t)
	c := newCRI(t)
	set := createDrillPods(t, h, "apisrv", 10, 2)

	exiter := drillPod("apisrv", "apisrv-exiter", "")
	exiter.Spec.RestartPolicy = v1.RestartPolicyNever
	exiter.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'exit 0' TERM; while [ ! -f /tmp/exit ]; do sleep 1 & wait $!; done; exit 3"}
	flipper := drillPod("apisrv", "apisrv-flipper", "")
	flipper.Spec.Containers[0].Command = []string{"sh", "-c", "touch /tmp/ready; " + sleeper}
	flipper.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: execAction("cat", "/tmp/ready"),
		PeriodSeconds: 2, TimeoutSeconds: 2, FailureThreshold: 1, SuccessThreshold: 1}
	set.addAPIPods(t, exiter, flipper)
	before, took := waitDrillRunning(t, cs, set, 5*time.Minute)
	t.Logf("drill apiserver: %d pods Running and Ready %v after creation", len(before), ms(took))
	time.Sleep(3 * time.Second)
	before, _ = waitDrillRunning(t, cs, set, time.Minute)
	// The pods that must not change at all (the exiter and the flipper
	// change on purpose).
	steady := slices.DeleteFunc(set.names(), func(n string) bool { return n == "apisrv-exiter" || n == "apisrv-flipper" })
	criBefore := snapshotAll(t, c, steady)
	exiterCtr := containerID(before["apisrv-exiter"].Status.ContainerStatuses[0].ContainerID)
	flipperCtr := containerID(before["apisrv-flipper"].Status.ContainerStatuses[0].ContainerID)

	// Pods bound to the node and created just before the stop.
	var early []*v1.Pod
	for i := range 3 {
		p := drillPod("apisrv", fmt.Sprintf("apisrv-early-%d", i), "")
		p.Spec.NodeName = clusterNode
		early = append(early, p)
	}
	set.addAPIPods(t, early...)

	t.Cleanup(func() {
		if err := runHack("kube.sh", "start-apiserver"); err != nil {
			t.Errorf("start kube-apiserver again: %v", err)
		}
	})
	hackScript(t, "kube.sh", "stop-apiserver")
	stopped := time.Now()
	t.Logf("drill apiserver: kube-apiserver stopped")

	// During the outage: one container exits, one pod's readiness fails.
	time.Sleep(5 * time.Second)
	if _, _, code := c.exec(t, exiterCtr, "touch", "/tmp/exit"); code != 0 {
		t.Fatalf("touch /tmp/exit: exit %d", code)
	}
	if _, _, code := c.exec(t, flipperCtr, "rm", "/tmp/ready"); code != 0 {
		t.Fatalf("rm /tmp/ready: exit %d", code)
	}
	changedAt := time.Now()
	healthz := recordHealthz(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.healthzPort))
	defer healthz.stop()
	for time.Since(stopped) < 60*time.Second {
		if !h.running() {
			t.Fatalf("heartlet exited during the API server outage: %v", h.err)
		}
		time.Sleep(time.Second)
	}
	healthz.stop()
	for _, ch := range healthz.history() {
		t.Logf("drill apiserver: /healthz during the outage at %v: ok=%v %s", ms(ch.at.Sub(stopped)), ch.ok, ch.detail)
	}
	if diff := diffSnapshots(criBefore, snapshotAll(t, c, steady)); len(diff) > 0 {
		t.Errorf("pods changed during the API server outage:\n%s", strings.Join(diff, "\n"))
	}

	hackScript(t, "kube.sh", "start-apiserver")
	back := time.Now()
	t.Logf("drill apiserver: kube-apiserver ready again after %v down", ms(back.Sub(stopped)))
	var late []*v1.Pod
	for i := range 3 {
		late = append(late, drillPod("apisrv", fmt.Sprintf("apisrv-late-%d", i), ""))
	}
	set.addAPIPods(t, late...)

	// Each observation is logged with the time since the API came back.
	type goal struct {
		what string
		done func() bool
		at   time.Duration
	}
	ctx := context.Background()
	sawNotReady := false
	podGoal := func(name string, cond func(*v1.Pod) bool) func() bool {
		return func() bool {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			return err == nil && cond(p)
		}
	}
	goals := []*goal{
		{what: "Lease renewed", done: func() bool {
			l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, clusterNode, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(back)
		}},
		// The node lifecycle controller may have marked the node Unknown
		// (no Lease renewal seen for longer than its grace period); heartlet
		// must report it Ready again.
		{what: "node Ready=True", done: func() bool {
			n, err := cs.CoreV1().Nodes().Get(ctx, clusterNode, metav1.GetOptions{})
			if err != nil {
				return false
			}
			st := nodeCondition(n, v1.NodeReady)
			if st != v1.ConditionTrue && !sawNotReady {
				sawNotReady = true
				t.Logf("drill apiserver: node Ready=%s %v after the API server came back", st, ms(time.Since(back)))
			}
			return st == v1.ConditionTrue
		}},
		{what: "exit during the outage reported", done: podGoal("apisrv-exiter", func(p *v1.Pod) bool {
			cs := statusOf(p, "main")
			return p.Status.Phase == v1.PodFailed && cs != nil && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 3
		})},
		{what: "readiness failure during the outage reported", done: podGoal("apisrv-flipper", func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodRunning && podCondition(p, v1.PodReady) == v1.ConditionFalse
		})},
	}
	for _, p := range append(early, late...) {
		goals = append(goals, &goal{what: "pod " + p.Name + " Running and Ready", done: podGoal(p.Name, podRunningReady)})
	}
	// The late pods wait for the scheduler too, whose own watches back off
	// during the outage: when each was bound tells its part from heartlet's.
	for _, p := range late {
		goals = append(goals, &goal{what: "pod " + p.Name + " bound by the scheduler", done: podGoal(p.Name, func(p *v1.Pod) bool { return p.Spec.NodeName != "" })})
	}
	waitFor(t, 3*time.Minute, "heartlet to catch up with the API server", func() (bool, string) {
		var pending []string
		for _, g := range goals {
			if g.at == 0 {
				if g.done() {
					g.at = time.Since(back)
				} else {
					pending = append(pending, g.what)
				}
			}
		}
		return len(pending) == 0, fmt.Sprintf("pending: %v", pending)
	})
	for _, g := range goals {
		t.Logf("drill apiserver: %s %v after the API server came back", g.what, ms(g.at))
	}
	t.Logf("drill apiserver: the exit and the readiness change happened %v before the API server came back", ms(back.Sub(changedAt)))
	waitNodeReady(t, h, v1.ConditionTrue, 90*time.Second)

	// The node lifecycle controller may mark every pod of the node not
	// ready once the API server is back, before it sees the Lease renewed;
	// heartlet undoes that as soon as its watch reports the change. The
	// steady pods must be as they were within a few seconds of that.
	var (
		diffs     []string
		firstDiff time.Duration
	)
	settled := time.Now()
	for {
		after, err := listDrill(ctx, cs, set.drill)
		if err != nil {
			t.Fatal(err)
		}
		diffs = diffs[:0]
		for n, p := range before {
			if n == "apisrv-exiter" || n == "apisrv-flipper" {
				continue
			}
			if got := podFingerprint(after[n]); got != podFingerprint(p) {
				diffs = append(diffs, fmt.Sprintf("pod %s across the API server outage:\n  before %s\n  after  %s", n, podFingerprint(p), got))
			}
		}
		if len(diffs) > 0 && firstDiff == 0 {
			firstDiff = time.Since(back)
			t.Logf("drill apiserver: %d steady pods differ %v after the API server came back (first: %s)", len(diffs), ms(firstDiff), diffs[0])
		}
		if len(diffs) == 0 || time.Since(settled) > 30*time.Second {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	slices.Sort(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
	if firstDiff > 0 && len(diffs) == 0 {
		t.Logf("drill apiserver: steady pods as before the outage again %v after the API server came back", ms(time.Since(back)))
	}
}

// Drill 4: the filesystem holding root-dir and podLogsDir is full. New
// pods fail with an event or waiting reason that names the disk problem,
// heartlet keeps serving and its running pods keep running, and once space
// returns the pending pods start. Eviction would stop the running pods of a
// full disk, as upstream's does (TestClusterEviction tests that), so the
// disk's thresholds are off here: the drill is about what heartlet itself
// does when writes fail.
func TestDrillDiskFull(t *testing.T) {
	requireCluster(t)
	h := newClusterHeartlet(t, clusterOptions{config: "evictionHard:\n  memory.available: 100Mi\n"})
	disk := filepath.Join(h.dir, "disk")
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=64m,mode=755"); err != nil {
		t.Fatalf("mount a 64 MiB tmpfs: %v", err)
	}
	// Runs after heartlet has stopped, before the leftover-mount check.
	t.Cleanup(func() {
		if err := syscall.Unmount(disk, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", disk, err)
		}
	})
	config, err := os.ReadFile(h.configPath)
	if err != nil {
		t.Fatal(err)
	}
	oldLogs := h.podLogsDir
	h.rootDir, h.podLogsDir = filepath.Join(disk, "root"), filepath.Join(disk, "pod-logs")
	for _, d := range []string{h.rootDir, h.podLogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	config = []byte(strings.Replace(string(config), "podLogsDir: "+oldLogs+"\n", "podLogsDir: "+h.podLogsDir+"\n", 1))
	if err := os.WriteFile(h.configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cleanup)
	startCluster(t, h, clusterOptions{})
	waitNodeSchedulable(t, h)

	cs := drillClient(t)
	c := newCRI(t)
	set := createDrillPods(t, h, "disk", 3, 0)
	// One running pod writes a line to its log every second.
	chatty := drillPod("disk", "disk-chatty", "")
	chatty.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'exit 0' TERM; while true; do echo still running; sleep 1 & wait $!; done"}
	set.addAPIPods(t, chatty)
	before, took := waitDrillRunning(t, cs, set, 5*time.Minute)
	t.Logf("drill disk: %d pods Running and Ready %v after creation", len(before), ms(took))
	criBefore := snapshotAll(t, c, set.names())

	filler := filepath.Join(disk, "filler")
	filled := writeUntilFull(t, filler)
	full := time.Now()
	var st syscall.Statfs_t
	_ = syscall.Statfs(disk, &st)
	t.Logf("drill disk: wrote %d MiB until ENOSPC; %d bytes free", filled>>20, st.Bavail*uint64(st.Bsize))

	var pending []*v1.Pod
	for i := range 3 {
		pending = append(pending, drillPod("disk", fmt.Sprintf("disk-pending-%d", i), ""))
	}
	set.addAPIPods(t, pending...)
	mentionsDisk := func(s string) bool {
		s = strings.ToLower(s)
		return strings.Contains(s, "no space left") || strings.Contains(s, "disk")
	}
	found := map[string]string{}
	waitFor(t, 2*time.Minute, "each new pod to report the disk problem in an event or its container status", func() (bool, string) {
		if !h.running() {
			t.Fatalf("heartlet exited with its disk full: %v", h.err)
		}
		for _, p := range pending {
			if found[p.Name] != "" {
				continue
			}
			if got, err := getAPIPod(p.Name); err == nil && got != nil {
				for _, s := range got.Status.ContainerStatuses {
					if w := s.State.Waiting; w != nil && mentionsDisk(w.Message) {
						found[p.Name] = fmt.Sprintf("waiting %s: %s (%v after the disk filled)", w.Reason, w.Message, ms(time.Since(full)))
					}
				}
				if podRunningReady(got) {
					t.Fatalf("pod %s runs although its disk is full", p.Name)
				}
			}
			if evs, err := podEvents(p.Name, ""); err == nil {
				for _, e := range evs {
					if e.Type == v1.EventTypeWarning && mentionsDisk(e.Message) && found[p.Name] == "" {
						found[p.Name] = fmt.Sprintf("event %s: %s (%v after the disk filled)", e.Reason, e.Message, ms(time.Since(full)))
					}
				}
			}
		}
		return len(found) == len(pending), fmt.Sprintf("found %v", found)
	})
	for n, f := range found {
		t.Logf("drill disk: %s: %s", n, f)
	}
	// heartlet keeps serving and its pods keep running.
	for i := 0; i < 10; i++ {
		if body, status, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", h.healthzPort)); err != nil || status != 200 {
			t.Errorf("/healthz with the disk full: %d %q %v", status, body, err)
			break
		}
		time.Sleep(time.Second)
	}
	if diff := diffSnapshots(criBefore, snapshotAll(t, c, set.names()[:4])); len(diff) > 0 {
		t.Errorf("running pods changed while the disk was full:\n%s", strings.Join(diff, "\n"))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for _, p := range pending {
		waitAPIPod(t, h, p.Name, 3*time.Minute, "to start once the disk has space", podRunningReady)
	}
	t.Logf("drill disk: the %d pending pods were Running and Ready %v after the filler was deleted", len(pending), ms(time.Since(freed)))
	after, err := listDrill(context.Background(), cs, set.drill)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range before {
		if got := podFingerprint(after[n]); got != podFingerprint(p) {
			t.Errorf("pod %s across the disk-full period:\n  before %s\n  after  %s", n, podFingerprint(p), got)
		}
	}
}
