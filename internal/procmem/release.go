package procmem

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Released is what one release did.
type Released struct {
	// Mapped is the size of the binary's read-only mappings advised.
	Mapped uintptr
	// Before and After are the process's RssFile around the advice.
	Before, After int64
}

// Release asks the kernel to reclaim the pages of the running binary the
// process has mapped read-only, and to read them back one page at a time
// when they are used again; pages of the binary in the page cache that no
// process maps (e.g. those Drop unmapped) are dropped from it too. Pages
// other processes map too are left (the kernel skips them), as are pages
// on a kernel without MADV_PAGEOUT (before 5.4): that is an error, and
// nothing is changed.
func Release() (Released, error) {
	exe, ms, err := ownBinary()
	if err != nil {
		return Released{}, err
	}
	// /proc/self/exe opens the running binary itself, also when its path
	// was replaced on disk.
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return Released{}, fmt.Errorf("open the binary %s: %w", exe, err)
	}
	defer f.Close()
	// A binary installed just before it started may still have dirty
	// pages in the page cache, which neither advice drops: written back
	// first, they are clean. Best effort: a file system without fsync
	// (e.g. squashfs, read-only) has no dirty pages to write.
	_ = unix.Fdatasync(int(f.Fd()))
	return measured(func() (uintptr, error) {
		var mapped uintptr
		for _, m := range ms {
			// The reclaim first: a kernel that refuses it has changed nothing.
			if err := madvise(m, unix.MADV_PAGEOUT); err != nil {
				return mapped, fmt.Errorf("madvise(MADV_PAGEOUT) %#x-%#x: %w", m.Start, m.End, err)
			}
			if err := madvise(m, unix.MADV_RANDOM); err != nil {
				return mapped, fmt.Errorf("madvise(MADV_RANDOM) %#x-%#x: %w", m.Start, m.End, err)
			}
			mapped += m.End - m.Start
		}
		// The binary's pages no process maps, such as those Drop unmapped.
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return mapped, fmt.Errorf("fadvise(POSIX_FADV_DONTNEED) %s: %w", exe, err)
		}
		return mapped, nil
	})
}

// Drop unmaps the pages of the running binary the process has mapped
// read-only, leaving them in the page cache: a page used again is mapped
// again without reading the disk (with those of its 64 KiB that are
// cached). It costs far less than Release when the pages are soon needed
// again, and gives back less: what is used again comes back.
func Drop() (Released, error) {
	_, ms, err := ownBinary()
	if err != nil {
		return Released{}, err
	}
	return measured(func() (uintptr, error) {
		var mapped uintptr
		for _, m := range ms {
			if err := madvise(m, unix.MADV_DONTNEED); err != nil {
				return mapped, fmt.Errorf("madvise(MADV_DONTNEED) %#x-%#x: %w", m.Start, m.End, err)
			}
			mapped += m.End - m.Start
		}
		return mapped, nil
	})
}

// measured runs advise, which returns the size of the mappings it advised,
// between two readings of the process's RssFile.
func measured(advise func() (uintptr, error)) (Released, error) {
	var r Released
	var err error
	if r.Before, err = ownRSSFile(); err != nil {
		return Released{}, err
	}
	if r.Mapped, err = advise(); err != nil {
		return r, err
	}
	if r.After, err = ownRSSFile(); err != nil {
		return r, err
	}
	return r, nil
}

// ownBinary returns the running binary's path and its read-only mappings.
func ownBinary() (string, []Mapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "", nil, fmt.Errorf("find the binary: %w", err)
	}
	// A binary replaced on disk since it started is linked with this
	// suffix; binaryMappings matches the mapping's path either way.
	exe = strings.TrimSuffix(exe, " (deleted)")
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "", nil, fmt.Errorf("read own mappings: %w", err)
	}
	ms, err := binaryMappings(bytes.NewReader(maps), exe)
	if err != nil {
		return "", nil, err
	}
	if len(ms) == 0 {
		return "", nil, fmt.Errorf("no read-only mapping of %s in /proc/self/maps", exe)
	}
	return exe, ms, nil
}

// madvise gives advice on a mapping by address: the mapping is the
// binary's, never Go memory, so no slice of it is made.
func madvise(m Mapping, advice int) error {
	_, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, uintptr(advice))
	if errno != 0 {
		return errno
	}
	return nil
}

func ownRSSFile() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read own status: %w", err)
	}
	defer f.Close()
	return rssFile(f)
}
