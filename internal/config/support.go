package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Ignored is a configuration field heartlet does not act on (Fields says
// NotYet) set to a value other than its default.
type Ignored struct {
	// Path is the field's JSON path.
	Path string
	// Value is the effective value, as JSON without the quotes of a string.
	Value string
	// Flag is the command-line flag that set it ("" when the file did).
	Flag string
}

// IgnoredFields lists, in the order of Fields, the fields of kc that
// heartlet does not act on and whose value differs from the default: the
// value the field would take were it left unset, all else equal (so a
// default that follows another field, such as serializeImagePulls after
// maxParallelImagePulls, counts as a default). legacy says the defaults
// are those of a command line without --config (NewDefault). flags maps a
// field path to the flag that set it.
func IgnoredFields(kc *kubeletv1beta1.KubeletConfiguration, legacy bool, flags map[string]string) []Ignored {
	var out []Ignored
	for _, f := range Fields {
		if f.Support != NotYet {
			continue
		}
		l, ok := leafByPath()[f.Path]
		if !ok {
			continue // the table test reports it
		}
		v, ok := l.get(reflect.ValueOf(kc).Elem())
		if !ok {
			continue // under a nil pointer: unset
		}
		base := kc.DeepCopy()
		l.zero(reflect.ValueOf(base).Elem())
		SetDefaults(base)
		if legacy {
			applyLegacyDefaults(base)
		}
		d, _ := l.get(reflect.ValueOf(base).Elem())
		if sameValue(v, d) {
			continue
		}
		out = append(out, Ignored{Path: f.Path, Value: shorten(formatValue(v)), Flag: flags[f.Path]})
	}
	return out
}

// IgnoredMessage is the warning heartlet gives at start and heartlet
// validate prints: "these configuration fields are not acted on by
// heartlet and are ignored: " followed by IgnoredList. It is "" when
// nothing is ignored.
func IgnoredMessage(ignored []Ignored) string {
	if len(ignored) == 0 {
		return ""
	}
	return IgnoredMessagePrefix + IgnoredList(ignored)
}

// IgnoredMessagePrefix starts IgnoredMessage.
const IgnoredMessagePrefix = "these configuration fields are not acted on by heartlet and are ignored: "

// IgnoredList names each ignored field with its value (and the flag that
// set it), comma-separated: "podPidsLimit (=100), cpuCFSQuota (=false
// from --cpu-cfs-quota)".
func IgnoredList(ignored []Ignored) string {
	parts := make([]string, 0, len(ignored))
	for _, ig := range ignored {
		s := fmt.Sprintf("%s (=%s", ig.Path, ig.Value)
		if ig.Flag != "" {
			s += " from " + ig.Flag
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

// maxValueLen bounds a value in the warning.
const maxValueLen = 80

func formatValue(v reflect.Value) string {
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprint(v.Interface())
	}
	s := string(raw)
	var str string
	if json.Unmarshal(raw, &str) == nil {
		s = str
	}
	return s
}

func shorten(s string) string {
	if len(s) > maxValueLen {
		return s[:maxValueLen] + "..."
	}
	return s
}

// sameValue compares two values of a field: an empty list or map is the
// same as none, and a flush frequency is the same however it was written.
func sameValue(a, b reflect.Value) bool {
	a, b = deref(a), deref(b)
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	switch a.Kind() {
	case reflect.Slice, reflect.Map:
		if a.Len() == 0 && b.Len() == 0 {
			return true
		}
	}
	if x, ok := a.Interface().(logsapi.TimeOrMetaDuration); ok {
		return x.Duration == b.Interface().(logsapi.TimeOrMetaDuration).Duration
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func deref(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// leaf is a field of KubeletConfiguration as Fields names it: the struct
// field indices from the top, through pointers.
type leaf struct {
	path  string
	index []int
}

// get returns the field's value, false when a pointer on the way is nil.
func (l leaf) get(v reflect.Value) (reflect.Value, bool) {
	for _, i := range l.index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	return v, true
}

// zero unsets the field (a nil pointer on the way leaves it unset).
func (l leaf) zero(v reflect.Value) {
	if f, ok := l.get(v); ok {
		f.Set(reflect.Zero(f.Type()))
	}
}

// ConfigurationFieldPaths lists the JSON path of every field of the
// upstream KubeletConfiguration as Fields must classify them: nested
// structs (also behind pointers) are broken down, embedded structs are
// inlined, and a type with its own JSON form (a duration, a quantity), a
// list or a map is one field.
func ConfigurationFieldPaths() []string {
	leaves := walkLeaves(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), "", nil)
	paths := make([]string, len(leaves))
	for i, l := range leaves {
		paths[i] = l.path
	}
	return paths
}

// leafByPath maps each path of ConfigurationFieldPaths to its field.
var leafByPath = sync.OnceValue(func() map[string]leaf {
	m := map[string]leaf{}
	for _, l := range walkLeaves(reflect.TypeFor[kubeletv1beta1.KubeletConfiguration](), "", nil) {
		m[l.path] = l
	}
	return m
})

var marshalerType = reflect.TypeFor[json.Marshaler]()

func walkLeaves(t reflect.Type, prefix string, index []int) []leaf {
	var out []leaf
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		idx := append(append([]int(nil), index...), i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, walkLeaves(ft, prefix, idx)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		if ft.Kind() == reflect.Struct && !ft.Implements(marshalerType) && !reflect.PointerTo(ft).Implements(marshalerType) {
			out = append(out, walkLeaves(ft, path+".", idx)...)
			continue
		}
		out = append(out, leaf{path: path, index: idx})
	}
	return out
}
