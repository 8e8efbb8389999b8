package volume

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteAtomicLifecycle(t *testing.T) {
	dir := t.TempDir()
	now := epoch

	// Initial write.
	changed, err := writeAtomic(dir, payload{
		"a":     {data: []byte("one"), mode: 0o644},
		"sub/b": {data: []byte("two"), mode: 0o600},
	}, now)
	if err != nil || !changed {
		t.Fatalf("initial write = %v, %v; want true, nil", changed, err)
	}
	first, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatalf("..data is not a link: %v", err)
	}
	if !strings.HasPrefix(first, "..2026_01_01_00_00_00.") {
		t.Errorf("data dir %q does not carry the timestamp", first)
	}
	for name, target := range map[string]string{"a": "..data/a", "sub": "..data/sub"} {
		got, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || got != target {
			t.Errorf("visible %s -> %q (%v), want -> %q", name, got, err, target)
		}
	}
	mustEqualMap(t, readVolume(t, dir), map[string]string{"a": "one", "sub/b": "two"})
	if m := fileMode(t, filepath.Join(dir, "sub/b")); m != 0o600 {
		t.Errorf("mode of sub/b = %o, want 600", m)
	}
	if m := fileMode(t, filepath.Join(dir, first)); m != 0o755 {
		t.Errorf("mode of data dir = %o, want 755", m)
	}

	// Same content: nothing written.
	changed, err = writeAtomic(dir, payload{
		"a":     {data: []byte("one"), mode: 0o644},
		"sub/b": {data: []byte("two"), mode: 0o600},
	}, now.Add(time.Minute))
	if err != nil || changed {
		t.Fatalf("unchanged write = %v, %v; want false, nil", changed, err)
	}
	if got := dataDirs(t, dir); len(got) != 1 || got[0] != first {
		t.Fatalf("data dirs after unchanged write = %v, want [%s]", got, first)
	}

	// Update: a changes, sub/b goes away, c appears.
	changed, err = writeAtomic(dir, payload{
		"a": {data: []byte("uno"), mode: 0o644},
		"c": {data: []byte("tres"), mode: 0o644},
	}, now.Add(2*time.Minute))
	if err != nil || !changed {
		t.Fatalf("update = %v, %v; want true, nil", changed, err)
	}
	second, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if second == first || !strings.HasPrefix(second, "..2026_01_01_00_02_00.") {
		t.Fatalf("..data -> %q after update, want a new timestamped dir (old %q)", second, first)
	}
	if got := dataDirs(t, dir); len(got) != 1 || got[0] != second {
		t.Fatalf("data dirs after update = %v, want only [%s]", got, second)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !os.IsNotExist(err) {
		t.Errorf("visible link sub still there after its file went away (err %v)", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, newDataDirName)); !os.IsNotExist(err) {
		t.Errorf("temporary link left behind (err %v)", err)
	}
	mustEqualMap(t, readVolume(t, dir), map[string]string{"a": "uno", "c": "tres"})

	// A mode change alone rewrites.
	changed, err = writeAtomic(dir, payload{
		"a": {data: []byte("uno"), mode: 0o400},
		"c": {data: []byte("tres"), mode: 0o644},
	}, now.Add(3*time.Minute))
	if err != nil || !changed {
		t.Fatalf("mode change = %v, %v; want true, nil", changed, err)
	}
	if m := fileMode(t, filepath.Join(dir, "a")); m != 0o400 {
		t.Errorf("mode of a = %o, want 400", m)
	}

	// Empty payload empties the volume.
	if _, err := writeAtomic(dir, payload{}, now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustEqualMap(t, readVolume(t, dir), map[string]string{})
}

func TestWriteAtomicEmptyIsStable(t *testing.T) {
	dir := t.TempDir()
	if changed, err := writeAtomic(dir, payload{}, epoch); err != nil || !changed {
		t.Fatalf("first empty write = %v, %v", changed, err)
	}
	if changed, err := writeAtomic(dir, payload{}, epoch); err != nil || changed {
		t.Fatalf("second empty write = %v, %v; want false, nil", changed, err)
	}
}

func TestWriteAtomicRemovesStaleDataDirs(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "..2020_01_01_00_00_00.123")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := writeAtomic(dir, payload{"a": {data: []byte("x"), mode: 0o644}}, epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale data dir from an interrupted write not removed (err %v)", err)
	}
}

func TestValidatePayloadPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"a", true},
		{"a/b/c", true},
		{"a..b", true},
		{".hidden", true},
		{"", false},
		{"/abs", false},
		{"../x", false},
		{"a/../b", false},
		{"..data", false},
		{"..x/y", false},
		{".", false},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("x/", 2049), false},
	}
	for _, tc := range tests {
		err := validatePayloadPath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("validatePayloadPath(%.40q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
	if _, err := writeAtomic(t.TempDir(), payload{"../escape": {data: []byte("x"), mode: 0o644}}, epoch); err == nil {
		t.Error("writeAtomic accepted a path with ..")
	}
}
