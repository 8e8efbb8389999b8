package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Limits that keep a hostile file from exhausting memory or the stack.
const (
	maxDepth = 100
	maxNodes = 1 << 17
)

// nodeKind is the JSON type of a parsed value.
type nodeKind int

const (
	kindNull nodeKind = iota
	kindString
	kindInt
	kindFloat
	kindBool
	kindMap
	kindSeq
)

func (k nodeKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindString:
		return "a string"
	case kindInt:
		return "an integer"
	case kindFloat:
		return "a number"
	case kindBool:
		return "a boolean"
	case kindMap:
		return "a mapping"
	default:
		return "a list"
	}
}

// tnode is one value of the configuration document with the line it starts
// on, independent of whether the document was YAML or JSON.
type tnode struct {
	kind nodeKind
	line int
	// text is the string for kindString and the JSON literal for numbers
	// and booleans.
	text string
	// keys holds a mapping's entries in document order, duplicates included.
	keys []tkey
	// items holds a list's elements.
	items []*tnode
}

type tkey struct {
	name string
	line int
	val  *tnode
}

// lineError is a document problem found before field paths are known.
type lineError struct {
	line int
	msg  string
}

// parseDocument parses YAML or JSON bytes into a tnode tree.
func parseDocument(data []byte) (*tnode, []lineError) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return parseJSON(data)
	}
	return parseYAML(data)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a go-yaml error into a lineError, lifting the line number
// out of its message.
func yamlError(err error) lineError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			return lineError{line: line, msg: "invalid YAML: " + m[2]}
		}
	}
	return lineError{msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

func parseYAML(data []byte) (*tnode, []lineError) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, []lineError{{msg: "the file is empty"}}
		}
		return nil, []lineError{yamlError(err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, []lineError{yamlError(err)}
	default:
		return nil, []lineError{{line: extra.Line, msg: "the file holds more than one YAML document"}}
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	c := &yamlConverter{budget: maxNodes}
	n := c.convert(root, 0)
	return n, c.errs
}

type yamlConverter struct {
	budget int
	errs   []lineError
}

func (c *yamlConverter) fail(line int, msg string) *tnode {
	c.errs = append(c.errs, lineError{line: line, msg: msg})
	return &tnode{kind: kindNull, line: line}
}

func (c *yamlConverter) convert(n *yaml.Node, depth int) *tnode {
	c.budget--
	if c.budget < 0 {
		if c.budget == -1 {
			return c.fail(n.Line, "the document is too large (too many values or aliases)")
		}
		return &tnode{kind: kindNull, line: n.Line}
	}
	if depth > maxDepth {
		return c.fail(n.Line, "the document is nested too deeply")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return c.fail(n.Line, "unknown YAML alias")
		}
		t := c.convert(n.Alias, depth+1)
		t.line = n.Line
		return t
	case yaml.ScalarNode:
		return c.scalar(n)
	case yaml.MappingNode:
		t := &tnode{kind: kindMap, line: n.Line}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			for k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				c.fail(k.Line, "a mapping key must be a plain string")
				continue
			}
			if k.ShortTag() == "!!merge" {
				c.fail(k.Line, "YAML merge keys (<<) are not supported")
				continue
			}
			t.keys = append(t.keys, tkey{name: k.Value, line: n.Content[i].Line, val: c.convert(v, depth+1)})
		}
		return t
	case yaml.SequenceNode:
		t := &tnode{kind: kindSeq, line: n.Line}
		for _, item := range n.Content {
			t.items = append(t.items, c.convert(item, depth+1))
		}
		return t
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &tnode{kind: kindNull, line: n.Line}
		}
		return c.convert(n.Content[0], depth+1)
	default:
		return c.fail(n.Line, "unsupported YAML node")
	}
}

