package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestV1Warning(t *testing.T) {
	for _, tc := range []struct {
		version      int
		failCgroupV1 bool
		warn         bool
	}{
		{1, true, true},
		{1, false, false},
		{2, true, false},
		{2, false, false},
	} {
		if got := V1Warning(tc.version, tc.failCgroupV1); (got != "") != tc.warn {
			t.Errorf("V1Warning(%d, %v) = %q, want a warning: %v", tc.version, tc.failCgroupV1, got, tc.warn)
		}
	}
}

func TestHostVersion(t *testing.T) {
	v1 := t.TempDir()
	if got, err := HostVersion(v1); err != nil || got != 1 {
		t.Errorf("HostVersion(a legacy layout) = %d, %v; want 1", got, err)
	}
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := HostVersion(v2); err != nil || got != 2 {
		t.Errorf("HostVersion(a unified layout) = %d, %v; want 2", got, err)
	}
	if _, err := HostVersion(filepath.Join(v1, "missing")); err == nil {
		t.Error("HostVersion of a missing directory succeeded")
	}
}
