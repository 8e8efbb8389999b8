package podsync

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The CRI cpu resources follow cpuCFSQuota and cpuCFSQuotaPeriod as the
// upstream kubelet sets them.
func TestContainerCPUResources(t *testing.T) {
	limited := v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
	}
	limitOnly := v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}}
	tiny := v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")}}
	tests := []struct {
		name       string
		opts       Options
		res        v1.ResourceRequirements
		wantShares int64
		wantQuota  int64
		wantPeriod int64
	}{
		{name: "default period", res: limited, wantShares: 256, wantQuota: 50000, wantPeriod: 100000},
		{name: "limit only", res: limitOnly, wantShares: 1536, wantQuota: 150000, wantPeriod: 100000},
		{name: "no limit", res: v1.ResourceRequirements{}, wantShares: 2, wantQuota: 0, wantPeriod: 100000},
		{name: "quota at least 1ms", res: tiny, wantShares: 2, wantQuota: 1000, wantPeriod: 100000},
		{name: "quota disabled", opts: Options{DisableCPUQuota: true}, res: limited, wantShares: 256},
		{name: "custom period", opts: Options{CPUPeriod: 50 * time.Millisecond}, res: limited, wantShares: 256, wantQuota: 25000, wantPeriod: 50000},
		{name: "custom period, quota disabled", opts: Options{CPUPeriod: 50 * time.Millisecond, DisableCPUQuota: true}, res: limited, wantShares: 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: tt.res}}},
			}
			s := &Syncer{opts: tt.opts}
			r := s.containerResources(pod, &pod.Spec.Containers[0])
			if r.CpuShares != tt.wantShares || r.CpuQuota != tt.wantQuota || r.CpuPeriod != tt.wantPeriod {
				t.Errorf("shares/quota/period = %d/%d/%d, want %d/%d/%d",
					r.CpuShares, r.CpuQuota, r.CpuPeriod, tt.wantShares, tt.wantQuota, tt.wantPeriod)
			}
		})
	}
}
