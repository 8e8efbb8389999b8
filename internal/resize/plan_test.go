package resize

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestMakePlan(t *testing.T) {
	pc := func(r v1.ResourceName) Step { return Step{Kind: PodCgroup, Resource: r} }
	cu := func(c string, r v1.ResourceName) Step { return Step{Kind: ContainerUpdate, Resource: r, Container: c} }
	const cpu, mem = v1.ResourceCPU, v1.ResourceMemory
	small := res4{"100m", "200m", "64Mi", "128Mi"}
	big := res4{"200m", "400m", "128Mi", "256Mi"}
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod // the wanted resources
		actual      map[string]res4
		wantSteps   []Step
		wantRestart []string
	}{
		{name: "nothing changed", pod: mkPod(ctr{name: "a", r: small}), actual: map[string]res4{"a": small}},
		{name: "increase: pod cgroup before the container, memory before cpu",
			pod: mkPod(ctr{name: "a", r: big}), actual: map[string]res4{"a": small},
			wantSteps: []Step{pc(mem), cu("a", mem), pc(cpu), cu("a", cpu)}},
		{name: "decrease: the container before the pod cgroup",
			pod: mkPod(ctr{name: "a", r: small}), actual: map[string]res4{"a": big},
			wantSteps: []Step{cu("a", mem), pc(mem), cu("a", cpu), pc(cpu)}},
		{name: "cpu only",
			pod: mkPod(ctr{name: "a", r: res4{"300m", "600m", "64Mi", "128Mi"}}), actual: map[string]res4{"a": small},
			wantSteps: []Step{pc(cpu), cu("a", cpu)}},
		{name: "a memory request alone needs no write",
			pod: mkPod(ctr{name: "a", r: res4{"100m", "200m", "100Mi", "128Mi"}}), actual: map[string]res4{"a": small}},
		{name: "shrinking containers go before growing ones",
			pod:       mkPod(ctr{name: "up", r: big}, ctr{name: "down", r: small}),
			actual:    map[string]res4{"up": small, "down": big},
			wantSteps: []Step{pc(mem), cu("down", mem), cu("up", mem), pc(cpu), cu("down", cpu), cu("up", cpu)}},
		{name: "restart policy for memory restarts on a memory change",
			pod:         mkPod(ctr{name: "a", r: res4{"100m", "200m", "64Mi", "256Mi"}, memPol: v1.RestartContainer}),
			actual:      map[string]res4{"a": small},
			wantSteps:   []Step{pc(mem)},
			wantRestart: []string{"a"}},
		{name: "restart policy for memory leaves a cpu change in place",
			pod:       mkPod(ctr{name: "a", r: res4{"300m", "600m", "64Mi", "128Mi"}, memPol: v1.RestartContainer}),
			actual:    map[string]res4{"a": small},
			wantSteps: []Step{pc(cpu), cu("a", cpu)}},
		{name: "restart policy for cpu restarts the whole container when cpu and memory change",
			pod:         mkPod(ctr{name: "a", r: big, cpuPol: v1.RestartContainer}, ctr{name: "b", r: big}),
			actual:      map[string]res4{"a": small, "b": small},
			wantSteps:   []Step{pc(mem), cu("b", mem), pc(cpu), cu("b", cpu)},
			wantRestart: []string{"a"}},
		{name: "a container not running gets no step",
			pod:    mkPod(ctr{name: "a", r: small}, ctr{name: "gone", r: big}),
			actual: map[string]res4{"a": small}},
		{name: "removing a memory limit grows the pod",
			pod:       mkPod(ctr{name: "a", r: res4{"100m", "200m", "64Mi", ""}}),
			actual:    map[string]res4{"a": small},
			wantSteps: []Step{pc(mem), cu("a", mem)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actual := Allocation{}
			for n, r := range tc.actual {
				actual[n] = r.reqs()
			}
			got := MakePlan(tc.pod, actual, FromPod(tc.pod))
			if !slices.Equal(got.Steps, tc.wantSteps) {
				t.Errorf("steps\n got %v\nwant %v", got.Steps, tc.wantSteps)
			}
			if !slices.Equal(got.Restart, tc.wantRestart) {
				t.Errorf("restart %v, want %v", got.Restart, tc.wantRestart)
			}
			if got.Empty() != (len(tc.wantSteps) == 0 && len(tc.wantRestart) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}
