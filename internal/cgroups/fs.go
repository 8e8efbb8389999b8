package cgroups

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ocgroups "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Controller files written by the manager.
const (
	fileProcs          = "cgroup.procs"
	fileControllers    = "cgroup.controllers"
	fileSubtreeControl = "cgroup.subtree_control"
	fileCPUShares      = "cpu.shares"
	fileCFSPeriod      = "cpu.cfs_period_us"
	fileCFSQuota       = "cpu.cfs_quota_us"
	fileMemoryLimit    = "memory.limit_in_bytes"
	fileCpusetCPUs     = "cpuset.cpus"
	fileCpusetMems     = "cpuset.mems"
	filePidsMax        = "pids.max"
	fileCPUWeight      = "cpu.weight"
	fileCPUMax         = "cpu.max"
	fileMemoryMax      = "memory.max"
)

// hierarchies returns the directories of the mounted hierarchies: the root
// on v2; on v1 every directory under the root (cpu, memory, ..., also the
// named and hybrid unified ones), symlinked co-mounts such as
// cpu -> cpu,cpuacct counted once.
func (m *Manager) hierarchies() ([]string, error) {
	if m.v2 {
		return []string{m.root}, nil
	}
	m.hierMu.Lock()
	defer m.hierMu.Unlock()
	if m.hier != nil {
		return m.hier, nil
	}
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return nil, fmt.Errorf("list cgroup hierarchies in %s: %w", m.root, err)
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		resolved, err := filepath.EvalSymlinks(filepath.Join(m.root, e.Name()))
		if err != nil {
			continue // a dangling link is no hierarchy
		}
		fi, err := os.Stat(resolved)
		if err != nil || !fi.IsDir() || seen[resolved] {
			continue
		}
		seen[resolved] = true
		out = append(out, resolved)
		if _, err := os.Stat(filepath.Join(resolved, fileCpusetCPUs)); err == nil && m.cpusetHier == "" {
			m.cpusetHier = resolved
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("list cgroup hierarchies in %s: none mounted", m.root)
	}
	m.hier = out
	return out, nil
}

// hasController reports whether a controller is usable: on v1 its
// hierarchy is mounted under the root, on v2 the root lists it.
func (m *Manager) hasController(name string) bool {
	if !m.v2 {
		fi, err := os.Stat(filepath.Join(m.root, name))
		return err == nil && fi.IsDir()
	}
	ctrls, err := readFields(filepath.Join(m.root, fileControllers))
	return err == nil && slices.Contains(ctrls, name)
}

// checkControllers verifies that the controllers pod limits need exist.
func (m *Manager) checkControllers() error {
	need := []string{"cpu", "memory"}
	if m.pidsLimit > 0 {
		need = append(need, "pids")
	}
	for _, c := range need {
		if !m.hasController(c) {
			return fmt.Errorf("cgroup controller %s: not available under %s", c, m.root)
		}
	}
	return nil
}

// ensure creates the cgroup path cg (and its missing parents) in every
// hierarchy. On v1 the path is made from its end: a pod's parents (its
// QoS class) exist already, so a pod costs one mkdir per hierarchy; in
// the cpuset hierarchy the cgroup gets its parent's cpus and mems when it
// has none (see fillCpuset). On v2 each parent delegates every available
// controller to its children. With the systemd driver, systemd starts the
// slice (its parent must exist) and runc's manager creates it in the
// hierarchies systemd does not manage.
func (m *Manager) ensure(ctx context.Context, cg string) error {
	if m.systemd != nil {
		return m.systemd.ensure(cg)
	}
	hs, err := m.hierarchies()
	if err != nil {
		return err
	}
	parts := slices.DeleteFunc(strings.Split(strings.Trim(cg, "/"), "/"), func(p string) bool { return p == "" })
	var ctrls []string
	if m.v2 {
		if ctrls, err = readFields(filepath.Join(m.root, fileControllers)); err != nil {
			return err
		}
	}
	for _, h := range hs {
		if !m.v2 {
			if err := mkdirFromEnd(h, parts, h == m.cpusetHier); err != nil {
				return err
			}
			continue
		}
		cur := h
		for _, part := range parts {
			parent := cur
			cur = filepath.Join(cur, part)
			enableControllers(ctx, parent, ctrls)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", cur, err)
			}
		}
	}
	return nil
}

