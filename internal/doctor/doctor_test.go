package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	checks := []Check{
		{"first", func(context.Context) []Result { return []Result{ok("fine"), warn("do this", "odd")} }},
		{"blocks", func(ctx context.Context) []Result { <-ctx.Done(); return nil }},
		{"silent", func(context.Context) []Result { return nil }},
	}
	lines := Run(context.Background(), checks, 20*time.Millisecond)
	want := []struct {
		check string
		level Level
		found string
	}{
		{"first", OK, "fine"},
		{"first", Warning, "odd"},
		{"blocks", Error, "no result within 20ms"},
		{"silent", Error, "reported nothing"},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines %+v, want %d", len(lines), lines, len(want))
	}
	for i, w := range want {
		l := lines[i]
		if l.Check != w.check || l.Level != w.level || !strings.Contains(l.Found, w.found) {
			t.Errorf("line %d = %+v, want %s %s %q", i, l, w.check, w.level, w.found)
		}
	}
	if !Failed(lines) {
		t.Error("Failed = false with error lines")
	}
	if Failed(lines[:2]) {
		t.Error("Failed = true with ok and warning lines only")
	}
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	err := WriteText(&b, []Line{
		{Check: "runtime", Result: ok("containerd 1.6.20 via unix:///run/x.sock, CRI v1")},
		{Check: "kubeconfig", Result: fail("--kubeconfig FILE", "/etc/x: no such\nfile")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "ok       runtime     containerd 1.6.20 via unix:///run/x.sock, CRI v1\n" +
		"error    kubeconfig  /etc/x: no such file — fix: --kubeconfig FILE\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, []Line{{Check: "swap", Result: fail("swapoff -a", "swap is on")}}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lines []struct {
			Check, Level, Found, Fix string
		}
		Failed bool
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if !doc.Failed || len(doc.Lines) != 1 || doc.Lines[0].Check != "swap" || doc.Lines[0].Level != "error" || doc.Lines[0].Fix != "swapoff -a" {
		t.Errorf("got %+v", doc)
	}
}

func TestMemo(t *testing.T) {
	calls := 0
	f := Memo(func(context.Context) (int, error) { calls++; return calls, nil })
	for range 3 {
		if v, _ := f(context.Background()); v != 1 {
			t.Errorf("got %d, want the first result 1", v)
		}
	}
}
