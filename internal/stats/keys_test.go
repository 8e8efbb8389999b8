package stats

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// keyValuesByMap is the plain reading of a "key value" file that
// parseKeys must agree with: every line split into fields, kept when there
// are two and the second is an unsigned number, the last one winning.
func keyValuesByMap(b []byte) map[string]uint64 {
	kv := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			kv[f[0]] = v
		}
	}
	return kv
}

func checkParseKeys(t *testing.T, content string, keys []string) {
	t.Helper()
	vals := make([]uint64, len(keys))
	found := parseKeys([]byte(content), keys, vals)
	want := keyValuesByMap([]byte(content))
	for i, k := range keys {
		w, ok := want[k]
		if got := found&(1<<i) != 0; got != ok || (ok && vals[i] != w) {
			t.Errorf("parseKeys(%q): %s = %d (found %v), want %d (found %v)", content, k, vals[i], got, w, ok)
		}
	}
}

func TestParseKeys(t *testing.T) {
	keys := []string{"total_rss", "total_cache", "usage_usec", "a"}
	for _, content := range []string{
		"",
		"total_rss 4096\ntotal_cache 8192\n",
		"cache 1\nrss 2\ntotal_cache 3\ntotal_rss 4", // no final newline
		"total_rss  \t 17 \r\n",
		"total_rss 1 2\ntotal_cache -3\nusage_usec x\n", // three fields, negative, not a number
		"total_rss 1\ntotal_rss 2\n",                    // the last wins
		"total_rss18446744073709551615\n",               // one field
		"a 18446744073709551615\nusage_usec 18446744073709551616\n",
		"\n\n  \ntotal_rss\n a 5\n",
		"total_rss\u00a07\ntotal_cache 1\u20282\n", // Unicode spaces separate fields, as in strings.Fields
	} {
		checkParseKeys(t, content, keys)
	}
}

// FuzzParseKeys checks parseKeys against the plain reading on any content
// a cgroup file could hold.
func FuzzParseKeys(f *testing.F) {
	f.Add("total_rss 4096\ntotal_cache 8192\n")
	f.Add("a 1 2\n\ta\t3\r\n")
	f.Fuzz(func(t *testing.T, content string) {
		checkParseKeys(t, content, []string{"total_rss", "total_cache", "a"})
	})
}

// TestReadCgroupFiles reads through the pooled buffer: a file larger than
// the buffer, a number, "max", and the errors, which name the file.
func TestReadCgroupFiles(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	for i := range 2000 {
		big.WriteString("key" + strconv.Itoa(i) + " " + strconv.Itoa(i) + "\n")
	}
	big.WriteString("total_rss 42\n")
	files := map[string]string{"big": big.String(), "n": "12345\n", "max": "max\n", "bad": "12a\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var v [2]uint64
	found, err := readKeys(filepath.Join(dir, "big"), []string{"key1999", "total_rss"}, v[:])
	if err != nil || found != 3 || v != [2]uint64{1999, 42} {
		t.Errorf("readKeys(big) = %b, %v, %v; want 11, [1999 42], nil", found, v, err)
	}
	for name, want := range map[string]uint64{"n": 12345, "max": ^uint64(0)} {
		if got, err := readUint(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("readUint(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, name := range []string{"bad", "missing"} {
		p := filepath.Join(dir, name)
		if _, err := readUint(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("readUint(%s) = %v, want an error naming the file", name, err)
		}
	}
	if _, err := readKeys(filepath.Join(dir, "missing"), []string{"a"}, v[:1]); !os.IsNotExist(err) {
		t.Errorf("readKeys(missing) = %v, want not exist", err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		_, _ = readKeys(filepath.Join(dir, "big"), []string{"key1999", "total_rss"}, v[:])
	})
	// Opening the file allocates a few objects; the content none.
	if allocs > 10 {
		t.Errorf("readKeys allocates %.0f objects per read of a 2001-line file, want a handful", allocs)
	}
}
