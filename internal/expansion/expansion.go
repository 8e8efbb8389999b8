// Package expansion expands $(VAR) references the way the Kubernetes API
// defines them for container command, args, env values and subPathExpr.
package expansion

import "strings"

// Expand replaces every $(NAME) in s with lookup(NAME) when lookup knows
// NAME, and leaves the reference as written otherwise. $$ escapes a dollar
// sign, so $$(NAME) yields the literal text $(NAME). These are the rules the
// API documents for command, args and env values.
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		switch {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				// Unterminated reference: keep the rest literally.
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// MapLookup adapts a map to expand's lookup function.
func MapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}
