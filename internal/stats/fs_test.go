package stats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestMeasureDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a":     string(make([]byte, 10000)),
		"sub/b": string(make([]byte, 5000)),
	})
	// A hard link is counted once.
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	u, err := measureDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// dir, a, sub, sub/b: four inodes.
	if u.inodes != 4 {
		t.Errorf("inodes = %d, want 4", u.inodes)
	}
	if u.bytes < 15000 || u.bytes > 15000+4*64<<10 {
		t.Errorf("bytes = %d, want about 15000 plus directory blocks", u.bytes)
	}
	missing, err := measureDir(filepath.Join(dir, "missing"))
	if err != nil || missing != (dirUsage{}) {
		t.Errorf("measureDir(missing) = %+v, %v; want zero, nil", missing, err)
	}
}

func TestDUCache(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	c := newDUCache(clk, 10*time.Second)
	calls := map[string]int{}
	c.measure = func(dir string) (dirUsage, error) {
		calls[dir]++
		return dirUsage{bytes: uint64(100 * calls[dir])}, nil
	}
	get := func(dir string) (uint64, time.Time) {
		t.Helper()
		u, at, err := c.get(dir)
		if err != nil {
			t.Fatal(err)
		}
		return u.bytes, at
	}
	if b, at := get("/x"); b != 100 || !at.Equal(epoch) {
		t.Errorf("first get = %d at %v, want 100 at %v", b, at, epoch)
	}
	clk.Step(9 * time.Second)
	if b, at := get("/x"); b != 100 || !at.Equal(epoch) {
		t.Errorf("get within the ttl = %d at %v, want the cached 100 at %v", b, at, epoch)
	}
	clk.Step(time.Second)
	if b, at := get("/x"); b != 200 || !at.Equal(epoch.Add(10*time.Second)) {
		t.Errorf("get after the ttl = %d at %v, want a new measurement", b, at)
	}
	get("/y")
	c.sweep() // both were used: kept
	get("/x")
	c.sweep() // /y unused since the last sweep: forgotten
	if _, ok := c.entries["/y"]; ok {
		t.Error("an unused entry survived the sweep")
	}
	if _, ok := c.entries["/x"]; !ok {
		t.Error("a used entry was swept")
	}
}
