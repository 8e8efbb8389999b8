package containergc

import (
	"slices"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	hrt "github.com/heartlet/heartlet/internal/runtime"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// c is a container of sandbox sb created at t0+age minutes.
func c(id, name, sb string, state hrt.ContainerState, minute int) *hrt.ContainerStatus {
	return &hrt.ContainerStatus{ID: id, Name: name, SandboxID: sb, State: state, CreatedAt: t0.Add(time.Duration(minute) * time.Minute)}
}

func sb(id string, state hrt.SandboxState, minute int) *hrt.SandboxStatus {
	return &hrt.SandboxStatus{ID: id, State: state, CreatedAt: t0.Add(time.Duration(minute) * time.Minute)}
}

// pod builds a runtime pod, its sandboxes and containers put newest
// first as ListPods does.
func pod(uid string, sbs []*hrt.SandboxStatus, cs ...*hrt.ContainerStatus) *hrt.PodStatus {
	p := &hrt.PodStatus{UID: types.UID(uid), Sandboxes: sbs, Containers: cs}
	sort.SliceStable(p.Sandboxes, func(i, j int) bool { return p.Sandboxes[i].CreatedAt.After(p.Sandboxes[j].CreatedAt) })
	sort.SliceStable(p.Containers, func(i, j int) bool { return p.Containers[i].CreatedAt.After(p.Containers[j].CreatedAt) })
	return p
}

const (
	running = hrt.ContainerRunning
	exited  = hrt.ContainerExited
	created = hrt.ContainerCreated
	ready   = hrt.SandboxReady
	nready  = hrt.SandboxNotReady
)

func TestPlan(t *testing.T) {
	// A crash-looping pod: app restarted three times, the fourth runs.
	crashloop := pod("live", []*hrt.SandboxStatus{sb("s1", ready, 0)},
		c("a0", "app", "s1", exited, 1), c("a1", "app", "s1", exited, 2), c("a2", "app", "s1", exited, 3), c("a3", "app", "s1", running, 4),
		c("i0", "init", "s1", exited, 0))
	// A pod whose sandbox was recreated twice; its containers live in the
	// newest.
	resandboxed := pod("live2", []*hrt.SandboxStatus{sb("old1", nready, 0), sb("old2", nready, 5), sb("new", ready, 10)},
		c("x0", "app", "old2", exited, 6), c("x1", "app", "new", running, 11))
	deleted := pod("gone", []*hrt.SandboxStatus{sb("g-old", nready, 0), sb("g-new", nready, 5)},
		c("g0", "app", "g-new", exited, 6), c("g1", "app", "g-new", exited, 7), c("g2", "side", "g-new", created, 8))
	stopping := pod("gone-but-running", []*hrt.SandboxStatus{sb("r", ready, 0)},
		c("r0", "app", "r", running, 1), c("r1", "app", "r", exited, 0))
	goneUIDs := map[types.UID]bool{"gone": true, "gone-but-running": true}
	gone := func(uid types.UID) bool { return goneUIDs[uid] }

	tests := []struct {
		name          string
		pods          []*hrt.PodStatus
		policy        Policy
		now           time.Time
		wantContainer map[types.UID][]string
		wantSandboxes []string
	}{
		{
			name: "crash loop keeps the newest dead instance per container", pods: []*hrt.PodStatus{crashloop},
			policy: DefaultPolicy(), now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"live": {"a1", "a0"}},
		},
		{
			name: "maxPerPodContainer 0 still keeps the newest of an existing pod", pods: []*hrt.PodStatus{crashloop},
			policy: Policy{MaxPerPodContainer: 0, MaxContainers: -1}, now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"live": {"a1", "a0"}},
		},
		{
			name: "maxPerPodContainer 2", pods: []*hrt.PodStatus{crashloop},
			policy: Policy{MaxPerPodContainer: 2, MaxContainers: -1}, now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"live": {"a0"}},
		},
		{
			name: "no limits keep every dead container of an existing pod", pods: []*hrt.PodStatus{crashloop},
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: -1}, now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{},
		},
		{
			name: "minimum age keeps the young", pods: []*hrt.PodStatus{crashloop},
			policy: Policy{MinAge: 150 * time.Second, MaxPerPodContainer: 1, MaxContainers: -1}, now: t0.Add(5 * time.Minute),
			// a2 is 2m old, younger than 2m30s, so it does not count; of
			// a1 (3m) and a0 (4m) the newest stays.
			wantContainer: map[types.UID][]string{"live": {"a0"}},
		},
		{
			name: "older empty sandboxes go, the newest stays", pods: []*hrt.PodStatus{resandboxed},
			policy: DefaultPolicy(), now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{}, wantSandboxes: []string{"old1"},
		},
		{
			name: "a deleted pod loses every dead container, created ones too, and its sandboxes", pods: []*hrt.PodStatus{deleted},
			policy: DefaultPolicy(), now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"gone": {"g1", "g0", "g2"}}, wantSandboxes: []string{"g-new", "g-old"},
		},
		{
			name: "a deleted pod's running container and its ready sandbox stay", pods: []*hrt.PodStatus{stopping},
			policy: DefaultPolicy(), now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"gone-but-running": {"r1"}},
		},
		{
			name: "a created container of an existing pod is never removed",
			pods: []*hrt.PodStatus{pod("live", []*hrt.SandboxStatus{sb("s", ready, 0)},
				c("e0", "app", "s", exited, 1), c("n0", "app", "s", created, 2))},
			policy: DefaultPolicy(), now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{},
		},
		{
			name: "maxContainers spreads over units, oldest first, never the newest of a unit",
			pods: []*hrt.PodStatus{
				pod("p1", []*hrt.SandboxStatus{sb("s1", ready, 0)}, c("p1a", "a", "s1", exited, 1), c("p1b", "a", "s1", exited, 2), c("p1c", "a", "s1", exited, 3)),
				pod("p2", []*hrt.SandboxStatus{sb("s2", ready, 0)}, c("p2a", "a", "s2", exited, 4), c("p2b", "a", "s2", exited, 5), c("p2c", "b", "s2", exited, 6)),
			},
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 3}, now: t0.Add(time.Hour),
			// 3 units, 1 each: p1c, p2b, p2c stay.
			wantContainer: map[types.UID][]string{"p1": {"p1b", "p1a"}, "p2": {"p2a"}},
		},
		{
			name: "maxContainers below the number of units keeps one per unit",
			pods: []*hrt.PodStatus{
				pod("p1", []*hrt.SandboxStatus{sb("s1", ready, 0)}, c("p1a", "a", "s1", exited, 1), c("p1b", "a", "s1", exited, 2)),
				pod("p2", []*hrt.SandboxStatus{sb("s2", ready, 0)}, c("p2a", "a", "s2", exited, 4)),
			},
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 1}, now: t0.Add(time.Hour),
			wantContainer: map[types.UID][]string{"p1": {"p1a"}},
		},
		{
			name: "maxContainers trims the oldest beyond the per-unit share",
			pods: []*hrt.PodStatus{
				pod("p1", []*hrt.SandboxStatus{sb("s1", ready, 0)}, c("p1a", "a", "s1", exited, 1), c("p1b", "a", "s1", exited, 2), c("p1c", "a", "s1", exited, 7)),
				pod("p2", []*hrt.SandboxStatus{sb("s2", ready, 0)}, c("p2a", "a", "s2", exited, 4), c("p2b", "a", "s2", exited, 5)),
			},
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 3}, now: t0.Add(time.Hour),
			// 2 units, 3/2 = 1 each: p1c and p2b stay.
			wantContainer: map[types.UID][]string{"p1": {"p1b", "p1a"}, "p2": {"p2a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(tt.pods, tt.policy, gone, tt.now)
			for uid := range got.Containers {
				if len(got.Containers[uid]) == 0 {
					delete(got.Containers, uid)
				}
			}
			if len(got.Containers) != len(tt.wantContainer) {
				t.Errorf("containers = %v, want %v", got.Containers, tt.wantContainer)
			}
			for uid, want := range tt.wantContainer {
				g := slices.Clone(got.Containers[uid])
				w := slices.Clone(want)
				slices.Sort(g)
				slices.Sort(w)
				if !slices.Equal(g, w) {
					t.Errorf("containers of %s = %v, want %v", uid, got.Containers[uid], want)
				}
			}
			gs := slices.Clone(got.Sandboxes)
			slices.Sort(gs)
			ws := slices.Clone(tt.wantSandboxes)
			slices.Sort(ws)
			if !slices.Equal(gs, ws) {
				t.Errorf("sandboxes = %v, want %v", got.Sandboxes, tt.wantSandboxes)
			}
		})
	}
}

