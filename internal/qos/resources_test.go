package qos

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestMilliCPUToShares(t *testing.T) {
	tests := []struct {
		milli int64
		want  uint64
	}{
		{-5, 2},
		{0, 2},
		{1, 2},
		{2, 2},
		{3, 3},
		{10, 10},
		{100, 102},
		{250, 256},
		{500, 512},
		{1000, 1024},
		{1500, 1536},
		{256000, 262144},
		{256001, 262144},
		{300000, 262144},
		{math.MaxInt64, 262144},
	}
	for _, tt := range tests {
		if got := MilliCPUToShares(tt.milli); got != tt.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.milli, got, tt.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	tests := []struct {
		milli, period, want int64
	}{
		{0, DefaultCPUPeriod, 0},
		{-1, DefaultCPUPeriod, 0},
		{1, DefaultCPUPeriod, 1000},
		{5, DefaultCPUPeriod, 1000},
		{9, DefaultCPUPeriod, 1000},
		{10, DefaultCPUPeriod, 1000},
		{11, DefaultCPUPeriod, 1100},
		{200, DefaultCPUPeriod, 20000},
		{500, DefaultCPUPeriod, 50000},
		{1000, DefaultCPUPeriod, 100000},
		{1500, DefaultCPUPeriod, 150000},
		{2000, DefaultCPUPeriod, 200000},
		{500, 0, 50000},
		{500, -1, 50000},
		{500, 50000, 25000},
		{10, 50000, 1000},
		{1000, 1000000, 1000000},
		{math.MaxInt64, DefaultCPUPeriod, math.MaxInt64 / 1000},
	}
	for _, tt := range tests {
		if got := MilliCPUToQuota(tt.milli, tt.period); got != tt.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.milli, tt.period, got, tt.want)
		}
	}
}

func TestPodRequestsAndLimits(t *testing.T) {
	tests := []struct {
		name       string
		pod        *v1.Pod
		wantReqs   v1.ResourceList
		wantLimits v1.ResourceList
	}{
		{
			name:       "empty",
			pod:        pod(nil, ctr("a", nil, nil)),
			wantReqs:   rl(),
			wantLimits: rl(),
		},
		{
			name: "app containers are summed",
			pod:  pod(nil, ctr("a", rl("cpu", "100m", "memory", "10Mi"), rl("cpu", "1")), ctr("b", rl("cpu", "200m"), rl("memory", "1Gi"))),
			// b's memory request defaults to its limit.
			wantReqs:   rl("cpu", "300m", "memory", "1034Mi"),
			wantLimits: rl("cpu", "1", "memory", "1Gi"),
		},
		{
			name:       "requests default to limits",
			pod:        pod(nil, ctr("a", nil, rl("cpu", "1", "memory", "1Gi")), ctr("b", rl("cpu", "100m"), rl("cpu", "2"))),
			wantReqs:   rl("cpu", "1100m", "memory", "1Gi"),
			wantLimits: rl("cpu", "3", "memory", "1Gi"),
		},
		{
			name:       "init container larger than the app sum",
			pod:        pod([]v1.Container{ctr("i", rl("cpu", "2"), rl("cpu", "4"))}, ctr("a", rl("cpu", "500m", "memory", "1Gi"), nil), ctr("b", rl("cpu", "500m"), nil)),
			wantReqs:   rl("cpu", "2", "memory", "1Gi"),
			wantLimits: rl("cpu", "4"),
		},
		{
			name:       "init container smaller than the app sum",
			pod:        pod([]v1.Container{ctr("i", rl("cpu", "100m"), nil)}, ctr("a", rl("cpu", "500m"), nil)),
			wantReqs:   rl("cpu", "500m"),
			wantLimits: rl(),
		},
		{
			name:       "largest init container wins",
			pod:        pod([]v1.Container{ctr("i1", rl("memory", "1Gi"), nil), ctr("i2", rl("memory", "3Gi"), nil), ctr("i3", rl("memory", "2Gi"), nil)}, ctr("a", rl("memory", "1Gi"), nil)),
			wantReqs:   rl("memory", "3Gi"),
			wantLimits: rl(),
		},
		{
			name: "sidecars are summed with the app containers",
			pod: pod([]v1.Container{sidecar("s", rl("cpu", "200m", "memory", "100Mi"), rl("memory", "200Mi"))},
				ctr("a", rl("cpu", "300m", "memory", "100Mi"), rl("memory", "300Mi"))),
			wantReqs:   rl("cpu", "500m", "memory", "200Mi"),
			wantLimits: rl("memory", "500Mi"),
		},
		{
			name: "init container after a sidecar runs next to it",
			pod: pod([]v1.Container{
				sidecar("s", rl("cpu", "1"), nil),
				ctr("i", rl("cpu", "2"), nil),
			}, ctr("a", rl("cpu", "500m"), nil)),
			// max(1+0.5, 1+2)
			wantReqs:   rl("cpu", "3"),
			wantLimits: rl(),
		},
		{
			name: "init container before a sidecar runs alone",
			pod: pod([]v1.Container{
				ctr("i", rl("cpu", "2"), nil),
				sidecar("s", rl("cpu", "1"), nil),
			}, ctr("a", rl("cpu", "500m"), nil)),
			// max(1+0.5, 2, 1)
			wantReqs:   rl("cpu", "2"),
			wantLimits: rl(),
		},
		{
			name:       "pod level resources replace the aggregate",
			pod:        withPodLevel(pod(nil, ctr("a", rl("cpu", "100m", "ephemeral-storage", "1Gi"), rl("cpu", "1"))), rl("cpu", "2"), rl("cpu", "4", "memory", "1Gi")),
			wantReqs:   rl("cpu", "2", "memory", "1Gi", "ephemeral-storage", "1Gi"),
			wantLimits: rl("cpu", "4", "memory", "1Gi"),
		},
		{
			name:       "pod level requests default to container requests",
			pod:        withPodLevel(pod(nil, ctr("a", rl("cpu", "100m"), nil)), nil, rl("cpu", "1", "memory", "1Gi")),
			wantReqs:   rl("cpu", "100m", "memory", "1Gi"),
			wantLimits: rl("cpu", "1", "memory", "1Gi"),
		},
		{
			name: "overhead is added to requests and set limits",
			pod: func() *v1.Pod {
				p := pod(nil, ctr("a", rl("cpu", "100m", "memory", "10Mi"), rl("memory", "20Mi")))
				p.Spec.Overhead = rl("cpu", "10m", "memory", "1Mi")
				return p
			}(),
			wantReqs:   rl("cpu", "110m", "memory", "11Mi"),
			wantLimits: rl("memory", "21Mi"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reqs, limits := PodRequestsAndLimits(tt.pod)
			assertList(t, "requests", reqs, tt.wantReqs)
			assertList(t, "limits", limits, tt.wantLimits)
		})
	}
}

func assertList(t *testing.T, what string, got, want v1.ResourceList) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || g.Cmp(w) != 0 {
			t.Errorf("%s[%s] = %s, want %s (all: %v)", what, name, g.String(), w.String(), got)
		}
	}
}
