package podsync

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseCRILogLine: parsing never panics; what a line yields is the end
// of that line; and a line written in the CRI format gives back exactly
// its content and whether it was partial.
func FuzzParseCRILogLine(f *testing.F) {
	for _, s := range []string{
		"2026-01-02T03:04:05.123456789Z stdout F hello world",
		"2026-01-02T03:04:05Z stderr P part",
		"2026-01-02T03:04:05Z stdout F:x:y tagged",
		"2026-01-02T03:04:05Z stdout F ",
		"2026-01-02T03:04:05Z stdout F",
		"2026-01-02T03:04:05Z stdin F nope",
		"garbage",
		"",
		"  ",
	} {
		f.Add([]byte(s), []byte("content with  spaces"), false)
	}
	f.Fuzz(func(t *testing.T, line, content []byte, partial bool) {
		got, full, ok := parseCRILogLine(line)
		if ok && !bytes.HasSuffix(line, got) {
			t.Fatalf("parse(%q) = %q, not the end of the line", line, got)
		}
		if !ok && (got != nil || full) {
			t.Fatalf("parse(%q) failed but returned %q full=%v", line, got, full)
		}
		// Round trip: content never holds the newline that ends a line.
		content = bytes.ReplaceAll(content, []byte{'\n'}, nil)
		tag := "F"
		if partial {
			tag = "P"
		}
		written := append([]byte("2026-01-02T03:04:05.5Z stderr "+tag+" "), content...)
		got, full, ok = parseCRILogLine(written)
		if !ok || !bytes.Equal(got, content) || full == partial {
			t.Fatalf("parse(%q) = %q full=%v ok=%v, want %q full=%v", written, got, full, ok, content, !partial)
		}
	})
}

// FuzzTailCRILog: the termination message read from the end of a log
// never exceeds maxBytes, is always the end of what the whole log says,
// and is all of it when lines and bytes are enough.
func FuzzTailCRILog(f *testing.F) {
	f.Add([]byte("2026-01-02T03:04:05Z stdout F one\n2026-01-02T03:04:06Z stderr P tw\n2026-01-02T03:04:06Z stderr F o\n"), uint8(2), uint16(2048))
	f.Add([]byte("2026-01-02T03:04:05Z stdout F one\nbad line\n\n2026-01-02T03:04:06Z stdout F two"), uint8(1), uint16(3))
	f.Add(bytes.Repeat([]byte("2026-01-02T03:04:05Z stdout F 0123456789\n"), 1000), uint8(80), uint16(2048))
	f.Add([]byte("\n\n\n"), uint8(0), uint16(0))
	f.Add(bytes.Repeat([]byte("x"), 20000), uint8(3), uint16(100))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, lines uint8, maxBytes uint16) {
		name := filepath.Join(dir, "0.log")
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		n, max := int(lines)+1, int(maxBytes)
		got, err := tailCRILog(name, n, max)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > max {
			t.Fatalf("tail of %d bytes, over the %d-byte limit", len(got), max)
		}
		// The whole log as a reference: every line parsed.
		var all bytes.Buffer
		for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte{'\n'}), []byte{'\n'}) {
			content, full, ok := parseCRILogLine(line)
			if !ok {
				continue
			}
			all.Write(content)
			if full {
				all.WriteByte('\n')
			}
		}
		if !bytes.HasSuffix(all.Bytes(), []byte(got)) {
			t.Fatalf("tail %q is not the end of the log's content %q", got, all.Bytes())
		}
		everything, err := tailCRILog(name, bytes.Count(data, []byte{'\n'})+1, len(data)+1)
		if err != nil {
			t.Fatal(err)
		}
		if everything != all.String() {
			t.Fatalf("tail with room for everything = %q, want %q", everything, all.String())
		}
	})
}
