package mergepatch

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// fuzzKinds are the object types the fuzz target diffs. The environment
// variable MERGEPATCH_FUZZ_TYPE (pod, node or pvc) pins one of them, so
// that each can be fuzzed for a set time.
var fuzzKinds = []struct {
	name string
	new  func() any
	// dataStruct is what the caller passes (a value or a pointer).
	dataStruct any
}{
	{"pod", func() any { return &v1.Pod{} }, v1.Pod{}},
	{"node", func() any { return &v1.Node{} }, v1.Node{}},
	{"pvc", func() any { return &v1.PersistentVolumeClaim{} }, &v1.PersistentVolumeClaim{}},
}

// smallStrings are the strings of generated objects: few, so that merge
// keys of different elements meet (and repeat).
var smallStrings = []string{"a", "b", "c", "Ready", "10.0.0.1", ""}

var smallQuantities = []string{"0", "1", "100m", "1Gi", "2"}

// filler fills objects from seed with values drawn from small sets.
func filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.4).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse(smallQuantities[c.Intn(len(smallQuantities))])
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.NewTime(time.Unix(int64(1+c.Intn(3))*3600, 0).UTC())
		},
		func(tm *metav1.MicroTime, c randfill.Continue) {
			*tm = metav1.NewMicroTime(time.Unix(int64(1+c.Intn(3))*3600, 0).UTC())
		},
		func(f *metav1.FieldsV1, c randfill.Continue) {
			f.SetRawString(`{"f:a":{}}`)
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(int32(c.Intn(3)))
			} else {
				*v = intstr.FromString(smallStrings[c.Intn(len(smallStrings))])
			}
		},
	)
}

// opaque are the types whose values shrink leaves alone (their custom
// fill functions made valid ones).
var opaque = map[reflect.Type]bool{
	reflect.TypeFor[resource.Quantity]():  true,
	reflect.TypeFor[metav1.Time]():        true,
	reflect.TypeFor[metav1.MicroTime]():   true,
	reflect.TypeFor[metav1.FieldsV1]():    true,
	reflect.TypeFor[intstr.IntOrString](): true,
}

// shrink replaces the strings and numbers in v by small ones.
func shrink(v reflect.Value, r *rand.Rand) {
	if opaque[v.Type()] {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			shrink(v.Elem(), r)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				shrink(v.Field(i), r)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			shrink(v.Index(i), r)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		m := reflect.MakeMap(v.Type())
		iter := v.MapRange()
		var keys []reflect.Value
		for iter.Next() {
			keys = append(keys, iter.Key())
		}
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			return bytesCompare(a.String(), b.String())
		})
		for _, k := range keys {
			nk := reflect.New(k.Type()).Elem()
			nk.Set(k)
			shrink(nk, r)
			nv := reflect.New(v.Type().Elem()).Elem()
			nv.Set(v.MapIndex(k))
			shrink(nv, r)
			m.SetMapIndex(nk, nv)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(smallStrings[r.Intn(len(smallStrings))])
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Intn(3)))
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(r.Intn(3)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(r.Intn(3)) / 2)
	}
}

func bytesCompare(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) }

// generate returns a random object of kind k from seed, as JSON.
func generate(t testing.TB, k int, seed int64) []byte {
	obj := fuzzKinds[k].new()
	filler(seed).Fill(obj)
	shrink(reflect.ValueOf(obj), rand.New(rand.NewSource(seed)))
	return mustJSON(t, obj)
}

// retype decodes data into kind k and encodes it again, as the callers'
// objects are; ok is false when data does not decode.
func retype(k int, data []byte) ([]byte, bool) {
	obj := fuzzKinds[k].new()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, false
	}
	out, err := json.Marshal(obj)
	return out, err == nil
}

// byteSource hands out the fuzz bytes, then zeros.
type byteSource struct{ b []byte }

func (s *byteSource) next() int {
	if len(s.b) == 0 {
		return 0
	}
	v := s.b[0]
	s.b = s.b[1:]
	return int(v)
}

// mutator changes a decoded JSON tree in place of one of its nodes,
// chosen by number in a walk of sorted keys, with an operation taken
// from the bytes; donor is another tree of the same type whose values
// may be copied in at the same path.
type mutator struct {
	src    *byteSource
	donor  any
	target int
}

func (m *mutator) walk(node any, path []any) any {
	if m.target < 0 {
		return node
	}
	if m.target == 0 {
		m.target--
		return m.apply(node, path)
	}
	m.target--
	switch n := node.(type) {
	case map[string]any:
		keys := sortedKeys(n)
		for _, k := range keys {
			n[k] = m.walk(n[k], append(slices.Clip(path), k))
		}
	case []any:
		for i := range n {
			n[i] = m.walk(n[i], append(slices.Clip(path), i))
		}
	}
	return node
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lookup returns the node of tree at path.
func lookup(tree any, path []any) (any, bool) {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := tree.(map[string]any)
			if !ok {
				return nil, false
			}
			if tree, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := tree.([]any)
			if !ok || k >= len(l) {
				return nil, false
			}
			tree = l[k]
		}
	}
	return tree, true
}

