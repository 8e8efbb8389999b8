// Package procmem keeps heartlet's own resident memory to what it uses.
//
// Most of an idle agent's resident set is its binary: the code and
// read-only data touched while it starts (flag and configuration
// parsing, the API types' registration, TLS, the node's registration,
// the first sync of every pod) stay mapped long after, and the kernel
// maps the neighbours of every page touched (fault-around, 64 KiB) with
// it. Measured on the benchmark's node: 28 MiB of the binary resident
// idle, of which 4.4 MiB were referenced in a 10-second idle window.
//
// Once heartlet is idle after its start, and again when it has been idle
// for five minutes after a busy spell, the Releaser asks the kernel to
// reclaim the binary's pages heartlet has mapped (MADV_PAGEOUT), to drop
// those of its pages in the page cache that nobody maps
// (POSIX_FADV_DONTNEED), and to read them back one page at a time
// (MADV_RANDOM), so that what comes back is what heartlet uses. A page
// needed again is read back from the disk on use. At the first idle
// interval after each busy spell it only unmaps them (MADV_DONTNEED): they
// stay in the page cache, and what is used again is mapped again without
// reading the disk.
package procmem

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mapping is a range of the process's address space.
type Mapping struct {
	Start, End uintptr
}

// binaryMappings returns the read-only mappings of the file exe (the
// process's binary; its code, read-only data and symbol tables) in r, a
// /proc/<pid>/maps. Writable mappings (the binary's initialised data,
// copied on write) are left alone. An ill-formed line is an error naming
// it.
func binaryMappings(r io.Reader, exe string) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		// start-end perms offset dev inode [path]; the path may hold
		// spaces, and ends in " (deleted)" when the file was replaced.
		fields := strings.Fields(line)
		if len(fields) < 5 {
			return nil, fmt.Errorf("maps line %d %q: want at least 5 fields", n, line)
		}
		start, end, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %d %q: address range without '-'", n, line)
		}
		lo, err := strconv.ParseUint(start, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("maps line %d: start address: %w", n, err)
		}
		hi, err := strconv.ParseUint(end, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("maps line %d: end address: %w", n, err)
		}
		if hi < lo {
			return nil, fmt.Errorf("maps line %d %q: range ends before it starts", n, line)
		}
		perms := fields[1]
		if len(perms) != 4 {
			return nil, fmt.Errorf("maps line %d %q: permissions %q are not 4 characters", n, line, perms)
		}
		if perms[0] != 'r' || perms[1] == 'w' || len(fields) < 6 {
			continue
		}
		path := strings.Join(fields[5:], " ")
		if path != exe && path != exe+" (deleted)" {
			continue
		}
		out = append(out, Mapping{Start: uintptr(lo), End: uintptr(hi)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps: %w", err)
	}
	return out, nil
}

// rssFile returns RssFile (the resident pages mapped from files, the
// binary's chiefly) of a /proc/<pid>/status, in bytes.
func rssFile(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "RssFile:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("RssFile: %w", err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	return 0, fmt.Errorf("no RssFile line in status")
}
