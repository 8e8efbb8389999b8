package mergepatch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// The patch metadata of a field is read from its Go struct tags, looked up
// by the JSON name of the field the way the API machinery's forked
// encoding/json does it (which differs from today's encoding/json in two
// points kept here: unexported embedded structs are not explored, and a
// JSON key that matches no field exactly matches the first field whose
// name equals it case-insensitively).
const (
	tagStrategy = "patchStrategy"
	tagMergeKey = "patchMergeKey"
)

// schema is the Go type a JSON value is diffed against. Its type may be a
// pointer, a struct, a slice element or anything a field has.
type schema struct {
	t reflect.Type
}

// fieldMeta is what a struct field says about patching it.
type fieldMeta struct {
	strategies []string
	mergeKey   string
}

// jsonField is one field of a struct as JSON sees it, embedded structs
// flattened.
type jsonField struct {
	name   string
	tagged bool  // name comes from the json tag
	index  []int // path of field indexes from the outer struct
	// typ is the declared type of the field (a pointer is not followed).
	typ  reflect.Type
	meta fieldMeta
	// viaPointer is set when the path goes through an embedded pointer.
	viaPointer bool
}

// structFields is the cached field table of one struct type.
type structFields struct {
	list   []jsonField // in index order
	byName map[string]int
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f, _ := fieldCache.LoadOrStore(t, buildFields(t))
	return f.(*structFields)
}

// find returns the field the JSON key names: the field of that exact name,
// else the first field (in declaration order) whose name matches it
// ignoring case.
func (s *structFields) find(key string) *jsonField {
	if i, ok := s.byName[key]; ok {
		return &s.list[i]
	}
	for i := range s.list {
		if strings.EqualFold(s.list[i].name, key) {
			return &s.list[i]
		}
	}
	return nil
}

// buildFields collects the JSON fields of struct type t, breadth first
// through embedded structs, and keeps for each name the field that Go's
// embedding rules (with json tags winning ties) make visible.
func buildFields(t reflect.Type) *structFields {
	type pending struct {
		typ        reflect.Type
		index      []int
		viaPointer bool
	}
	var found []jsonField
	seen := map[reflect.Type]bool{}
	level := []pending{{typ: t}}
	levelCount := map[reflect.Type]int{}
	for len(level) > 0 {
		var next []pending
		nextCount := map[reflect.Type]int{}
		for _, p := range level {
			if seen[p.typ] {
				continue
			}
			seen[p.typ] = true
			for i := 0; i < p.typ.NumField(); i++ {
				sf := p.typ.Field(i)
				if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(p.index), i)
				ft := sf.Type
				ptr := false
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
					ptr = true
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					nextCount[ft]++
					if nextCount[ft] == 1 {
						next = append(next, pending{typ: ft, index: index, viaPointer: p.viaPointer || ptr})
					}
					continue
				}
				f := jsonField{
					name:       name,
					tagged:     name != "",
					index:      index,
					typ:        sf.Type,
					viaPointer: p.viaPointer,
					meta: fieldMeta{
						strategies: strings.Split(sf.Tag.Get(tagStrategy), ","),
						mergeKey:   sf.Tag.Get(tagMergeKey),
					},
				}
				if f.name == "" {
					f.name = sf.Name
				}
				found = append(found, f)
				if levelCount[p.typ] > 1 {
					// The struct is embedded twice at this depth: a
					// second copy makes its fields cancel out below.
					found = append(found, f)
				}
			}
		}
		level, levelCount = next, nextCount
	}

	groups := map[string][]jsonField{}
	for _, f := range found {
		groups[f.name] = append(groups[f.name], f)
	}
	out := &structFields{byName: map[string]int{}}
	for _, g := range groups {
		if f, ok := dominant(g); ok {
			out.list = append(out.list, f)
		}
	}
	slices.SortFunc(out.list, func(a, b jsonField) int { return slices.Compare(a.index, b.index) })
	for i, f := range out.list {
		out.byName[f.name] = i
	}
	return out
}

// dominant picks, among fields of the same name, the one that is visible:
// the shallowest, and among the shallowest the only tagged one or the only
// one at all. ok is false when the name is ambiguous.
func dominant(fields []jsonField) (jsonField, bool) {
	depth := len(fields[0].index)
	for _, f := range fields {
		depth = min(depth, len(f.index))
	}
	var shallow, tagged []jsonField
	for _, f := range fields {
		if len(f.index) != depth {
			continue
		}
		shallow = append(shallow, f)
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	switch {
	case len(tagged) == 1:
		return tagged[0], true
	case len(tagged) > 1:
		return jsonField{}, false
	case len(shallow) == 1:
		return shallow[0], true
	}
	return jsonField{}, false
}

// validTagName reports whether a json tag's name is usable as a key (the
// same rule as encoding/json's).
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if strings.ContainsRune("!#$%&()*+-./:<=>?@[]^_{|}~ ", c) {
			continue
		}
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) {
			return false
		}
	}
	return true
}

// field returns the schema and patch metadata of the field that JSON key
// names in the struct s describes.
func (s schema) field(key string) (schema, fieldMeta, error) {
	t := s.t
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return schema{}, fieldMeta{}, fmt.Errorf("merging an object in json but data type is not struct, instead is: %s", t.Kind())
	}
	f := fieldsOf(t).find(key)
	if f == nil {
		return schema{}, fieldMeta{}, fmt.Errorf("unable to find api field in struct %s for the json field %q", t.Name(), key)
	}
	if f.viaPointer {
		return schema{}, fieldMeta{}, fmt.Errorf("field %q of struct %s is promoted through an embedded pointer, which is not supported", key, t.Name())
	}
	return schema{t: f.typ}, f.meta, nil
}

// listField returns the schema of the elements of the list field that JSON
// key names, and the field's patch metadata.
func (s schema) listField(key string) (schema, fieldMeta, error) {
	sub, meta, err := s.field(key)
	if err != nil {
		return schema{}, fieldMeta{}, err
	}
	t := sub.t
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		if e.Kind() == reflect.Slice || e.Kind() == reflect.Array {
			return schema{}, fieldMeta{}, fmt.Errorf("field %q: unexpected slice of slice", key)
		}
		return schema{t: e}, meta, nil
	case reflect.Pointer:
		t = t.Elem()
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		return schema{t: t}, meta, nil
	}
	return schema{}, fieldMeta{}, fmt.Errorf("field %q: expected slice or array type, but got: %s", key, t.Kind())
}

// strategy splits a field's patch strategies into whether it retains keys
// and the one other strategy ("merge", "replace" or none).
func (m fieldMeta) strategy() (retainKeys bool, other string, err error) {
	switch len(m.strategies) {
	case 0:
		return false, "", nil
	case 1:
		if m.strategies[0] == strategyRetainKeys {
			return true, "", nil
		}
		return false, m.strategies[0], nil
	case 2:
		switch {
		case m.strategies[0] == strategyRetainKeys:
			return true, m.strategies[1], nil
		case m.strategies[1] == strategyRetainKeys:
			return true, m.strategies[0], nil
		}
	}
	return false, "", fmt.Errorf("unexpected patch strategy: %v", m.strategies)
}