func deepCopy(v any) any {
	switch n := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(n))
		for k, e := range n {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(n))
		for i, e := range n {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

func (m *mutator) apply(node any, path []any) any {
	op := m.src.next()
	if op%8 == 7 {
		// Take the donor's value at the same path, or null.
		if d, ok := lookup(m.donor, path); ok {
			return deepCopy(d)
		}
		return nil
	}
	switch n := node.(type) {
	case map[string]any:
		keys := sortedKeys(n)
		donor, _ := lookup(m.donor, path)
		dm, _ := donor.(map[string]any)
		switch {
		case op%8 < 3 && len(keys) > 0:
			delete(n, keys[m.src.next()%len(keys)])
		case op%8 < 5 && len(dm) > 0:
			dk := sortedKeys(dm)
			k := dk[m.src.next()%len(dk)]
			n[k] = deepCopy(dm[k])
		case len(keys) > 0:
			n[keys[m.src.next()%len(keys)]] = nil
		}
		return n
	case []any:
		if len(n) == 0 {
			if d, ok := lookup(m.donor, path); ok {
				return deepCopy(d)
			}
			return n
		}
		i, j := m.src.next()%len(n), m.src.next()%len(n)
		switch op % 8 {
		case 0, 1:
			return slices.Delete(n, i, i+1)
		case 2:
			n[i], n[j] = n[j], n[i]
			return n
		case 3:
			return slices.Insert(n, j, deepCopy(n[i]))
		case 4:
			slices.Reverse(n)
			return n
		case 5:
			if d, ok := lookup(m.donor, append(slices.Clip(path), 0)); ok {
				return slices.Insert(n, j, deepCopy(d))
			}
			return n
		default:
			return []any{}
		}
	case string:
		return smallStrings[op%len(smallStrings)]
	case json.Number:
		return json.Number([]string{"0", "1", "2", "1.5", "-1"}[op%5])
	case bool:
		return !n
	case nil:
		return nil
	}
	return node
}

func decodeTree(t testing.TB, data []byte) any {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func countNodes(v any) int {
	n := 1
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			n += countNodes(e)
		}
	case []any:
		for _, e := range t {
			n += countNodes(e)
		}
	}
	return n
}

// FuzzCreateTwoWayMergePatch diffs random related Pods, Nodes and
// PersistentVolumeClaims and wants strategicpatch's patch (or an error
// where strategicpatch fails or panics). An object is filled from seed;
// its relative is a copy changed at nodes the fuzz bytes choose (keys
// and elements deleted, reordered, duplicated, taken from a second
// random object, scalars changed), both as raw JSON and decoded into the
// Go type and encoded again.
func FuzzCreateTwoWayMergePatch(f *testing.F) {
	for i := range fuzzKinds {
		f.Add(uint8(i), int64(1), []byte{0, 10, 0})
		f.Add(uint8(i), int64(2), []byte{3, 40, 3, 1, 2})
		f.Add(uint8(i), int64(3), []byte{7, 7, 200, 7, 5, 4, 3})
		f.Add(uint8(i), int64(4), []byte{})
	}
	pinned := -1
	if name := os.Getenv("MERGEPATCH_FUZZ_TYPE"); name != "" {
		for i, k := range fuzzKinds {
			if k.name == name {
				pinned = i
			}
		}
		if pinned < 0 {
			f.Fatalf("MERGEPATCH_FUZZ_TYPE=%s: want pod, node or pvc", name)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, seed int64, ops []byte) {
		k := int(kind) % len(fuzzKinds)
		if pinned >= 0 {
			k = pinned
		}
		fuzzOne(t, k, seed, ops)
	})
}

// fuzzOne is one run of the fuzz target on an object of fuzzKinds[k].
func fuzzOne(t *testing.T, k int, seed int64, ops []byte) {
	ds := fuzzKinds[k].dataStruct
	a := generate(t, k, seed)
	c := generate(t, k, seed^0x5eed)

	src := &byteSource{b: ops}
	tree := decodeTree(t, a)
	donor := decodeTree(t, c)
	steps := 1 + src.next()%4
	for range steps {
		m := &mutator{src: src, donor: donor, target: (src.next()<<8 | src.next()) % countNodes(tree)}
		tree = m.walk(tree, nil)
	}
	raw, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	if _, isObject := tree.(map[string]any); isObject {
		comparePatch(t, a, raw, ds)
		comparePatch(t, raw, a, ds)
	}
	if b, ok := retype(k, raw); ok {
		comparePatch(t, a, b, ds)
		comparePatch(t, b, a, ds)
	}
	comparePatch(t, a, c, ds)
}
