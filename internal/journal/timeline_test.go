package journal

import (
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestAgo(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{-400 * time.Millisecond, "now"},
		{-130 * time.Second, "-2m10s"},
		{5 * time.Second, "+5s"},
		{-3*time.Hour - 2*time.Second, "-3h0m2s"},
	}
	for _, tt := range tests {
		if got := Ago(t0, t0.Add(tt.d)); got != tt.want {
			t.Errorf("Ago(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		e    Entry
		want string
	}{
		{"plain", Entry{Kind: KindAdmission, Message: "admitted"}, "admitted"},
		{"reason added", Entry{Kind: KindAdmission, Message: "rejected: no room", Reason: "OutOfpods"}, "rejected: no room (OutOfpods)"},
		{"reason already said", Entry{Message: "back-off ImagePullBackOff", Reason: "ImagePullBackOff"}, "back-off ImagePullBackOff"},
		{"container and duration", Entry{Container: "app", Message: `pulled "busybox"`, Duration: 1234567 * time.Microsecond}, `[app] pulled "busybox"; took 1.235s`},
		{"repeated with retry", Entry{Container: "app", Message: "back-off", Count: 4, First: t0.Add(-time.Minute), NextRetry: t0.Add(20 * time.Second)},
			"[app] back-off; 4 times since -1m0s; next retry in 20s"},
		{"retry past", Entry{Message: "back-off", NextRetry: t0.Add(-3 * time.Second)}, "back-off; retry was due -3s"},
	}
	for _, tt := range tests {
		if got := tt.e.Describe(t0); got != tt.want {
			t.Errorf("%s: Describe = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestWriteTimeline(t *testing.T) {
	var b strings.Builder
	pj := PodJournal{Namespace: "ns", Name: "web", UID: "u1", Now: t0, Entries: []Entry{
		{Time: t0.Add(-90 * time.Second), Kind: KindAdmission, Message: "admitted"},
		{Time: t0.Add(-80 * time.Second), Kind: KindContainer, Container: "app", Message: "container started"},
	}}
	if err := WriteTimeline(&b, pj); err != nil {
		t.Fatal(err)
	}
	want := "Pod ns/web (uid u1), 2 entries, node time 2026-12-04T10:00:00Z\n" +
		"     -1m30s  admission  admitted\n" +
		"     -1m20s  container  [app] container started\n"
	if b.String() != want {
		t.Errorf("timeline:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	_ = WriteTimeline(&b, PodJournal{Namespace: "ns", Name: "new", Now: t0})
	if !strings.Contains(b.String(), "no decisions recorded yet") {
		t.Errorf("empty timeline:\n%s", b.String())
	}
}

// A container writes its probe output and error messages: they must not
// reach the reader's terminal as control sequences.
func TestWriteTimelineDefusesControlCharacters(t *testing.T) {
	var b strings.Builder
	attack := "probe failed: \x1b]0;pwned\x07\x1b[2J\r\nfake line\u202e\x00"
	_ = WriteTimeline(&b, PodJournal{Namespace: "ns\x1b[31m", Name: "web", Now: t0, Entries: []Entry{{Time: t0, Kind: KindProbe, Container: "a\x1b", Message: attack}}})
	out := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\x00", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("timeline contains %q:\n%q", bad, out)
		}
	}
	if strings.Count(out, "\n") != 2 {
		t.Errorf("timeline has %d lines, want 2 (a message cannot add lines):\n%q", strings.Count(out, "\n"), out)
	}
	if !strings.Contains(out, `probe failed: \x1b]0;pwned\a\x1b[2J\r\nfake line\u202e\x00`) {
		t.Errorf("timeline does not show the characters escaped:\n%s", out)
	}
}

func FuzzTerminalSafe(f *testing.F) {
	f.Add("plain text")
	f.Add("\x1b[2J\r\n\u202e\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		out := terminalSafe(s)
		for _, r := range out {
			if !unicode.IsPrint(r) && r != ' ' {
				t.Fatalf("terminalSafe(%q) = %q keeps %U", s, out, r)
			}
		}
	})
}