func (c *yamlConverter) scalar(n *yaml.Node) *tnode {
	t := &tnode{line: n.Line}
	switch n.ShortTag() {
	case "!!null":
		t.kind = kindNull
	case "!!str", "!!timestamp", "!!binary":
		t.kind, t.text = kindString, n.Value
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return c.fail(n.Line, fmt.Sprintf("invalid boolean %q", n.Value))
		}
		t.kind, t.text = kindBool, strconv.FormatBool(b)
	case "!!int":
		text, ok := yamlInt(n)
		if !ok {
			return c.fail(n.Line, fmt.Sprintf("invalid integer %q", n.Value))
		}
		t.kind, t.text = kindInt, text
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return c.fail(n.Line, fmt.Sprintf("%q is not a finite number", n.Value))
		}
		t.kind, t.text = kindFloat, strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return c.fail(n.Line, fmt.Sprintf("unsupported YAML tag %q", n.Tag))
	}
	return t
}

// yamlInt returns the decimal text of a YAML integer of any size.
func yamlInt(n *yaml.Node) (string, bool) {
	var i int64
	if err := n.Decode(&i); err == nil {
		return strconv.FormatInt(i, 10), true
	}
	var u uint64
	if err := n.Decode(&u); err == nil {
		return strconv.FormatUint(u, 10), true
	}
	s := strings.TrimPrefix(strings.ReplaceAll(n.Value, "_", ""), "+")
	b, ok := new(big.Int).SetString(s, 0)
	if !ok {
		return "", false
	}
	return b.String(), true
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, b := range data {
		if b == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

func (l lineIndex) line(offset int64) int {
	return sort.Search(len(l), func(i int) bool { return int64(l[i]) >= offset }) + 1
}

func parseJSON(data []byte) (*tnode, []lineError) {
	p := &jsonParser{dec: json.NewDecoder(bytes.NewReader(data)), lines: newLineIndex(data), budget: maxNodes}
	p.dec.UseNumber()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, []lineError{p.syntax(err)}
	}
	n, err := p.value(tok, 0)
	if err != nil {
		return nil, []lineError{p.syntax(err)}
	}
	if _, err := p.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, []lineError{{line: p.lines.line(p.dec.InputOffset()), msg: "invalid JSON: unexpected data after the top-level object"}}
	}
	return n, nil
}

type jsonParser struct {
	dec    *json.Decoder
	lines  lineIndex
	budget int
}

var errJSONTooLarge = errors.New("the document is too large or nested too deeply")

func (p *jsonParser) syntax(err error) lineError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return lineError{line: p.lines.line(se.Offset - 1), msg: "invalid JSON: " + se.Error()}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return lineError{line: p.lines.line(p.dec.InputOffset()), msg: "invalid JSON: unexpected end of file"}
	}
	if errors.Is(err, errJSONTooLarge) {
		return lineError{line: p.lines.line(p.dec.InputOffset()), msg: err.Error()}
	}
	return lineError{line: p.lines.line(p.dec.InputOffset()), msg: "invalid JSON: " + err.Error()}
}

// value converts the JSON value that starts with tok.
func (p *jsonParser) value(tok json.Token, depth int) (*tnode, error) {
	p.budget--
	if p.budget < 0 || depth > maxDepth {
		return nil, errJSONTooLarge
	}
	line := p.lines.line(p.dec.InputOffset() - 1)
	switch v := tok.(type) {
	case nil:
		return &tnode{kind: kindNull, line: line}, nil
	case string:
		return &tnode{kind: kindString, line: line, text: v}, nil
	case bool:
		return &tnode{kind: kindBool, line: line, text: strconv.FormatBool(v)}, nil
	case json.Number:
		k := kindInt
		if strings.ContainsAny(string(v), ".eE") {
			k = kindFloat
		}
		return &tnode{kind: k, line: line, text: string(v)}, nil
	case json.Delim:
		if v == '[' {
			t := &tnode{kind: kindSeq, line: line}
			for p.dec.More() {
				next, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				item, err := p.value(next, depth+1)
				if err != nil {
					return nil, err
				}
				t.items = append(t.items, item)
			}
			_, err := p.dec.Token() // ']'
			return t, err
		}
		t := &tnode{kind: kindMap, line: line}
		for p.dec.More() {
			keyTok, err := p.dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := keyTok.(string)
			if !ok {
				return nil, fmt.Errorf("object key is %v, not a string", keyTok)
			}
			keyLine := p.lines.line(p.dec.InputOffset() - 1)
			valTok, err := p.dec.Token()
			if err != nil {
				return nil, err
			}
			val, err := p.value(valTok, depth+1)
			if err != nil {
				return nil, err
			}
			t.keys = append(t.keys, tkey{name: key, line: keyLine, val: val})
		}
		_, err := p.dec.Token() // '}'
		return t, err
	default:
		return nil, fmt.Errorf("unexpected token %v", tok)
	}
}

