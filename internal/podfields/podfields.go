// Package podfields is the table of every field of the pod API heartlet
// runs (k8s.io/api v0.37.2 core/v1: PodSpec, PodSecurityContext,
// Container, EphemeralContainer, SecurityContext, Lifecycle,
// LifecycleHandler and Probe), each marked as honoured, not yet honoured
// (the pod runs and an event names the field) or refused (running the pod
// without it would be unsafe, so the pod is rejected), and the check of a
// pod against it.
//
// A test walks the Go types and fails when a field of the API is missing
// from the table or an entry names a field that does not exist, so that
// no new field of the API is silently ignored.
package podfields

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Support is what heartlet does with a field.
type Support int

const (
	// Honoured: heartlet acts on the field as the upstream kubelet does
	// (which, for the fields only the control plane reads, is nothing).
	Honoured Support = iota
	// NotYet: heartlet does not act on the field yet; a pod that uses it
	// runs, with a Warning event naming the field.
	NotYet
	// Refused: running the pod without the field would be unsafe or
	// wrong in a way the user cannot see; a pod that uses it is rejected.
	Refused
)

func (s Support) String() string {
	switch s {
	case Honoured:
		return "honoured"
	case NotYet:
		return "not yet"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Support(%d)", int(s))
}

// Features are what the container runtime supports, as it reports them in
// its CRI status.
type Features struct {
	// SupplementalGroupsPolicy: the runtime applies
	// supplementalGroupsPolicy: Strict (CRI Features).
	SupplementalGroupsPolicy bool
	// RecursiveReadOnlyMounts: the default runtime handler makes
	// read-only mounts read-only recursively (CRI RuntimeHandlerFeatures).
	RecursiveReadOnlyMounts bool
	// UserNamespaces: the default runtime handler runs pods in user
	// namespaces (CRI RuntimeHandlerFeatures), for hostUsers: false.
	UserNamespaces bool
	// ImageVolumes: the runtime mounts OCI images as volumes (CRI
	// Mount.image); read from its name and version (ImageVolumesOf).
	ImageVolumes bool
}

// Field is one field of the pod API.
type Field struct {
	// Path is the field's JSON path, "[]" standing for every element of
	// a list, e.g. "spec.containers[].resizePolicy".
	Path    string
	Support Support
	// Note says what heartlet does, or why not.
	Note string
	// Used tells whether a value of the field (never a nil pointer, nor
	// a zero value) asks for what heartlet does not honour; nil: every
	// value that is not zero does. It lets the values the API server
	// defaults, and those heartlet does honour, pass.
	Used func(v reflect.Value, f Features) bool
}

// Finding is a field of a pod that heartlet does not honour.
type Finding struct {
	// Path is the field's path in the table.
	Path string
	// At names where in the pod: the path with list indices replaced by
	// the element's name where it has one, e.g.
	// "spec.containers[app].resizePolicy".
	At   string
	Note string
}

func (f Finding) String() string { return f.At + " (" + f.Note + ")" }

// Fields returns the table, sorted by path.
func Fields() []Field {
	out := append([]Field(nil), table...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Check returns the fields pod uses that heartlet refuses, and those it
// does not honour yet, each once per place in the pod, in table order.
func Check(pod *v1.Pod, feat Features) (refusals, warnings []Finding) {
	root := reflect.ValueOf(pod).Elem()
	for _, c := range checked() {
		visit(root, c.steps, nil, func(v reflect.Value, at []located) {
			if v.IsZero() || (c.f.Used != nil && !c.f.Used(v, feat)) {
				return
			}
			fd := Finding{Path: c.f.Path, At: c.where(at), Note: c.f.Note}
			if c.f.Support == Refused {
				refusals = append(refusals, fd)
			} else {
				warnings = append(warnings, fd)
			}
		})
	}
	return refusals, warnings
}

// Message lists findings for an event or a status message.
func Message(fs []Finding) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// located is the list element a value was found in, and its index.
type located struct {
	elem  reflect.Value
	index int
}

// step is one segment of a field's path, resolved in the Go types: the
// field's index (through inline structs) in its struct.
type step struct {
	name  string
	index []int
	list  bool
}

// checkedField is a field of the table that is not honoured, with its
// path resolved once, so that a pod's check does not read struct tags.
type checkedField struct {
	f     Field
	steps []step
}

// checked is the table's fields that are not honoured, in table order,
// each with its path resolved from v1.Pod; a path that names no field of
// the API (TestEveryEntryExists keeps there being none) matches
// nothing.
var checked = sync.OnceValue(func() []checkedField {
	var out []checkedField
	for _, f := range table {
		if f.Support == Honoured {
			continue
		}
		if steps, ok := resolveSteps(reflect.TypeFor[v1.Pod](), f.Path); ok {
			out = append(out, checkedField{f: f, steps: steps})
		}
	}
	return out
})

// resolveSteps resolves path from the struct type t; false when a
// segment names no field, or a list segment is not a list.
func resolveSteps(t reflect.Type, path string) ([]step, bool) {
	var steps []step
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[]")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		sf, ok := fieldByJSON(t, name)
		if !ok {
			return nil, false
		}
		t = sf.Type
		if list {
			if t.Kind() != reflect.Slice {
				return nil, false
			}
			t = t.Elem()
		}
		steps = append(steps, step{name: name, index: sf.Index, list: list})
	}
	return steps, true
}

// visit calls fn with each value at the path steps in v (a struct),
// following pointers (a nil pointer on the way yields nothing) and
// expanding lists; at holds the list elements on the way.
func visit(v reflect.Value, steps []step, at []located, fn func(reflect.Value, []located)) {
	if len(steps) == 0 {
		fn(v, at)
		return
	}
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	fv, err := v.FieldByIndexErr(steps[0].index)
	if err != nil {
		return
	}
	if !steps[0].list {
		visit(fv, steps[1:], at, fn)
		return
	}
	for i := 0; i < fv.Len(); i++ {
		visit(fv.Index(i), steps[1:], append(at, located{elem: fv.Index(i), index: i}), fn)
	}
}

// where is the path of a value found by visit through the list elements
// at, each list named by its element's name, e.g.
// "spec.containers[app].resizePolicy".
func (c checkedField) where(at []located) string {
	var b strings.Builder
	for _, st := range c.steps {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.name)
		if st.list {
			b.WriteString("[" + elemName(at[0].elem, at[0].index) + "]")
			at = at[1:]
		}
	}
	return b.String()
}

// elemName is a list element's name field, else its index.
func elemName(v reflect.Value, i int) string {
	if v.Kind() == reflect.Struct {
		if n := v.FieldByName("Name"); n.IsValid() && n.Kind() == reflect.String && n.String() != "" {
			return n.String()
		}
	}
	return strconv.Itoa(i)
}

// fieldByJSON finds a struct type's field by its JSON name, looking into
// embedded (inline) structs; the field's Index is its path from t.
func fieldByJSON(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "" && sf.Anonymous {
			if inner, ok := fieldByJSON(sf.Type, name); ok {
				inner.Index = append([]int{i}, inner.Index...)
				return inner, true
			}
			continue
		}
		if tag == name {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}
