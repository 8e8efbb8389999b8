package agent

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type fixedSummary struct{ s *statsapi.Summary }

func (f fixedSummary) Summary(context.Context, bool) (*statsapi.Summary, error) { return f.s, nil }

func (f fixedSummary) SummaryOf(context.Context, func(types.UID) bool) (*statsapi.Summary, error) {
	return f.s, nil
}

// Image garbage collection reads the image filesystem from the summary's
// imageFs; a summary without it is an error, never a filesystem of size 0.
func TestGCImageFsStats(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	full := &statsapi.Summary{Node: statsapi.NodeStats{Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{CapacityBytes: u(100), AvailableBytes: u(30)}}}}
	capacity, avail, err := gcDeps{&components{summary: fixedSummary{full}}}.ImageFsStats(context.Background())
	if err != nil || capacity != 100 || avail != 30 {
		t.Errorf("ImageFsStats = %d, %d, %v; want 100, 30", capacity, avail, err)
	}
	for name, s := range map[string]*statsapi.Summary{
		"no runtime":  {},
		"no imageFs":  {Node: statsapi.NodeStats{Runtime: &statsapi.RuntimeStats{}}},
		"no capacity": {Node: statsapi.NodeStats{Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{AvailableBytes: u(1)}}}},
	} {
		if _, _, err := (gcDeps{&components{summary: fixedSummary{s}}}).ImageFsStats(context.Background()); err == nil {
			t.Errorf("%s: ImageFsStats = nil error", name)
		}
	}
}

func TestDevice(t *testing.T) {
	a, err := device(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := device(t.TempDir())
	if err != nil || a != b {
		t.Errorf("two temporary directories on devices %d and %d (%v)", a, b, err)
	}
	if _, err := device("/nonexistent/heartlet"); err == nil {
		t.Error("device of a missing path = nil error")
	}
}
