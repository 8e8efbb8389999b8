package journal

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Ago is t relative to now, rounded to the second: "-2m10s", "now", or
// "+5s" for a time after now.
func Ago(now, t time.Time) string {
	d := t.Sub(now).Round(time.Second)
	switch {
	case d == 0:
		return "now"
	case d > 0:
		return "+" + d.String()
	}
	return d.String()
}

// Describe is the entry's text for a timeline: its container, message,
// reason (when the message does not already say it), duration, how often
// it repeated and when it is retried, with times relative to now.
func (e Entry) Describe(now time.Time) string {
	var b strings.Builder
	if e.Container != "" {
		fmt.Fprintf(&b, "[%s] ", e.Container)
	}
	b.WriteString(e.Message)
	if e.Reason != "" && !strings.Contains(e.Message, e.Reason) {
		fmt.Fprintf(&b, " (%s)", e.Reason)
	}
	if e.Duration > 0 {
		fmt.Fprintf(&b, "; took %s", e.Duration.Round(time.Millisecond))
	}
	if e.Count > 1 {
		fmt.Fprintf(&b, "; %d times since %s", e.Count, Ago(now, e.First))
	}
	if !e.NextRetry.IsZero() {
		if e.NextRetry.After(now) {
			fmt.Fprintf(&b, "; next retry in %s", e.NextRetry.Sub(now).Round(time.Second))
		} else {
			fmt.Fprintf(&b, "; retry was due %s", Ago(now, e.NextRetry))
		}
	}
	return b.String()
}

// WriteTimeline writes pj as a timeline, oldest first, one entry a line:
// the time relative to pj.Now, the kind and the description.
func WriteTimeline(w io.Writer, pj PodJournal) error {
	now := pj.Now
	if now.IsZero() {
		now = time.Now()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Pod %s/%s (uid %s), %d entries, node time %s\n", terminalSafe(pj.Namespace), terminalSafe(pj.Name), terminalSafe(string(pj.UID)), len(pj.Entries), now.UTC().Format(time.RFC3339))
	if len(pj.Entries) == 0 {
		b.WriteString("  (no decisions recorded yet)\n")
	}
	for _, e := range pj.Entries {
		fmt.Fprintf(&b, "  %9s  %-9s  %s\n", Ago(now, e.Time), terminalSafe(string(e.Kind)), terminalSafe(e.Describe(now)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// terminalSafe writes what a container controls (probe output, error
// messages) so that it cannot steer the reader's terminal: control and
// other non-printable characters, such as ESC, become Go escapes ("\x1b").
func terminalSafe(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) || r == ' ' {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
