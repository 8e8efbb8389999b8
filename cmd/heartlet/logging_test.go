package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotatingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "heartlet.log")
	r, err := openRotatingFile(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	line := strings.Repeat("x", 39) + "\n" // 40 bytes: two fit, the third rotates
	for i := range 7 {
		if _, err := fmt.Fprintf(r, "%d%s", i, line[1:]); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		return string(b)
	}
	tests := []struct {
		file  string
		first string // the first line's number
		lines int
	}{
		{path, "6", 1},
		{path + ".1", "4", 2},
		{path + ".2", "2", 2},
	}
	for _, tt := range tests {
		got := read(tt.file)
		if n := strings.Count(got, "\n"); n != tt.lines || !strings.HasPrefix(got, tt.first) {
			t.Errorf("%s = %d lines starting %q, want %d starting %q", filepath.Base(tt.file), n, got[:1], tt.lines, tt.first)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Errorf("more backups than asked for: %v", err)
	}
}

// A file that already exists is appended to, and counts toward the size.
func TestRotatingFileAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heartlet.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("o", 90)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := openRotatingFile(path, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("twenty bytes here..\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path + ".1"); len(b) != 90 {
		t.Errorf("the old content was not rotated away: .1 has %d bytes", len(b))
	}
	if b, _ := os.ReadFile(path); string(b) != "twenty bytes here..\n" {
		t.Errorf("current file = %q", b)
	}
}
