package podlifecycle

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/metrics"
	"github.com/heartlet/heartlet/internal/podconfig"
	"github.com/heartlet/heartlet/internal/podworker"
)

// podKinds remembers, across housekeeping passes, which pods were static
// and which the workers only know from the runtime, so that pods no source
// wants any more are still counted in the right series.
type podKinds struct {
	static      map[types.UID]bool
	runtimeOnly map[types.UID]bool
}

// markRuntimeOnly records a pod known only from the runtime.
func (k *podKinds) markRuntimeOnly(uid types.UID) {
	if k.runtimeOnly == nil {
		k.runtimeOnly = map[types.UID]bool{}
	}
	k.runtimeOnly[uid] = true
}

// counts are the pod gauges: desired pods, the active ones (admitted and
// not terminated), mirror pods, and every pod the workers know by
// lifecycle, config (desired; orphan: no longer desired; runtime_only:
// never desired, found in the runtime) and static. Pods the workers have
// forgotten are forgotten here too.
func (k *podKinds) counts(desired, active []*v1.Pod, working map[types.UID]podworker.State, mirrors int) metrics.PodCounts {
	if k.static == nil {
		k.static = map[types.UID]bool{}
	}
	c := metrics.PodCounts{Mirror: mirrors, Working: map[metrics.WorkingPodKey]int{}}
	want := map[types.UID]bool{}
	for _, p := range desired {
		static := podconfig.IsStatic(p)
		want[p.UID], k.static[p.UID] = true, static
		if static {
			c.DesiredStatic++
		} else {
			c.DesiredRegular++
		}
	}
	for _, p := range active {
		if podconfig.IsStatic(p) {
			c.ActiveStatic++
		} else {
			c.ActiveRegular++
		}
	}
	for uid, st := range working {
		key := metrics.WorkingPodKey{Lifecycle: lifecycle(st)}
		switch {
		case want[uid]:
			key.Config, key.Static = metrics.ConfigDesired, metrics.StaticLabel(k.static[uid])
		case k.runtimeOnly[uid]:
			key.Config, key.Static = metrics.ConfigRuntimeOnly, metrics.StaticUnknown
		default:
			key.Config, key.Static = metrics.ConfigOrphan, metrics.StaticLabel(k.static[uid])
		}
		c.Working[key]++
	}
	for uid := range k.static {
		if _, ok := working[uid]; !ok && !want[uid] {
			delete(k.static, uid)
		}
	}
	for uid := range k.runtimeOnly {
		if _, ok := working[uid]; !ok {
			delete(k.runtimeOnly, uid)
		}
	}
	return c
}

// lifecycle is the lifecycle label of a worker state; a pod waiting for
// another UID of the same name to stop is syncing, as upstream counts it.
func lifecycle(s podworker.State) string {
	switch s {
	case podworker.StateTerminating:
		return metrics.LifecycleTerminating
	case podworker.StateTerminated:
		return metrics.LifecycleTerminated
	}
	return metrics.LifecycleSync
}
