package cgroups

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// hugePageLimits are the huge page limits in l (the hugepages-<size>
// resources) by the kernel's name of the page size ("2MB", "1GB"), in
// bytes. Names whose size does not parse are skipped.
func hugePageLimits(l v1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for name, q := range l {
		size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
		if !ok {
			continue
		}
		sq, err := resource.ParseQuantity(size)
		if err != nil || sq.Value() <= 0 {
			continue
		}
		out[hugePageSizeName(sq.Value())] = q.Value()
	}
	return out
}

// hugePageSizeName is the kernel's name of a page size in the hugetlb
// controller's files: the size in the largest binary unit that divides it,
// "KB", "MB", "GB", ...
func hugePageSizeName(bytes int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for bytes >= 1024 && bytes%1024 == 0 && i < len(units)-1 {
		bytes /= 1024
		i++
	}
	return strconv.FormatInt(bytes, 10) + units[i]
}

// applyHugePages writes the huge page limits of the cgroup cg:
// hugetlb.<size>.limit_in_bytes on v1, hugetlb.<size>.max on v2, in the
// page sizes' order. Without a hugetlb controller it writes nothing and
// reports false, as upstream leaves huge pages unlimited where the
// controller is missing.
func (m *Manager) applyHugePages(cg string, limits map[string]int64) (bool, error) {
	if len(limits) == 0 {
		return true, nil
	}
	if !m.hasController("hugetlb") {
		return false, nil
	}
	rel := filepath.FromSlash(strings.TrimPrefix(cg, "/"))
	dir, suffix := filepath.Join(m.root, "hugetlb", rel), "limit_in_bytes"
	if m.v2 {
		dir, suffix = filepath.Join(m.root, rel), "max"
	}
	sizes := make([]string, 0, len(limits))
	for s := range limits {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	for _, s := range sizes {
		f := "hugetlb." + s + "." + suffix
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			// The kernel has no such page size: nothing to limit.
			continue
		}
		if err := writeFile(dir, f, strconv.FormatInt(limits[s], 10)); err != nil {
			return true, fmt.Errorf("huge page limit %s: %w", s, err)
		}
	}
	return true, nil
}

// limitKubepodsHugePages limits kubepods' huge pages to those of node
// allocatable, naming a missing hugetlb controller in the log (the
// limits are then not enforced, as upstream).
func (m *Manager) limitKubepodsHugePages(ctx context.Context, kubepods string) error {
	limits := hugePageLimits(m.allocRes)
	ok, err := m.applyHugePages(kubepods, limits)
	if err != nil {
		return err
	}
	if !ok {
		klog.FromContext(ctx).Info("No hugetlb cgroup controller: huge pages of the pods' cgroup are not limited", "path", kubepods, "hugePages", limits)
	}
	return nil
}
