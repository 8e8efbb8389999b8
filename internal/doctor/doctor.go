// Package doctor checks a node as heartlet would run on it, from the same
// configuration: the configuration itself, the API server (reachable, TLS,
// identity, permissions, clock), certificates, the container runtime (CRI
// version, cgroup driver, CNI), swap, cgroups, ports, pods against maxPods,
// disk space against the eviction thresholds and the kubelet API's
// authentication and authorization. Each check says what it found and, when
// something is wrong, how to fix it.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Level is how bad a result is.
type Level string

// The levels, from good to bad. Skipped is for a check that could not run
// because something it needs failed or is not configured.
const (
	OK      Level = "ok"
	Skipped Level = "skip"
	Warning Level = "warning"
	Error   Level = "error"
)

// Result is one finding of a check.
type Result struct {
	Level Level `json:"level"`
	// Found says what the check saw.
	Found string `json:"found"`
	// Fix says what to do about it; empty for ok.
	Fix string `json:"fix,omitempty"`
}

// Check is one named check. Run must return at least one result and must
// return when ctx is done; the runner bounds it with a timeout.
type Check struct {
	Name string
	Run  func(ctx context.Context) []Result
}

// Line is one result of the named check, as printed.
type Line struct {
	Check string `json:"check"`
	Result
}

// DefaultTimeout bounds each check.
const DefaultTimeout = 15 * time.Second

// Run runs the checks in order, each bounded by timeout (DefaultTimeout
// when zero). A check that does not return in time is reported as an
// error; its goroutine is left to end on its cancelled context.
func Run(ctx context.Context, checks []Check, timeout time.Duration) []Line {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var lines []Line
	for _, c := range checks {
		for _, r := range runOne(ctx, c, timeout) {
			lines = append(lines, Line{Check: c.Name, Result: r})
		}
	}
	return lines
}

func runOne(ctx context.Context, c Check, timeout time.Duration) []Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan []Result, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case rs := <-done:
		if len(rs) == 0 {
			return []Result{{Level: Error, Found: "the check reported nothing"}}
		}
		return rs
	case <-ctx.Done():
		return []Result{{Level: Error, Found: fmt.Sprintf("no result within %s: %v", timeout, ctx.Err()),
			Fix: "see what the check waits for (a server or socket that does not answer), or raise --timeout"}}
	}
}

// Failed reports whether any line is an error.
func Failed(lines []Line) bool {
	for _, l := range lines {
		if l.Level == Error {
			return true
		}
	}
	return false
}

// WriteText prints one line per result, aligned:
//
//	ok       runtime        containerd 1.6.20 via unix:///run/containerd/containerd.sock, CRI v1
//	error    kubeconfig     /etc/x: no such file — fix: --kubeconfig ...
func WriteText(w io.Writer, lines []Line) error {
	width := 0
	for _, l := range lines {
		width = max(width, len(l.Check))
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-7s  %-*s  %s", l.Level, width, l.Check, oneLine(l.Found))
		if l.Fix != "" {
			b.WriteString(" — fix: " + oneLine(l.Fix))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints the results as one JSON document:
// {"lines": [{"check", "level", "found", "fix"}...], "failed": bool}.
func WriteJSON(w io.Writer, lines []Line) error {
	if lines == nil {
		lines = []Line{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Lines  []Line `json:"lines"`
		Failed bool   `json:"failed"`
	}{lines, Failed(lines)})
}

// oneLine keeps a message on one output line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func ok(format string, args ...any) Result {
	return Result{Level: OK, Found: fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) Result {
	return Result{Level: Skipped, Found: fmt.Sprintf(format, args...)}
}

func warn(fix, format string, args ...any) Result {
	return Result{Level: Warning, Found: fmt.Sprintf(format, args...), Fix: fix}
}

func fail(fix, format string, args ...any) Result {
	return Result{Level: Error, Found: fmt.Sprintf(format, args...), Fix: fix}
}
