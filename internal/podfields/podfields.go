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
	"strings"

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
	for _, f := range table {
		if f.Support == Honoured {
			continue
		}
		for _, at := range lookup(root, f.Path) {
			if at.v.IsZero() {
				continue
			}
			if f.Used != nil && !f.Used(at.v, feat) {
				continue
			}
			fd := Finding{Path: f.Path, At: at.path, Note: f.Note}
			if f.Support == Refused {
				refusals = append(refusals, fd)
			} else {
				warnings = append(warnings, fd)
			}
		}
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

// located is a value found at a path, and where.
type located struct {
	v    reflect.Value
	path string
}

// lookup returns the values at path in v (a struct), following pointers
// (a nil pointer on the way yields nothing) and expanding lists.
func lookup(v reflect.Value, path string) []located {
	cur := []located{{v: v}}
	for _, seg := range strings.Split(path, ".") {
		list := strings.HasSuffix(seg, "[]")
		name := strings.TrimSuffix(seg, "[]")
		var next []located
		for _, l := range cur {
			sv := l.v
			for sv.Kind() == reflect.Pointer {
				if sv.IsNil() {
					sv = reflect.Value{}
					break
				}
				sv = sv.Elem()
			}
			if !sv.IsValid() || sv.Kind() != reflect.Struct {
				continue
			}
			fv, ok := fieldByJSON(sv, name)
			if !ok {
				continue
			}
			p := name
			if l.path != "" {
				p = l.path + "." + name
			}
			if !list {
				next = append(next, located{v: fv, path: p})
				continue
			}
			for i := 0; i < fv.Len(); i++ {
				next = append(next, located{v: fv.Index(i), path: p + "[" + elemName(fv.Index(i), i) + "]"})
			}
		}
		cur = next
	}
	return cur
}

// elemName is a list element's name field, else its index.
func elemName(v reflect.Value, i int) string {
	if v.Kind() == reflect.Struct {
		if n, ok := fieldByJSON(v, "name"); ok && n.Kind() == reflect.String && n.String() != "" {
			return n.String()
		}
	}
	return fmt.Sprint(i)
}

// fieldByJSON finds a struct field by its JSON name, looking into
// embedded (inline) structs.
func fieldByJSON(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == "" && sf.Anonymous {
			if fv, ok := fieldByJSON(v.Field(i), name); ok {
				return fv, true
			}
			continue
		}
		if tag == name {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}