// Types with their own JSON decoding, and what a value of them looks like.
var unmarshalerKinds = map[reflect.Type]string{
	reflect.TypeFor[metav1.Duration]():            `a duration such as "1m30s"`,
	reflect.TypeFor[metav1.Time]():                `an RFC 3339 time such as "2006-01-02T15:04:05Z"`,
	reflect.TypeFor[resource.Quantity]():          `a quantity such as "100Mi"`,
	reflect.TypeFor[resource.QuantityValue]():     `a quantity such as "100Mi"`,
	reflect.TypeFor[logsapi.TimeOrMetaDuration](): `a duration such as "5s"`,
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walker checks a tnode tree against a Go type the way strict JSON decoding
// would, collecting every problem with its field path and line, and builds
// the JSON the tree stands for.
type walker struct {
	lines map[string]int
	errs  []located
}

type located struct {
	err  *field.Error
	line int
}

func (w *walker) fail(line int, fe *field.Error) {
	w.errs = append(w.errs, located{err: fe, line: line})
}

// lineOf is the line of the key that holds n, or n's own line.
func (w *walker) lineOf(path *field.Path, n *tnode) int {
	if line, ok := w.lines[path.String()]; ok {
		return line
	}
	return n.line
}

// omit is what walk returns for a value that must be left out of the JSON:
// a null (unset) or a rejected value.
type omitted struct{}

var omit any = omitted{}

// walk returns a value json.Marshal turns into the JSON for n, or omit.
func (w *walker) walk(t reflect.Type, n *tnode, path *field.Path) any {
	if n.kind == kindNull {
		return omit
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && reflect.PointerTo(t).Implements(unmarshalerType) {
		return w.custom(t, n, path)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return w.walk(t.Elem(), n, path)
	case reflect.Interface:
		return toAny(n)
	case reflect.String:
		if n.kind != kindString {
			return w.mismatch(t, n, path)
		}
		return n.text
	case reflect.Bool:
		if n.kind != kindBool {
			return w.mismatch(t, n, path)
		}
		return n.text == "true"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != kindInt {
			return w.mismatch(t, n, path)
		}
		if _, err := strconv.ParseInt(n.text, 10, t.Bits()); err != nil {
			w.fail(w.lineOf(path, n), field.Invalid(path, display(n), fmt.Sprintf("out of range for a %d-bit integer", t.Bits())))
			return omit
		}
		return json.Number(n.text)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.kind != kindInt {
			return w.mismatch(t, n, path)
		}
		if _, err := strconv.ParseUint(n.text, 10, t.Bits()); err != nil {
			w.fail(w.lineOf(path, n), field.Invalid(path, display(n), fmt.Sprintf("must be a non-negative %d-bit integer", t.Bits())))
			return omit
		}
		return json.Number(n.text)
	case reflect.Float32, reflect.Float64:
		if n.kind != kindInt && n.kind != kindFloat {
			return w.mismatch(t, n, path)
		}
		if _, err := strconv.ParseFloat(n.text, t.Bits()); err != nil {
			w.fail(w.lineOf(path, n), field.Invalid(path, display(n), "number out of range"))
			return omit
		}
		return json.Number(n.text)
	case reflect.Slice:
		if n.kind != kindSeq {
			return w.mismatch(t, n, path)
		}
		out := make([]any, 0, len(n.items))
		for i, item := range n.items {
			p := path.Index(i)
			w.lines[p.String()] = item.line
			if v := w.walk(t.Elem(), item, p); v != omit {
				out = append(out, v)
			} else if item.kind == kindNull {
				out = append(out, nil)
			}
		}
		return out
	case reflect.Map:
		if n.kind != kindMap {
			return w.mismatch(t, n, path)
		}
		out := make(map[string]any, len(n.keys))
		w.eachKey(n, func(k tkey) *field.Path { return path.Key(k.name) }, func(k tkey, p *field.Path) {
			if v := w.walk(t.Elem(), k.val, p); v != omit {
				out[k.name] = v
			}
		})
		return out
	case reflect.Struct:
		if n.kind != kindMap {
			return w.mismatch(t, n, path)
		}
		fields := jsonFields(t)
		out := make(map[string]any, len(n.keys))
		w.eachKey(n, func(k tkey) *field.Path { return child(path, k.name) }, func(k tkey, p *field.Path) {
			ft, ok := fields[k.name]
			if !ok {
				w.fail(k.line, field.Forbidden(p, "unknown field"))
				return
			}
			if v := w.walk(ft, k.val, p); v != omit {
				out[k.name] = v
			}
		})
		return out
	default:
		w.fail(w.lineOf(path, n), field.InternalError(path, fmt.Errorf("unsupported field type %s", t)))
		return omit
	}
}

// eachKey records each key's line, reports duplicate keys and calls fn for
// the first occurrence of every key.
func (w *walker) eachKey(n *tnode, pathOf func(tkey) *field.Path, fn func(tkey, *field.Path)) {
	first := make(map[string]int, len(n.keys))
	for _, k := range n.keys {
		p := pathOf(k)
		if line, dup := first[k.name]; dup {
			w.fail(k.line, field.Forbidden(p, fmt.Sprintf("duplicate field, first set on line %d", line)))
			continue
		}
		first[k.name] = k.line
		w.lines[p.String()] = k.line
		fn(k, p)
	}
}

// child returns the path of a struct field; the root's fields have no
// parent segment.
func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// custom checks a value of a type that decodes itself by decoding it.
func (w *walker) custom(t reflect.Type, n *tnode, path *field.Path) any {
	raw, err := json.Marshal(toAny(n))
	if err != nil {
		w.fail(w.lineOf(path, n), field.Invalid(path, display(n), err.Error()))
		return omit
	}
	if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
		detail := err.Error()
		if want := unmarshalerKinds[t]; want != "" {
			detail = "must be " + want
		}
		w.fail(w.lineOf(path, n), field.Invalid(path, display(n), detail))
		return omit
	}
	return json.RawMessage(raw)
}

func (w *walker) mismatch(t reflect.Type, n *tnode, path *field.Path) any {
	w.fail(w.lineOf(path, n), field.TypeInvalid(path, display(n), fmt.Sprintf("must be %s, not %s", wantKind(t), n.kind)))
	return omit
}

func wantKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return kindString.String()
	case reflect.Bool:
		return kindBool.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kindInt.String()
	case reflect.Float32, reflect.Float64:
		return kindFloat.String()
	case reflect.Slice:
		return kindSeq.String()
	default:
		return kindMap.String()
	}
}

