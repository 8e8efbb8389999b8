package systemdunit

import (
	"fmt"
	"strings"
)

// word is one word of a command line or assignment list with its quotes
// and escapes removed; bare is the variable name when the word was written
// as $NAME alone, unquoted.
type word struct {
	text string
	bare string
}

// splitWords splits s at unquoted whitespace, removing double and single
// quotes and backslash escapes, as systemd splits Environment= and
// ExecStart=.
func splitWords(s string) ([]string, error) {
	ws, err := scanWords(s)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out, nil
}

func scanWords(s string) ([]word, error) {
	var out []word
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		start := i
		var b strings.Builder
		quoted := false
		for i < len(s) && !isSpace(s[i]) {
			c := s[i]
			switch c {
			case '"', '\'':
				quoted = true
				end := i + 1
				for end < len(s) && s[end] != c {
					if c == '"' && s[end] == '\\' && end+1 < len(s) {
						b.WriteString(unescape(s[end+1]))
						end += 2
						continue
					}
					b.WriteByte(s[end])
					end++
				}
				if end >= len(s) {
					return nil, fmt.Errorf("%w: unterminated quote in %q", ErrSyntax, shorten(s[start:]))
				}
				i = end + 1
			case '\\':
				if i+1 >= len(s) {
					return nil, fmt.Errorf("%w: trailing backslash in %q", ErrSyntax, shorten(s[start:]))
				}
				b.WriteString(unescape(s[i+1]))
				quoted = true
				i += 2
			default:
				b.WriteByte(c)
				i++
			}
		}
		w := word{text: b.String()}
		if raw := s[start:i]; !quoted && len(raw) > 1 && raw[0] == '$' && validName(raw[1:]) {
			w.bare = raw[1:]
		}
		out = append(out, w)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// unescape is the text of the C-style escape \c.
func unescape(c byte) string {
	switch c {
	case 'n':
		return "\n"
	case 't':
		return "\t"
	case 'r':
		return "\r"
	}
	return string(c)
}

// Command splits the command line of an ExecStart= into its words and
// expands the environment as systemd does: a word that is $NAME alone
// becomes the variable's value split at whitespace (zero words when it is
// empty or unset), ${NAME} within a word is replaced by the value as it
// is, $$ is a dollar sign and %% a percent sign.
func Command(commandLine string, env map[string]string) ([]string, error) {
	ws, err := scanWords(commandLine)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range ws {
		if w.bare != "" {
			out = append(out, strings.Fields(env[w.bare])...)
			continue
		}
		s, err := expandBraced(w.text, env)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty command line", ErrSyntax)
	}
	return out, nil
}

// expandBraced replaces ${NAME}, $$ and %% in s.
func expandBraced(s string, env map[string]string) (string, error) {
	if !strings.ContainsAny(s, "$%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+1 < len(s) && s[i+1] == '%':
			b.WriteByte('%')
			i++
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			b.WriteByte('$')
			i++
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("%w: unterminated ${ in %q", ErrSyntax, shorten(s))
			}
			name := s[i+2 : i+2+end]
			if !validName(name) {
				return "", fmt.Errorf("%w: bad variable name %q", ErrSyntax, shorten(name))
			}
			b.WriteString(env[name])
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// ParseEnvironmentFile reads an EnvironmentFile= file: KEY=VALUE lines,
// comments starting with # or ;, values in double quotes (with backslash
// escapes, and a backslash before a newline joining lines) or single
// quotes (literal), unquoted values with backslash escapes and their
// surrounding whitespace trimmed. It returns the assignments in order.
func ParseEnvironmentFile(name string, data []byte) ([]string, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", name, ErrSyntax, MaxFileSize)
	}
	s := string(data)
	var out []string
	lineNo := 1
	i := 0
	for i < len(s) {
		// Start of a line: skip blanks, comments and empty lines.
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '\n' {
			lineNo++
			i++
			continue
		}
		if s[i] == '#' || s[i] == ';' {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		start := lineNo
		eq := strings.IndexAny(s[i:], "=\n")
		if eq < 0 || s[i+eq] != '=' {
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				end = len(s) - i
			}
			return nil, fmt.Errorf("%s:%d: %w: %q is not KEY=VALUE", name, start, ErrSyntax, shorten(s[i:i+end]))
		}
		key := strings.TrimSpace(s[i : i+eq])
		if !validName(key) {
			return nil, fmt.Errorf("%s:%d: %w: bad variable name %q", name, start, ErrSyntax, shorten(key))
		}
		i += eq + 1
		var b strings.Builder
		trailing := 0 // unquoted trailing blanks written, trimmed at the end
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	value:
		for i < len(s) {
			c := s[i]
			switch c {
			case '\n':
				break value
			case '\'':
				end := strings.IndexByte(s[i+1:], '\'')
				if end < 0 {
					return nil, fmt.Errorf("%s:%d: %w: unterminated single quote", name, start, ErrSyntax)
				}
				lit := s[i+1 : i+1+end]
				lineNo += strings.Count(lit, "\n")
				b.WriteString(lit)
				trailing = 0
				i += end + 2
			case '"':
				i++
				for {
					if i >= len(s) {
						return nil, fmt.Errorf("%s:%d: %w: unterminated double quote", name, start, ErrSyntax)
					}
					d := s[i]
					if d == '"' {
						i++
						break
					}
					if d == '\\' && i+1 < len(s) {
						switch s[i+1] {
						case '\n':
							lineNo++
						case '"', '\\', '`', '$':
							b.WriteByte(s[i+1])
						default:
							b.WriteByte('\\')
							b.WriteByte(s[i+1])
						}
						i += 2
						continue
					}
					if d == '\n' {
						lineNo++
					}
					b.WriteByte(d)
					i++
				}
				trailing = 0
			case '\\':
				if i+1 < len(s) {
					if s[i+1] == '\n' {
						lineNo++
					} else {
						b.WriteByte(s[i+1])
					}
					i += 2
				} else {
					i++
				}
				trailing = 0
			case ' ', '\t', '\r':
				b.WriteByte(c)
				trailing++
				i++
			default:
				b.WriteByte(c)
				trailing = 0
				i++
			}
		}
		v := b.String()
		out = append(out, key+"="+v[:len(v)-trailing])
	}
	return out, nil
}

// Environment merges assignments (a later one of a key wins) into a map.
func Environment(assignments ...[]string) map[string]string {
	env := map[string]string{}
	for _, list := range assignments {
		for _, a := range list {
			k, v, _ := strings.Cut(a, "=")
			env[k] = v
		}
	}
	return env
}
