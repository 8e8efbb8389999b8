package eviction

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// PSI is one resource's pressure stall information, as the kernel reports
// it in /proc/pressure/<resource> and, on cgroup v2, in a cgroup's
// <resource>.pressure: the share of time (percent, averaged over 10, 60
// and 300 seconds) at least one task ("some") and all tasks ("full")
// stalled on the resource.
type PSI struct {
	Some, Full PSILine
	// HasFull is false on kernels that report only "some" (the cpu file
	// of older kernels).
	HasFull bool
}

// PSILine is one line of a pressure file.
type PSILine struct {
	Avg10, Avg60, Avg300 float64
	// Total is the stall time in microseconds since boot.
	Total uint64
}

// errPSIFormat is wrapped by ParsePSI's errors.
var errPSIFormat = errors.New("malformed pressure file")

// ParsePSI parses a pressure file: a "some" line and an optional "full"
// line, each of avg10=, avg60=, avg300= (percentages from 0 to 100) and
// total= fields in any order. Unknown fields are ignored; a missing,
// repeated or out-of-range field, or a line of another kind, is an error.
func ParsePSI(b []byte) (PSI, error) {
	var p PSI
	var hasSome bool
	for _, raw := range bytes.Split(b, []byte{'\n'}) {
		line := strings.TrimSpace(string(raw))
		if line == "" {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		var dst *PSILine
		switch {
		case kind == "some" && !hasSome:
			dst, hasSome = &p.Some, true
		case kind == "full" && !p.HasFull:
			dst, p.HasFull = &p.Full, true
		default:
			return PSI{}, fmt.Errorf("%w: unexpected line %q", errPSIFormat, trim(line))
		}
		l, err := parsePSILine(rest)
		if err != nil {
			return PSI{}, fmt.Errorf("%w: %s line: %w", errPSIFormat, kind, err)
		}
		*dst = l
	}
	if !hasSome {
		return PSI{}, fmt.Errorf("%w: no \"some\" line", errPSIFormat)
	}
	return p, nil
}

func parsePSILine(s string) (PSILine, error) {
	var l PSILine
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return PSILine{}, fmt.Errorf("field %q has no value", trim(f))
		}
		var avg *float64
		switch k {
		case "avg10":
			avg = &l.Avg10
		case "avg60":
			avg = &l.Avg60
		case "avg300":
			avg = &l.Avg300
		case "total":
			if seen[k] {
				return PSILine{}, fmt.Errorf("field %s repeated", k)
			}
			seen[k] = true
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return PSILine{}, fmt.Errorf("total: %w", err)
			}
			l.Total = n
			continue
		default:
			continue
		}
		if seen[k] {
			return PSILine{}, fmt.Errorf("field %s repeated", k)
		}
		seen[k] = true
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return PSILine{}, fmt.Errorf("%s: %w", k, err)
		}
		if math.IsNaN(x) || x < 0 || x > 100 {
			return PSILine{}, fmt.Errorf("%s: %v is not a percentage", k, x)
		}
		*avg = x
	}
	for _, k := range []string{"avg10", "avg60", "avg300", "total"} {
		if !seen[k] {
			return PSILine{}, fmt.Errorf("field %s missing", k)
		}
	}
	return l, nil
}

// trim shortens untrusted text quoted in an error.
func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