// mkdirFromEnd creates the cgroup parts under the v1 hierarchy h, trying
// the last part first and its missing parents only when it cannot. In the
// cpuset hierarchy (cpuset) each cgroup it creates, and the last one,
// gets its parent's cpus and mems.
func mkdirFromEnd(h string, parts []string, cpuset bool) error {
	if len(parts) == 0 {
		return nil
	}
	dir := filepath.Join(append([]string{h}, parts...)...)
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) && len(parts) > 1 {
		if err := mkdirFromEnd(h, parts[:len(parts)-1], cpuset); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o755)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	if !cpuset {
		return nil
	}
	return fillCpuset(h, parts, err == nil)
}

// enableControllers makes dir delegate the controllers to its children by
// writing them to cgroup.subtree_control. Controllers the kernel refuses
// are skipped: writing their limits fails later and names the file.
func enableControllers(ctx context.Context, dir string, ctrls []string) {
	enabled, _ := readFields(filepath.Join(dir, fileSubtreeControl))
	var missing []string
	for _, c := range ctrls {
		if !slices.Contains(enabled, c) {
			missing = append(missing, "+"+c)
		}
	}
	if len(missing) == 0 {
		return
	}
	if writeFile(dir, fileSubtreeControl, strings.Join(missing, " ")) == nil {
		return
	}
	for _, c := range missing {
		if err := writeFile(dir, fileSubtreeControl, c); err != nil {
			klog.FromContext(ctx).V(4).Info("Cannot enable cgroup controller", "path", dir, "controller", c, "err", err)
		}
	}
}

// fillCpuset gives the cpuset cgroup parts under h its parent's cpus and
// mems where it has none (a cgroup just created has none), so that it can
// hold tasks. A parent without them, such as one left by an interrupted
// run, is given its own parent's first.
func fillCpuset(h string, parts []string, created bool) error {
	dir := filepath.Join(append([]string{h}, parts...)...)
	parent := filepath.Dir(dir)
	for _, f := range []string{fileCpusetCPUs, fileCpusetMems} {
		if !created {
			cv, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("read %s: %w", filepath.Join(dir, f), err)
			}
			if len(bytes.TrimSpace(cv)) > 0 {
				continue
			}
		}
		pv, err := os.ReadFile(filepath.Join(parent, f))
		if len(bytes.TrimSpace(pv)) == 0 && err == nil && len(parts) > 1 {
			if err := fillCpuset(h, parts[:len(parts)-1], false); err != nil {
				return err
			}
			pv, err = os.ReadFile(filepath.Join(parent, f))
		}
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(parent, f), err)
		}
		if len(bytes.TrimSpace(pv)) == 0 {
			continue
		}
		if err := writeFile(dir, f, string(bytes.TrimSpace(pv))); err != nil {
			return err
		}
	}
	return nil
}

