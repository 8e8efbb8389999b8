package stats

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFiles creates files (relative path -> content) below root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const memoryStatV1 = `cache 100
rss 50
total_cache 4096
total_rss 20480
total_inactive_file 1024
total_active_file 3072
total_pgfault 77
total_pgmajfault 3
`

func TestCgroupReader(t *testing.T) {
	const pod = "kubepods/burstable/pod1234"
	tests := []struct {
		name    string
		files   map[string]string
		cgroup  string
		want    cgroupStats
		wantErr bool
	}{{
		name: "v1 limited",
		files: map[string]string{
			"cpuacct/" + pod + "/cpuacct.usage":        "123456789\n",
			"memory/" + pod + "/memory.usage_in_bytes": "30000\n",
			"memory/" + pod + "/memory.stat":           memoryStatV1,
			"memory/" + pod + "/memory.limit_in_bytes": "67108864\n",
		},
		cgroup: "/" + pod,
		want: cgroupStats{hasCPU: true, cpuNanos: 123456789, hasMemory: true,
			usage: 30000, workingSet: 30000 - 1024, rss: 20480, cache: 4096, pageFaults: 77, majFaults: 3, limit: 67108864},
	}, {
		name: "v1 unlimited, co-mounted cpu,cpuacct",
		files: map[string]string{
			"cpu,cpuacct/cpuacct.usage":    "5\n",
			"memory/memory.usage_in_bytes": "2048\n",
			"memory/memory.stat":           memoryStatV1,
			"memory/memory.limit_in_bytes": "9223372036854771712\n",
		},
		cgroup: "/",
		want:   cgroupStats{hasCPU: true, cpuNanos: 5, hasMemory: true, usage: 2048, workingSet: 1024, rss: 20480, cache: 4096, pageFaults: 77, majFaults: 3},
	}, {
		name: "v1 inactive file above usage",
		files: map[string]string{
			"cpuacct/x/cpuacct.usage":        "1\n",
			"memory/x/memory.usage_in_bytes": "10\n",
			"memory/x/memory.stat":           "total_inactive_file 4096\n",
		},
		cgroup: "/x",
		want:   cgroupStats{hasCPU: true, cpuNanos: 1, hasMemory: true, usage: 10},
	}, {
		name: "v1 memory only",
		files: map[string]string{
			"cpuacct/cpuacct.usage":          "1\n",
			"memory/y/memory.usage_in_bytes": "10\n",
			"memory/y/memory.stat":           "",
		},
		cgroup: "/y",
		want:   cgroupStats{hasMemory: true, usage: 10, workingSet: 10},
	}, {
		name: "v1 missing cgroup",
		files: map[string]string{
			"cpuacct/cpuacct.usage": "1\n",
			"memory/memory.stat":    "",
		},
		cgroup:  "/gone",
		wantErr: true,
	}, {
		name: "v2",
		files: map[string]string{
			"cgroup.controllers":    "cpu memory pids\n",
			pod + "/cpu.stat":       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
			pod + "/memory.current": "8192\n",
			pod + "/memory.stat":    "anon 4096\nfile 2048\ninactive_file 1024\npgfault 9\npgmajfault 1\n",
			pod + "/memory.max":     "max\n",
		},
		cgroup: "/" + pod,
		want: cgroupStats{hasCPU: true, cpuNanos: 1500000, hasMemory: true,
			usage: 8192, workingSet: 7168, rss: 4096, cache: 2048, pageFaults: 9, majFaults: 1},
	}, {
		name: "v2 limited",
		files: map[string]string{
			"cgroup.controllers": "cpu memory\n",
			"p/cpu.stat":         "usage_usec 1\n",
			"p/memory.current":   "100\n",
			"p/memory.stat":      "anon 10\n",
			"p/memory.max":       "1048576\n",
		},
		cgroup: "/p",
		want:   cgroupStats{hasCPU: true, cpuNanos: 1000, hasMemory: true, usage: 100, workingSet: 100, rss: 10, limit: 1048576},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tt.files)
			r, err := newCgroupReader(root)
			if err != nil {
				t.Fatalf("newCgroupReader: %v", err)
			}
			got, err := r.read(tt.cgroup)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("read(%s) = %+v, want an error", tt.cgroup, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("read(%s): %v", tt.cgroup, err)
			}
			if got != tt.want {
				t.Errorf("read(%s) =\n%+v, want\n%+v", tt.cgroup, got, tt.want)
			}
			if !r.exists(tt.cgroup) {
				t.Errorf("exists(%s) = false", tt.cgroup)
			}
		})
	}
}

func TestCgroupReaderNoHierarchy(t *testing.T) {
	if _, err := newCgroupReader(t.TempDir()); err == nil {
		t.Error("newCgroupReader of an empty directory succeeded, want an error")
	}
	if _, err := newCgroupReader(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("newCgroupReader of a missing directory succeeded, want an error")
	}
}
