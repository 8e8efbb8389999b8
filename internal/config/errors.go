package config

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ErrHelp is returned by Load after it wrote the usage to stdout because of
// --help. The caller should exit successfully.
var ErrHelp = errors.New("help requested")

// ErrVersion is returned by Load after it wrote the version to stdout
// because of --version. The caller should exit successfully.
var ErrVersion = errors.New("version requested")

// Problem is one error in a configuration, located where the user can fix
// it: a line of the configuration file or a command-line flag.
type Problem struct {
	// File is the --config file the value came from ("" when it did not).
	File string
	// Line is the 1-based line in File (0 when unknown).
	Line int
	// Flag is the command-line flag that set the value, e.g. "--max-pods"
	// ("" when no flag did).
	Flag string
	// Field is what is wrong, by field path. Nil for problems that are not
	// about one field, such as a YAML syntax error; Message says those.
	Field *field.Error
	// Message describes a problem that has no Field.
	Message string
}

// Error renders the problem as "FILE:LINE: field.path: message" (or
// "flag --name: field.path: message" for a flag).
func (p *Problem) Error() string {
	var b strings.Builder
	switch {
	case p.Flag != "":
		b.WriteString("flag " + p.Flag + ": ")
	case p.File != "" && p.Line > 0:
		b.WriteString(p.File + ":" + strconv.Itoa(p.Line) + ": ")
	case p.File != "":
		b.WriteString(p.File + ": ")
	}
	if p.Field != nil {
		b.WriteString(p.Field.Error())
	} else {
		b.WriteString(p.Message)
	}
	return b.String()
}

// Errors is every problem found in one configuration. Load returns it so a
// caller can list them all.
type Errors []*Problem

// Error joins the problems, one per line.
func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, p := range e {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// locator attributes field errors to the flag or file line that set the
// field.
type locator struct {
	file    string
	lines   map[string]int      // field path -> line in file
	flags   map[string]string   // field path -> flag that overrode it
	dropIns map[string]fileLine // field path -> drop-in that overrode file
}

// locate wraps fe in a Problem that names the flag or line of its field or
// of its nearest ancestor.
func (l *locator) locate(fe *field.Error) *Problem {
	for p := fe.Field; p != ""; p = parentPath(p) {
		if flag, ok := l.flags[p]; ok {
			return &Problem{Flag: flag, Field: fe}
		}
	}
	for p := fe.Field; p != ""; p = parentPath(p) {
		if at, ok := l.dropIns[p]; ok {
			return &Problem{File: at.file, Line: at.line, Field: fe}
		}
	}
	if l.file == "" {
		return &Problem{Field: fe}
	}
	for p := fe.Field; p != ""; p = parentPath(p) {
		if line, ok := l.lines[p]; ok {
			return &Problem{File: l.file, Line: line, Field: fe}
		}
	}
	return &Problem{File: l.file, Field: fe}
}

// parentPath strips the last element of a field path as rendered by
// field.Path: "a.b" -> "a", "a[k]" -> "a", "a[0].b" -> "a[0]".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
		return ""
	}
	i := strings.LastIndexByte(p, '.')
	if j := strings.LastIndexByte(p, ']'); j > i {
		return ""
	}
	if i < 0 {
		return ""
	}
	return p[:i]
}

// sortProblems orders problems with a file line by line, keeping the others
// after them in their original order.
func sortProblems(ps Errors) {
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].Line, ps[j].Line
		if li == 0 {
			return false
		}
		if lj == 0 {
			return true
		}
		return li < lj
	})
}
