package procmem

import (
	"testing"
)

// TestRelease releases the test binary's own pages: its code and
// read-only data are resident (the test is running), and after the
// release fewer of them are. The process goes on running the code it
// gave back.
func TestRelease(t *testing.T) {
	r, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if r.Mapped == 0 {
		t.Fatal("no mapping of the test binary released")
	}
	if r.Before <= 0 {
		t.Fatalf("RssFile before the release %d, want some of the binary resident", r.Before)
	}
	if r.After >= r.Before/2 {
		t.Errorf("RssFile %d bytes before the release, %d after: want less than half left", r.Before, r.After)
	}
	t.Logf("mapped %d KiB; RssFile %d KiB before, %d KiB after", r.Mapped>>10, r.Before>>10, r.After>>10)
	if _, err := Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
}
