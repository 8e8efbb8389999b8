package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unlimitedMemory is the smallest memory limit taken as "no limit": cgroup
// v1 reports an unlimited cgroup as a page-rounded 2^63-1.
const unlimitedMemory = 1 << 62

// cgroupStats are the CPU and memory figures of one cgroup. A zero
// CPU/memory flag means the controller's files could not be read.
type cgroupStats struct {
	hasCPU bool
	// cpuNanos is the cumulative CPU time of the cgroup's tasks.
	cpuNanos uint64

	hasMemory bool
	// usage is the memory charged to the cgroup, page cache included.
	usage uint64
	// workingSet is usage less the inactive file cache.
	workingSet uint64
	// rss is anonymous memory (and swap cache).
	rss        uint64
	cache      uint64
	pageFaults uint64
	majFaults  uint64
	// limit is the memory limit; 0 means none.
	limit uint64
}

// cgroupReader reads cgroup statistics from the cgroup filesystems mounted
// under root: one hierarchy per controller on v1, the unified hierarchy on
// v2.
type cgroupReader struct {
	root string
	v2   bool
	// cpuDir and memDir are the v1 hierarchies of the cpuacct and memory
	// controllers (the root itself on v2).
	cpuDir, memDir string
}

// newCgroupReader detects the cgroup version of root: v2 when it is a
// cgroup2 filesystem or, for test layouts, holds cgroup.controllers.
func newCgroupReader(root string) (*cgroupReader, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("cgroup filesystem %s: %w", root, err)
	}
	r := &cgroupReader{root: root}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); st.Type == unix.CGROUP2_SUPER_MAGIC || err == nil {
		r.v2 = true
		r.cpuDir, r.memDir = root, root
		return r, nil
	}
	for _, name := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
		if d := filepath.Join(root, name); isDir(d) {
			r.cpuDir = d
			break
		}
	}
	if d := filepath.Join(root, "memory"); isDir(d) {
		r.memDir = d
	}
	if r.cpuDir == "" && r.memDir == "" {
		return nil, fmt.Errorf("cgroup filesystem %s: neither the cpuacct nor the memory hierarchy is mounted", root)
	}
	return r, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// exists reports whether the cgroup (a path such as /kubepods/pod<uid>)
// exists in the memory hierarchy, or else in the cpuacct one.
func (r *cgroupReader) exists(cg string) bool {
	for _, d := range []string{r.memDir, r.cpuDir} {
		if d != "" {
			return isDir(r.dir(d, cg))
		}
	}
	return false
}

func (r *cgroupReader) dir(hierarchy, cg string) string {
	return filepath.Join(hierarchy, filepath.FromSlash(path.Clean("/"+cg)))
}

// read returns the statistics of cgroup cg ("/" is the root). It fails
// only when neither CPU nor memory could be read.
func (r *cgroupReader) read(cg string) (cgroupStats, error) {
	var s cgroupStats
	var cpuErr, memErr error
	if r.v2 {
		cpuErr = r.readCPUv2(r.dir(r.root, cg), &s)
		memErr = r.readMemory(r.dir(r.root, cg), memoryV2, &s)
	} else {
		cpuErr = errors.New("no cpuacct hierarchy")
		if r.cpuDir != "" {
			cpuErr = r.readCPUv1(r.dir(r.cpuDir, cg), &s)
		}
		memErr = errors.New("no memory hierarchy")
		if r.memDir != "" {
			memErr = r.readMemory(r.dir(r.memDir, cg), memoryV1, &s)
		}
	}
	if !s.hasCPU && !s.hasMemory {
		return s, fmt.Errorf("cgroup %s: %w", cg, errors.Join(cpuErr, memErr))
	}
	return s, nil
}

func (r *cgroupReader) readCPUv1(dir string, s *cgroupStats) error {
	v, err := readUint(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return err
	}
	s.cpuNanos, s.hasCPU = v, true
	return nil
}

func (r *cgroupReader) readCPUv2(dir string, s *cgroupStats) error {
	kv, err := readKeyValues(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return err
	}
	usec, ok := kv["usage_usec"]
	if !ok {
		return fmt.Errorf("%s: no usage_usec", filepath.Join(dir, "cpu.stat"))
	}
	s.cpuNanos, s.hasCPU = usec*1000, true
	return nil
}

// memoryFiles name a cgroup version's memory files and memory.stat keys.
type memoryFiles struct {
	usage, limit                string // files
	inactiveFile, rss, cache    string // memory.stat keys
	pageFaults, majorPageFaults string
}

var (
	memoryV1 = memoryFiles{"memory.usage_in_bytes", "memory.limit_in_bytes",
		"total_inactive_file", "total_rss", "total_cache", "total_pgfault", "total_pgmajfault"}
	memoryV2 = memoryFiles{"memory.current", "memory.max",
		"inactive_file", "anon", "file", "pgfault", "pgmajfault"}
)

func (r *cgroupReader) readMemory(dir string, f memoryFiles, s *cgroupStats) error {
	usage, err := readUint(filepath.Join(dir, f.usage))
	if err != nil {
		return err
	}
	kv, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return err
	}
	s.usage = usage
	s.workingSet = sub(usage, kv[f.inactiveFile])
	s.rss = kv[f.rss]
	s.cache = kv[f.cache]
	s.pageFaults = kv[f.pageFaults]
	s.majFaults = kv[f.majorPageFaults]
	if limit, err := readUint(filepath.Join(dir, f.limit)); err == nil && limit < unlimitedMemory {
		s.limit = limit
	}
	s.hasMemory = true
	return nil
}

// sub is a-b, or 0 when b exceeds a.
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// readUint reads a file holding one unsigned number; "max" reads as the
// largest value.
func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return ^uint64(0), nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// readKeyValues reads "key value" lines (memory.stat, cpu.stat); lines
// whose value is not an unsigned number are skipped.
func readKeyValues(p string) (map[string]uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	kv := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			kv[f[0]] = v
		}
	}
	return kv, nil
}
