package manifest

import (
	"bytes"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Locator maps field paths (as printed in errors, e.g.
// "spec.containers[0].ports[1].hostPort" or "metadata.labels[app]") to the
// line of the manifest that holds them. The zero or nil Locator knows no
// lines.
type Locator struct {
	root *yamlv3.Node
}

// newLocator parses data as YAML (JSON is YAML) for positions only and
// counts its non-empty documents. Text the position parser cannot read
// yields a Locator without lines; the real decoder reports the error.
func newLocator(data []byte) (*Locator, int) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	l := &Locator{}
	docs := 0
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); err != nil {
			break
		}
		if isEmptyDoc(&n) {
			continue
		}
		docs++
		if l.root == nil {
			l.root = &n
		}
	}
	return l, docs
}

func isEmptyDoc(n *yamlv3.Node) bool {
	if n.Kind != yamlv3.DocumentNode {
		return n.Kind == 0
	}
	if len(n.Content) == 0 {
		return true
	}
	c := n.Content[0]
	return c.Kind == yamlv3.ScalarNode && c.Tag == "!!null"
}

// Line returns the 1-based line of the field at path, or of its closest
// present ancestor below the top level; 0 when none is found.
func (l *Locator) Line(path string) int {
	if l == nil || l.root == nil || path == "" {
		return 0
	}
	n := l.top()
	line := 0
	for _, seg := range splitPath(path) {
		n = deref(n)
		var next, at *yamlv3.Node
		switch {
		case seg.index >= 0 && n.Kind == yamlv3.SequenceNode:
			if seg.index < len(n.Content) {
				next = n.Content[seg.index]
				at = next
			}
		case n.Kind == yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == seg.key {
					at, next = n.Content[i], n.Content[i+1]
					break
				}
			}
		}
		if next == nil {
			return line
		}
		line = at.Line
		n = next
	}
	return line
}

func deref(n *yamlv3.Node) *yamlv3.Node {
	for i := 0; n.Kind == yamlv3.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// segment is one step of a field path: a key, or an index (>= 0).
type segment struct {
	key   string
	index int
}

// splitPath splits "a.b[0].c[key.with.dots]" into its segments.
func splitPath(path string) []segment {
	var segs []segment
	for len(path) > 0 {
		switch path[0] {
		case '.':
			path = path[1:]
		case '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				end = len(path)
			}
			inner := path[1:end]
			if i, err := strconv.Atoi(inner); err == nil && i >= 0 {
				segs = append(segs, segment{key: inner, index: i})
			} else {
				segs = append(segs, segment{key: inner, index: -1})
			}
			path = path[min(end+1, len(path)):]
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			segs = append(segs, segment{key: path[:end], index: -1})
			path = path[end:]
		}
	}
	return segs
}

// findTyped finds the first value at loosePath (a field path without list
// indices, as Go's JSON decoder reports it) whose YAML kind matches
// jsonType ("string", "number", "bool", "object", "array"), i.e. the value
// the decoder rejected. It returns the concrete path with indices and its
// line, or loosePath and 0.
func (l *Locator) findTyped(loosePath, jsonType string) (string, int) {
	if l == nil || l.root == nil {
		return loosePath, 0
	}
	keys := strings.Split(loosePath, ".")
	var foundPath string
	var foundLine int
	var walk func(n *yamlv3.Node, keys []string, path string) bool
	walk = func(n *yamlv3.Node, keys []string, path string) bool {
		n = deref(n)
		if n.Kind == yamlv3.SequenceNode {
			for i, item := range n.Content {
				if walk(item, keys, path+"["+strconv.Itoa(i)+"]") {
					return true
				}
			}
			return false
		}
		if len(keys) == 0 {
			if !kindMatches(n, jsonType) {
				return false
			}
			foundPath, foundLine = path, n.Line
			return true
		}
		if n.Kind != yamlv3.MappingNode {
			return false
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value != keys[0] {
				continue
			}
			p := keys[0]
			if path != "" {
				p = path + "." + keys[0]
			}
			v := deref(n.Content[i+1])
			if len(keys) == 1 && (v.Kind != yamlv3.SequenceNode || jsonType == "array") {
				if kindMatches(v, jsonType) {
					foundPath, foundLine = p, n.Content[i].Line
					return true
				}
				return false
			}
			if walk(n.Content[i+1], keys[1:], p) {
				return true
			}
		}
		return false
	}
	if walk(l.top(), keys, "") {
		return foundPath, foundLine
	}
	return loosePath, 0
}

func kindMatches(n *yamlv3.Node, jsonType string) bool {
	switch jsonType {
	case "object":
		return n.Kind == yamlv3.MappingNode
	case "array":
		return n.Kind == yamlv3.SequenceNode
	case "string":
		return n.Kind == yamlv3.ScalarNode && n.Tag == "!!str"
	case "number":
		return n.Kind == yamlv3.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float")
	case "bool":
		return n.Kind == yamlv3.ScalarNode && n.Tag == "!!bool"
	}
	return false
}

// quantityParents are the keys whose map values are resource quantities.
var quantityParents = map[string]bool{"limits": true, "requests": true, "overhead": true, "capacity": true, "allocatedResources": true}

// badQuantity finds the first resource quantity in the manifest that does
// not parse.
func (l *Locator) badQuantity() (badPath string, line int, value string, ok bool) {
	if l == nil || l.root == nil {
		return "", 0, "", false
	}
	var walk func(n *yamlv3.Node, path, key string) bool
	walk = func(n *yamlv3.Node, path, key string) bool {
		n = deref(n)
		switch n.Kind {
		case yamlv3.SequenceNode:
			for i, item := range n.Content {
				if walk(item, path+"["+strconv.Itoa(i)+"]", "") {
					return true
				}
			}
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], deref(n.Content[i+1])
				if quantityParents[key] && v.Kind == yamlv3.ScalarNode || k.Value == "sizeLimit" && v.Kind == yamlv3.ScalarNode {
					if _, err := resource.ParseQuantity(v.Value); err != nil {
						p := path + "." + k.Value
						if quantityParents[key] {
							p = path + "[" + k.Value + "]"
						}
						badPath, line, value, ok = strings.TrimPrefix(p, "."), k.Line, v.Value, true
						return true
					}
					continue
				}
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if walk(v, p, k.Value) {
					return true
				}
			}
		}
		return false
	}
	walk(l.top(), "", "")
	return badPath, line, value, ok
}

// top returns the document's top-level node.
func (l *Locator) top() *yamlv3.Node {
	n := l.root
	if n.Kind == yamlv3.DocumentNode && len(n.Content) > 0 {
		return n.Content[0]
	}
	return n
}