// No plan ever removes a running container, a ready sandbox, or the
// newest dead instance of a container of an existing pod, whatever the
// policy.
func TestPlanNeverRemoves(t *testing.T) {
	pods := []*hrt.PodStatus{
		pod("live", []*hrt.SandboxStatus{sb("s1", ready, 0), sb("s0", nready, 0)},
			c("r", "app", "s1", running, 9), c("d2", "app", "s1", exited, 8), c("d1", "app", "s1", exited, 1), c("only", "init", "s1", exited, 0)),
		pod("gone", []*hrt.SandboxStatus{sb("gs", ready, 0)}, c("gr", "app", "gs", running, 3)),
	}
	gone := func(uid types.UID) bool { return uid == "gone" }
	for _, p := range []Policy{DefaultPolicy(), {MaxPerPodContainer: 0, MaxContainers: 0}, {MaxPerPodContainer: -1, MaxContainers: 0}, {MaxContainers: -5, MaxPerPodContainer: -5}} {
		got := Plan(pods, p, gone, t0.Add(time.Hour))
		var all []string
		for _, ids := range got.Containers {
			all = append(all, ids...)
		}
		for _, keep := range []string{"r", "d2", "only", "gr"} {
			if slices.Contains(all, keep) {
				t.Errorf("policy %+v removes %s", p, keep)
			}
		}
		for _, keep := range []string{"s1", "gs"} {
			if slices.Contains(got.Sandboxes, keep) {
				t.Errorf("policy %+v removes ready sandbox %s", p, keep)
			}
		}
	}
}
