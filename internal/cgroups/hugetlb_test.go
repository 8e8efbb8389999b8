package cgroups

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
)

func TestHugePageLimits(t *testing.T) {
	got := hugePageLimits(rl("memory", "1Gi", "hugepages-2Mi", "512Mi", "hugepages-1Gi", "2Gi", "hugepages-64Ki", "0"))
	want := map[string]int64{"2MB": 512 << 20, "1GB": 2 << 30, "64KB": 0}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("hugePageLimits = %v, want %v", got, want)
	}
	for bytes, want := range map[int64]string{2 << 20: "2MB", 1 << 30: "1GB", 64 << 10: "64KB", 16 << 30: "16GB", 1000: "1000B"} {
		if got := hugePageSizeName(bytes); got != want {
			t.Errorf("hugePageSizeName(%d) = %q, want %q", bytes, got, want)
		}
	}
}

// TestKubepodsHugePages: node allocatable's huge pages limit kubepods
// where the hugetlb controller exists (v1 and v2); sizes the kernel does
// not offer are skipped; without the controller the other limits still
// apply and nothing fails, as upstream.
func TestKubepodsHugePages(t *testing.T) {
	alloc := rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "256Mi", "hugepages-1Gi", "0")
	tests := []struct {
		name    string
		layout  func(t *testing.T) string
		files   []string // the hugetlb files the kernel offers, created before
		want    map[string]string
		missing []string
	}{
		{
			name: "v1",
			layout: func(t *testing.T) string {
				root := fakeV1(t)
				mustMkdir(t, filepath.Join(root, "hugetlb"))
				return root
			},
			files: []string{"hugetlb/kubepods/hugetlb.2MB.limit_in_bytes", "hugetlb/kubepods/hugetlb.1GB.limit_in_bytes"},
			want: map[string]string{
				"hugetlb/kubepods/hugetlb.2MB.limit_in_bytes": "268435456",
				"hugetlb/kubepods/hugetlb.1GB.limit_in_bytes": "0",
				"memory/kubepods/memory.limit_in_bytes":       "1073741824",
			},
		},
		{
			name:   "v2 without 1GB pages",
			layout: fakeV2,
			files:  []string{"kubepods/hugetlb.2MB.max"},
			want: map[string]string{
				"kubepods/hugetlb.2MB.max": "268435456",
				"kubepods/memory.max":      "1073741824",
			},
			missing: []string{"kubepods/hugetlb.1GB.max"},
		},
		{
			name:    "v1 without the controller",
			layout:  fakeV1,
			want:    map[string]string{"memory/kubepods/memory.limit_in_bytes": "1073741824"},
			missing: []string{"hugetlb"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := tt.layout(t)
			for _, f := range tt.files {
				mustWrite(t, filepath.Join(root, f), "-1\n")
			}
			m := newManager(t, Options{Root: root, NodeAllocatable: alloc})
			if err := m.EnsureQOS(context.Background()); err != nil {
				t.Fatalf("EnsureQOS: %v", err)
			}
			for p, want := range tt.want {
				if got := readTrim(t, filepath.Join(root, p)); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			for _, p := range tt.missing {
				if exists(filepath.Join(root, p)) {
					t.Errorf("%s written, want nothing", p)
				}
			}
			if err := m.KubepodsLimitErr(); err != nil {
				t.Errorf("KubepodsLimitErr = %v, want nil", err)
			}
		})
	}
}
