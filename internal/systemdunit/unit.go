// Package systemdunit reads what a systemd service's unit file and its
// drop-ins say about the command it starts: the ExecStart= command line,
// its Environment= assignments and EnvironmentFile= files, and expands the
// command line with that environment as systemd does. It reads the syntax
// of systemd.syntax(7), systemd.exec(5) and systemd.service(5) that unit
// files of node agents use; every other key is skipped. The files are
// untrusted input: every error names the line, and sizes are bounded.
package systemdunit

import (
	"errors"
	"fmt"
	"strings"
)

// MaxFileSize bounds a unit, drop-in or environment file.
const MaxFileSize = 1 << 20

// ErrSyntax is in the chain of every error about a file's content.
var ErrSyntax = errors.New("syntax error")

// EnvironmentFile is one EnvironmentFile= setting.
type EnvironmentFile struct {
	Path string
	// Optional: the path was prefixed with "-"; a missing file is
	// skipped.
	Optional bool
}

// Service is the part of a service's [Service] section that says how its
// command is started, built by applying the unit file and then its
// drop-ins, in order, with Apply.
type Service struct {
	// ExecStart are the command lines of ExecStart=, unexpanded, with
	// their prefixes ("-", "@", ":", "+", "!") removed; an empty
	// assignment clears the list.
	ExecStart []string
	// Environment are the KEY=VALUE assignments of Environment=, in order
	// (a later one of the same key wins); an empty assignment clears them.
	Environment []string
	// EnvironmentFiles are the EnvironmentFile= settings, in order; an
	// empty assignment clears them.
	EnvironmentFiles []EnvironmentFile
}

// Apply reads one unit or drop-in file and applies its [Service]
// settings to s. name is used in errors.
func (s *Service) Apply(name string, data []byte) error {
	if len(data) > MaxFileSize {
		return fmt.Errorf("%s: %w: larger than %d bytes", name, ErrSyntax, MaxFileSize)
	}
	section := ""
	for _, l := range logicalLines(string(data)) {
		line := strings.TrimSpace(l.text)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			if !strings.HasSuffix(line, "]") || len(line) < 3 {
				return fmt.Errorf("%s:%d: %w: bad section header %q", name, l.number, ErrSyntax, shorten(line))
			}
			section = line[1 : len(line)-1]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%s:%d: %w: %q is neither a section header nor KEY=VALUE", name, l.number, ErrSyntax, shorten(line))
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if section == "" {
			return fmt.Errorf("%s:%d: %w: assignment outside of a section", name, l.number, ErrSyntax)
		}
		if section != "Service" {
			continue
		}
		if err := s.set(key, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", name, l.number, key, err)
		}
	}
	return nil
}

func (s *Service) set(key, value string) error {
	switch key {
	case "ExecStart":
		if value == "" {
			s.ExecStart = nil
			return nil
		}
		s.ExecStart = append(s.ExecStart, strings.TrimLeft(value, "-@:+!"))
	case "Environment":
		if value == "" {
			s.Environment = nil
			return nil
		}
		words, err := splitWords(value)
		if err != nil {
			return err
		}
		for _, w := range words {
			k, _, ok := strings.Cut(w, "=")
			if !ok || !validName(k) {
				return fmt.Errorf("%w: %q is not an assignment NAME=VALUE", ErrSyntax, shorten(w))
			}
			s.Environment = append(s.Environment, w)
		}
	case "EnvironmentFile":
		if value == "" {
			s.EnvironmentFiles = nil
			return nil
		}
		f := EnvironmentFile{Path: value}
		if strings.HasPrefix(value, "-") {
			f = EnvironmentFile{Path: value[1:], Optional: true}
		}
		if !strings.HasPrefix(f.Path, "/") {
			return fmt.Errorf("%w: %q is not an absolute path", ErrSyntax, shorten(f.Path))
		}
		s.EnvironmentFiles = append(s.EnvironmentFiles, f)
	}
	return nil
}

// line is a logical line and the number of its first physical line.
type line struct {
	text   string
	number int
}

// logicalLines joins lines that end in a backslash with the next one (the
// backslash becomes a space); comment lines inside such a continuation
// are dropped, as systemd does.
func logicalLines(data string) []line {
	var out []line
	var cur strings.Builder
	start, continuing := 0, false
	for i, l := range strings.Split(data, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if continuing {
			t := strings.TrimSpace(l)
			if t != "" && (t[0] == '#' || t[0] == ';') {
				continue
			}
		} else {
			start = i + 1
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(l[:len(l)-1])
			cur.WriteString(" ")
			continuing = true
			continue
		}
		cur.WriteString(l)
		out = append(out, line{text: cur.String(), number: start})
		cur.Reset()
		continuing = false
	}
	if continuing {
		out = append(out, line{text: cur.String(), number: start})
	}
	return out
}

// validName says whether s is an environment variable name systemd
// accepts in assignments: letters, digits and underscores, not starting
// with a digit.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// shorten bounds text quoted in errors.
func shorten(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
