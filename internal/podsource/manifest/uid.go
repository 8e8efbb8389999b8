package manifest

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heartlet/heartlet/internal/podconfig"
)

// UID returns the UID the upstream kubelet gives a static pod that has
// none in its manifest. pod must be decoded and defaulted (SetDefaults) but
// not yet given its static identity.
//
// Upstream (pkg/kubelet/config, applyDefaults) hashes with 128-bit FNV-1a
// the text k8s.io/utils/dump.ForHash makes of the pod in the API server's
// internal form (go-spew's "%#v" with sorted map keys, no methods, no
// pointer addresses), followed by "host:<node>file:<path>" for a file or
// "url:<url>" for a URL. The internal form has the same fields in the same
// order as v1.Pod, an empty TypeMeta and the types of k8s.io/api/core/v1
// named "core.<Type>", so the same text is written here from the v1 pod.
// testdata/upstream-uids.txt holds UIDs computed by the upstream code; the
// tests check this function against them.
func UID(pod *v1.Pod, o Options) types.UID {
	return uidOf(pod, o, metav1.TypeMeta{})
}

// uidOf is UID with the TypeMeta upstream's internal pod has: see parse.
func uidOf(pod *v1.Pod, o Options, tm metav1.TypeMeta) types.UID {
	cp := *pod
	cp.TypeMeta = tm
	var b bytes.Buffer
	d := hashDumper{w: &b}
	d.format(reflect.ValueOf(&cp))
	h := fnv.New128a()
	h.Write(b.Bytes())
	if o.Source == podconfig.SourceHTTP {
		fmt.Fprintf(h, "url:%s", o.Origin)
	} else {
		fmt.Fprintf(h, "host:%s", o.NodeName)
		fmt.Fprintf(h, "file:%s", o.Origin)
	}
	return types.UID(hex.EncodeToString(h.Sum(nil)))
}

// corePkg is the package whose types upstream's internal form names
// "core.<Type>".
var corePkg = reflect.TypeOf(v1.Pod{}).PkgPath()

// hashDumper writes a value as go-spew's formatter does for "%#v" with
// SortKeys, SpewKeys, DisableMethods and DisablePointerAddresses, the
// configuration of k8s.io/utils/dump.ForHash, including its quirk of
// carrying the "omit the next type" state across a nil element.
type hashDumper struct {
	w              *bytes.Buffer
	ignoreNextType bool
}

// typeName is reflect's name of t with core/v1 types named as upstream's
// internal ones.
func typeName(t reflect.Type) string {
	if t.Name() != "" {
		if t.PkgPath() == corePkg {
			return "core." + t.Name()
		}
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Array:
		return "[" + strconv.Itoa(t.Len()) + "]" + typeName(t.Elem())
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	}
	return t.String()
}

func unpack(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Interface && !v.IsNil() {
		return v.Elem()
	}
	return v
}

func (d *hashDumper) format(v reflect.Value) {
	if !v.IsValid() {
		d.w.WriteString("<invalid>")
		return
	}
	if v.Kind() == reflect.Pointer {
		d.formatPtr(v)
		return
	}
	if !d.ignoreNextType {
		d.w.WriteString("(" + typeName(v.Type()) + ")")
	}
	d.ignoreNextType = false
	switch v.Kind() {
	case reflect.Bool:
		d.w.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.w.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.w.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32:
		d.w.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 32))
	case reflect.Float64:
		d.w.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.String:
		d.w.WriteString(v.String())
	case reflect.Slice:
		if v.IsNil() {
			d.w.WriteString("<nil>")
			return
		}
		d.list(v)
	case reflect.Array:
		d.list(v)
	case reflect.Interface:
		if v.IsNil() {
			d.w.WriteString("<nil>")
		}
	case reflect.Map:
		if v.IsNil() {
			d.w.WriteString("<nil>")
			return
		}
		d.w.WriteString("map[")
		keys := v.MapKeys()
		sortKeys(keys)
		for i, k := range keys {
			if i > 0 {
				d.w.WriteByte(' ')
			}
			d.ignoreNextType = true
			d.format(unpack(k))
			d.w.WriteByte(':')
			d.ignoreNextType = true
			d.format(unpack(v.MapIndex(k)))
		}
		d.w.WriteByte(']')
	case reflect.Struct:
		d.w.WriteByte('{')
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if i > 0 {
				d.w.WriteByte(' ')
			}
			d.w.WriteString(t.Field(i).Name)
			d.w.WriteByte(':')
			d.format(unpack(v.Field(i)))
		}
		d.w.WriteByte('}')
	default:
		// Channels, functions, complex numbers and unsafe pointers do not
		// occur in a Pod.
		fmt.Fprintf(d.w, "<%s>", v.Kind())
	}
}

func (d *hashDumper) list(v reflect.Value) {
	d.w.WriteByte('[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			d.w.WriteByte(' ')
		}
		d.ignoreNextType = true
		d.format(unpack(v.Index(i)))
	}
	d.w.WriteByte(']')
}

func (d *hashDumper) formatPtr(v reflect.Value) {
	if v.IsNil() && d.ignoreNextType {
		d.w.WriteString("<nil>")
		return
	}
	indirects, nilFound := 0, false
	ve := v
	for ve.Kind() == reflect.Pointer {
		if ve.IsNil() {
			nilFound = true
			break
		}
		indirects++
		ve = ve.Elem()
		if ve.Kind() == reflect.Interface {
			if ve.IsNil() {
				nilFound = true
				break
			}
			ve = ve.Elem()
		}
	}
	if !d.ignoreNextType {
		d.w.WriteString("(" + strings.Repeat("*", indirects) + typeName(ve.Type()) + ")")
	} else {
		if nilFound {
			indirects += strings.Count(ve.Type().String(), "*")
		}
		d.w.WriteString("<" + strings.Repeat("*", indirects) + ">")
	}
	if nilFound {
		d.w.WriteString("<nil>")
		return
	}
	d.ignoreNextType = true
	d.format(ve)
}

// sortKeys orders map keys as go-spew does for the kinds it sorts simply;
// a Pod's maps all have string keys.
func sortKeys(keys []reflect.Value) {
	if len(keys) == 0 {
		return
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch a.Kind() {
		case reflect.String:
			return a.String() < b.String()
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return a.Int() < b.Int()
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return a.Uint() < b.Uint()
		case reflect.Bool:
			return !a.Bool() && b.Bool()
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
}