// apply writes r to the cgroup cg; with the systemd driver it sets them
// as the slice's unit properties.
func (m *Manager) apply(cg string, r Resources) error {
	if r.PidsMax != nil && *r.PidsMax <= 0 && !m.hasController("pids") {
		r.PidsMax = nil // nothing to lift without a pids controller
	}
	if m.systemd != nil {
		return m.systemd.apply(cg, r)
	}
	rel := filepath.FromSlash(strings.TrimPrefix(cg, "/"))
	if m.v2 {
		return m.applyV2(filepath.Join(m.root, rel), r)
	}
	cpu := filepath.Join(m.root, "cpu", rel)
	if r.CPUShares != nil {
		if err := writeFile(cpu, fileCPUShares, strconv.FormatUint(*r.CPUShares, 10)); err != nil {
			return err
		}
	}
	// The period first: the kernel checks the quota against it.
	if r.CPUPeriod != nil {
		if err := writeFile(cpu, fileCFSPeriod, strconv.FormatUint(*r.CPUPeriod, 10)); err != nil {
			return err
		}
	}
	if r.CPUQuota != nil {
		if err := writeFile(cpu, fileCFSQuota, strconv.FormatInt(unlimited(*r.CPUQuota), 10)); err != nil {
			return err
		}
	}
	if r.Memory != nil {
		if err := writeFile(filepath.Join(m.root, "memory", rel), fileMemoryLimit, strconv.FormatInt(unlimited(*r.Memory), 10)); err != nil {
			return err
		}
	}
	if r.PidsMax != nil {
		if err := writeFile(filepath.Join(m.root, "pids", rel), filePidsMax, maxOr(*r.PidsMax)); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) applyV2(dir string, r Resources) error {
	if r.CPUShares != nil {
		w := ocgroups.ConvertCPUSharesToCgroupV2Value(*r.CPUShares)
		if err := writeFile(dir, fileCPUWeight, strconv.FormatUint(w, 10)); err != nil {
			return err
		}
	}
	if r.CPUQuota != nil || r.CPUPeriod != nil {
		v := "max"
		if r.CPUQuota != nil && *r.CPUQuota > 0 {
			v = strconv.FormatInt(*r.CPUQuota, 10)
		}
		if r.CPUPeriod != nil {
			v += " " + strconv.FormatUint(*r.CPUPeriod, 10)
		}
		if err := writeFile(dir, fileCPUMax, v); err != nil {
			return err
		}
	}
	if r.Memory != nil {
		if err := writeFile(dir, fileMemoryMax, maxOr(*r.Memory)); err != nil {
			return err
		}
	}
	if r.PidsMax != nil {
		if err := writeFile(dir, filePidsMax, maxOr(*r.PidsMax)); err != nil {
			return err
		}
	}
	return nil
}

// unlimited maps every non-positive limit to -1, v1's "no limit".
func unlimited(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

// maxOr formats a limit, "max" when unlimited.
func maxOr(v int64) string {
	if v <= 0 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// writeFile writes one value to a cgroup control file.
func writeFile(dir, name, value string) error {
	p := filepath.Join(dir, name)
	// O_CREATE is a no-op on cgroup filesystems, whose files exist; it
	// lets plain directories stand in for them in tests.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, err)
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, p, err)
	}
	return nil
}

// readFields returns the space-separated words of a file.
func readFields(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	return strings.Fields(string(b)), nil
}

// parsePIDs counts the process IDs in the content of a cgroup.procs file.
func parsePIDs(b []byte) (int, error) {
	// No scanner: its buffer alone was 4 KiB per file, and removing a pod
	// reads this file in every hierarchy for each of its cgroups.
	n := 0
	for line := range bytes.Lines(b) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if _, err := strconv.ParseUint(string(line), 10, 32); err != nil {
			return 0, fmt.Errorf("pid %q: %w", line, err)
		}
		n++
	}
	return n, nil
}

// cgroupTree is a cgroup directory and its descendants, each read once:
// the processes in them and their child cgroups.
type cgroupTree struct {
	dir      string
	procs    int // in dir and below it
	children []*cgroupTree
}

// readTree reads the cgroup dir and every cgroup below it; nil when dir
// does not exist.
func readTree(dir string) (*cgroupTree, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	t := &cgroupTree{dir: dir}
	for _, e := range entries {
		switch {
		case e.IsDir():
			c, err := readTree(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			if c != nil {
				t.children = append(t.children, c)
				t.procs += c.procs
			}
		case e.Name() == fileProcs:
			p := filepath.Join(dir, fileProcs)
			b, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			n, err := parsePIDs(b)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			t.procs += n
		}
	}
	return t, nil
}

// removeTree removes the cgroup dir and every cgroup below it, children
// first. A cgroup that still has tasks gives an error wrapping ErrBusy.
func removeTree(dir string) error {
	t, err := readTree(dir)
	if err != nil || t == nil {
		return err
	}
	return t.remove()
}

// remove removes the cgroups of t, children first; one already gone is no
// error. A cgroup that still has tasks gives an error wrapping ErrBusy.
func (t *cgroupTree) remove() error {
	for _, c := range t.children {
		if err := c.remove(); err != nil {
			return err
		}
	}
	dir := t.dir
	err := unix.Rmdir(dir)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		// Regular files only exist where plain directories stand in for
		// a cgroup filesystem (tests): remove them and retry.
		entries, lerr := os.ReadDir(dir)
		if lerr != nil {
			return fmt.Errorf("list cgroup %s: %w", dir, lerr)
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				if rerr := os.Remove(filepath.Join(dir, e.Name())); rerr != nil {
					return fmt.Errorf("remove cgroup %s: %w", dir, rerr)
				}
			}
		}
		err = unix.Rmdir(dir)
	}
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("remove cgroup %s: %w: %w", dir, ErrBusy, err)
	default:
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
}
