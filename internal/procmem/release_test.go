package procmem

import (
	"encoding/binary"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestRelease releases the test binary's own pages: with every page of
// its code and read-only data mapped, after the release fewer than half
// are (those the test touches again). The process goes on running
// the code it gave back.
func TestRelease(t *testing.T) {
	_, ms, err := ownBinary()
	if err != nil {
		t.Fatal(err)
	}
	pm := openPagemap(t)
	touchAll(t, ms)
	before := count(mappedPages(t, pm, ms))
	r, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := count(mappedPages(t, pm, ms))
	if r.Mapped == 0 {
		t.Fatal("no mapping of the test binary released")
	}
	if after >= before/2 {
		t.Errorf("%d of the binary's pages mapped before the release, %d after: want less than half left", before, after)
	}
	t.Logf("mapped %d KiB; pages mapped: %d before, %d after; RssFile %d KiB before, %d KiB after", r.Mapped>>10, before, after, r.Before>>10, r.After>>10)
	if _, err := Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
}

// TestDropKeepsPagesCached: Drop unmaps the test binary's pages and
// leaves them in the page cache; the Release after it drops most of those
// it unmapped from the page cache too (MADV_PAGEOUT alone, reaching only
// mapped pages, would leave all of them).
func TestDropKeepsPagesCached(t *testing.T) {
	_, ms, err := ownBinary()
	if err != nil {
		t.Fatal(err)
	}
	pm := openPagemap(t)
	touchAll(t, ms)
	total := len(cachedPages(t, ms))
	r, err := Drop()
	if err != nil {
		t.Fatal(err)
	}
	if r.Mapped == 0 {
		t.Fatal("no mapping of the test binary dropped")
	}
	// Pages the test touches from here on are mapped again, with their
	// cached neighbours; the others stay unmapped.
	cached, mapped := cachedPages(t, ms), mappedPages(t, pm, ms)
	var kept []int // cached, not mapped: unmapped by Drop and kept
	for i := range cached {
		if cached[i] && !mapped[i] {
			kept = append(kept, i)
		}
	}
	if len(kept) < total/4 {
		t.Fatalf("%d of the binary's %d pages cached and unmapped after the drop, want at least a quarter", len(kept), total)
	}
	if _, err := Release(); err != nil {
		t.Fatal(err)
	}
	after := cachedPages(t, ms)
	still := 0
	for _, i := range kept {
		if after[i] {
			still++
		}
	}
	// Pages the test (and, under -race, the race runtime) touches after
	// the release are read back; without the page cache advice every one
	// would still be cached.
	if still >= len(kept)*3/4 {
		t.Errorf("%d of the %d pages Drop unmapped still cached after the release, want less than three quarters", still, len(kept))
	}
	t.Logf("binary: %d pages; after the drop %d cached and unmapped; after the release %d of them cached", total, len(kept), still)
}

var pageSize = uintptr(unix.Getpagesize())

// cachedPages tells which pages of ms are in the page cache (mincore).
func cachedPages(t *testing.T, ms []Mapping) []bool {
	t.Helper()
	var out []bool
	for _, m := range ms {
		vec := make([]byte, (m.End-m.Start+pageSize-1)/pageSize)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, m.Start, m.End-m.Start, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
			t.Fatalf("mincore %#x-%#x: %v", m.Start, m.End, errno)
		}
		for _, v := range vec {
			out = append(out, v&1 == 1)
		}
	}
	return out
}

// mappedPages tells which pages of ms the process maps: bit 63 (present)
// of each page's entry in /proc/self/pagemap.
func mappedPages(t *testing.T, pm *os.File, ms []Mapping) []bool {
	t.Helper()
	var out []bool
	for _, m := range ms {
		n := int((m.End - m.Start + pageSize - 1) / pageSize)
		buf := make([]byte, 8*n)
		if _, err := pm.ReadAt(buf, int64(m.Start/pageSize)*8); err != nil {
			t.Fatalf("pagemap %#x-%#x: %v", m.Start, m.End, err)
		}
		for i := range n {
			out = append(out, binary.LittleEndian.Uint64(buf[8*i:])>>63 == 1)
		}
	}
	return out
}

func openPagemap(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// touchAll maps every page of ms (reading a byte of each through
// /proc/self/mem faults it in), so that all are cached and mapped.
func touchAll(t *testing.T, ms []Mapping) {
	t.Helper()
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	for _, m := range ms {
		for a := m.Start; a < m.End; a += pageSize {
			if _, err := f.ReadAt(b, int64(a)); err != nil {
				t.Fatalf("read %#x: %v", a, err)
			}
		}
	}
}

func count(pages []bool) int {
	n := 0
	for _, p := range pages {
		if p {
			n++
		}
	}
	return n
}