// display is the bad value shown in an error.
func display(n *tnode) any {
	switch n.kind {
	case kindString:
		return n.text
	case kindInt:
		if i, err := strconv.ParseInt(n.text, 10, 64); err == nil {
			return i
		}
		return n.text
	case kindFloat:
		if f, err := strconv.ParseFloat(n.text, 64); err == nil {
			return f
		}
		return n.text
	case kindBool:
		return n.text == "true"
	default:
		return field.OmitValueType{}
	}
}

// toAny converts a tree to plain JSON values; a repeated key keeps its last
// value.
func toAny(n *tnode) any {
	switch n.kind {
	case kindString:
		return n.text
	case kindInt, kindFloat:
		return json.Number(n.text)
	case kindBool:
		return n.text == "true"
	case kindMap:
		m := make(map[string]any, len(n.keys))
		for _, k := range n.keys {
			m[k.name] = toAny(k.val)
		}
		return m
	case kindSeq:
		s := make([]any, len(n.items))
		for i, item := range n.items {
			s[i] = toAny(item)
		}
		return s
	default:
		return nil
	}
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the JSON names of a struct's fields, with the fields of
// embedded structs promoted, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if cached, ok := fieldCache.Load(t); ok {
		return cached.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	collectFields(t, fields)
	fieldCache.Store(t, fields)
	return fields
}

func collectFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				collectFields(ft, into)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := into[name]; !taken {
			into[name] = f.Type
		}
	}
}

// decoded is a configuration file turned into a KubeletConfiguration.
type decoded struct {
	config *kubeletv1beta1.KubeletConfiguration
	// lines maps field paths (as field.Path renders them) to the line of
	// the file that set them.
	lines map[string]int
	// bad are the field paths whose values were rejected and left unset.
	bad []string
}

// covers reports whether a validation error at path is about a value the
// decoder already rejected.
func (d *decoded) covers(path string) bool {
	for _, b := range d.bad {
		if path == b || strings.HasPrefix(path, b+".") || strings.HasPrefix(path, b+"[") {
			return true
		}
	}
	return false
}

// decode strictly decodes a KubeletConfiguration file: YAML or JSON, the
// right apiVersion and kind, no unknown or duplicate fields, every value of
// the right type. Problems carry the field path and line but no file name.
// When the document parses, the result holds every value that was accepted
// (rejected ones are left unset) so the rest can still be validated; it is
// nil when the document does not parse.
func decode(data []byte) (*decoded, Errors) {
	root, lineErrs := parseDocument(data)
	var problems Errors
	for _, le := range lineErrs {
		problems = append(problems, &Problem{Line: le.line, Message: le.msg})
	}
	if len(problems) > 0 {
		return nil, problems
	}
	if root.kind != kindMap {
		return nil, Errors{{Line: root.line, Message: fmt.Sprintf("the file must hold a %s mapping, not %s", Kind, root.kind)}}
	}
	w := &walker{lines: map[string]int{}}
	doc := w.walk(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), root, nil)
	d := &decoded{lines: w.lines}
	for _, l := range w.errs {
		problems = append(problems, &Problem{Line: l.line, Field: l.err})
		d.bad = append(d.bad, l.err.Field)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, append(problems, &Problem{Message: fmt.Sprintf("encoding the configuration: %v", err)})
	}
	kc := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(raw, kc); err != nil {
		return nil, append(problems, &Problem{Message: fmt.Sprintf("decoding the configuration: %v", err)})
	}
	if kc.APIVersion != APIVersion && !d.covers("apiVersion") {
		problems = append(problems, typeMetaProblem(w.lines, "apiVersion", kc.APIVersion, APIVersion))
	}
	if kc.Kind != Kind && !d.covers("kind") {
		problems = append(problems, typeMetaProblem(w.lines, "kind", kc.Kind, Kind))
	}
	d.config = kc
	return d, problems
}

func typeMetaProblem(lines map[string]int, name, got, want string) *Problem {
	p := field.NewPath(name)
	if got == "" {
		return &Problem{Line: 1, Field: field.Required(p, fmt.Sprintf("must be %q", want))}
	}
	return &Problem{Line: lines[name], Field: field.NotSupported(p, got, []string{want})}
}
