// Package mergepatch computes two-way strategic merge patches: the patch
// that turns one JSON encoding of a Kubernetes object into another, with
// lists merged by key where the Go type's struct tags say so
// (patchStrategy, patchMergeKey). The patches are the ones
// k8s.io/apimachinery's strategicpatch.CreateTwoWayMergePatch makes, key
// for key, without linking that package (and the OpenAPI packages behind
// it).
//
// What a patch holds:
//   - objects: changed values (recursively), added keys, removed keys as
//     null; an empty diff is {};
//   - lists without the merge strategy: the whole new list when it
//     differs;
//   - lists of objects with the merge strategy: the changed elements as
//     diffs carrying the merge key, added elements whole, removed elements
//     as {"$patch": "delete", <key>: <value>}, and the new order as
//     "$setElementOrder/<field>";
//   - lists of scalars with the merge strategy: the added values,
//     "$deleteFromPrimitiveList/<field>" and "$setElementOrder/<field>";
//   - objects under a retainKeys strategy (a pod's volumes): the
//     "$retainKeys" list of the keys the new object keeps.
//
// Where the strategicpatch package would panic (a list whose first
// element is null, or merge keys that are objects or lists compared with
// each other) this package returns an error.
package mergepatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"

	kjson "k8s.io/apimachinery/pkg/util/json"
)

const (
	keyDirective          = "$patch"
	directiveDelete       = "delete"
	directiveReplace      = "replace"
	strategyMerge         = "merge"
	strategyRetainKeys    = "retainKeys"
	keyRetainKeys         = "$retainKeys"
	prefixDeleteFromList  = "$deleteFromPrimitiveList/"
	prefixSetElementOrder = "$setElementOrder/"
)

// ErrBadJSONDoc is returned when original or modified is not a JSON object.
var ErrBadJSONDoc = errors.New("invalid JSON document")

// errListOfLists is returned for a merged list whose elements are lists.
var errListOfLists = errors.New("lists of lists are not supported")

type object = map[string]any

// CreateTwoWayMergePatch returns the strategic merge patch that turns the
// JSON object original into the JSON object modified. dataStruct is a
// value of (or pointer to) the Go struct type both encode; its struct
// tags tell how lists are merged. An empty original or modified stands for
// {}. It is safe for concurrent use.
func CreateTwoWayMergePatch(original, modified []byte, dataStruct any) ([]byte, error) {
	if dataStruct == nil {
		return nil, errors.New("expected a struct, but received a nil")
	}
	t := reflect.TypeOf(dataStruct)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("expected a struct, but received a %s", t.Kind())
	}
	orig, err := decodeObject(original)
	if err != nil {
		return nil, err
	}
	mod, err := decodeObject(modified)
	if err != nil {
		return nil, err
	}
	patch, err := diffObjects(orig, mod, schema{t: t}, false)
	if err != nil {
		return nil, err
	}
	return json.Marshal(patch)
}

// decodeObject decodes a JSON object the way the API machinery does:
// integers as int64, other numbers as float64.
func decodeObject(data []byte) (object, error) {
	m := object{}
	if len(data) == 0 {
		return m, nil
	}
	if err := kjson.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadJSONDoc, err)
	}
	return m, nil
}

// diffObjects returns the patch from orig to mod, objects of the type of
// s. retain adds the $retainKeys directive.
func diffObjects(orig, mod object, s schema, retain bool) (object, error) {
	patch := object{}
	var kept []string
	for key, mv := range mod {
		if retain && mv != nil {
			kept = append(kept, key)
		}
		ov, ok := orig[key]
		if !ok {
			patch[key] = mv
			continue
		}
		if key == keyDirective {
			os, ok1 := ov.(string)
			ms, ok2 := mv.(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("invalid value for special key: %s", keyDirective)
			}
			if os != ms {
				patch[key] = mv
			}
			continue
		}
		if reflect.TypeOf(ov) != reflect.TypeOf(mv) {
			patch[key] = mv
			continue
		}
		var err error
		switch ov := ov.(type) {
		case object:
			err = diffField(key, ov, mv.(object), s, patch)
		case []any:
			err = diffListField(key, ov, mv.([]any), s, patch)
		default:
			if !reflect.DeepEqual(ov, mv) {
				patch[key] = mv
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for key := range orig {
		if _, ok := mod[key]; !ok {
			patch[key] = nil
		}
	}
	if len(kept) > 0 && len(patch) > 0 {
		// Keys removed from mod are nulls in patch, so a non-empty
		// patch is the only case needing the directive.
		slices.Sort(kept)
		list := make([]any, len(kept))
		for i, k := range kept {
			list[i] = k
		}
		patch[keyRetainKeys] = list
	}
	return patch, nil
}

// diffField puts into patch the diff of the object-valued field key.
func diffField(key string, ov, mv object, s schema, patch object) error {
	sub, meta, err := s.field(key)
	if err != nil {
		if reflect.DeepEqual(ov, mv) {
			return nil
		}
		return err
	}
	retain, strategy, err := meta.strategy()
	if err != nil {
		return err
	}
	if strategy == directiveReplace {
		patch[key] = mv
		return nil
	}
	p, err := diffObjects(ov, mv, sub, retain)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		patch[key] = p
	}
	return nil
}

// diffListField puts into patch the diff of the list-valued field key and
// its directives.
func diffListField(key string, ov, mv []any, s schema, patch object) error {
	sub, meta, err := s.listField(key)
	if err != nil {
		if reflect.DeepEqual(ov, mv) {
			return nil
		}
		return err
	}
	retain, strategy, err := meta.strategy()
	if err != nil {
		return err
	}
	if strategy != strategyMerge {
		if !reflect.DeepEqual(ov, mv) {
			patch[key] = mv
		}
		return nil
	}
	changes, deletions, order, err := diffLists(ov, mv, sub, meta.mergeKey, retain)
	if err != nil {
		return err
	}
	if len(changes) > 0 {
		patch[key] = changes
	}
	if len(deletions) > 0 {
		patch[prefixDeleteFromList+key] = deletions
	}
	if len(order) > 0 {
		patch[prefixSetElementOrder+key] = order
	}
	return nil
}

// diffLists diffs two lists with the merge strategy. For lists of objects
// it returns the changes followed by the delete directives, and the new
// order of the merge keys; for lists of scalars the added values, the
// deleted ones and the new list as its order. It sorts orig in place when
// it holds scalars (the order check below compares the sorted list, as the
// patches this package reproduces do).
func diffLists(orig, mod []any, s schema, mergeKey string, retain bool) (changes, deletions, order []any, err error) {
	if len(orig) == 0 {
		if len(mod) == 0 {
			return nil, nil, nil, nil
		}
		return mod, nil, nil, nil
	}
	kind, err := elementKind(orig, mod)
	if err != nil {
		return nil, nil, nil, err
	}
	if kind == reflect.Map {
		return diffObjectLists(orig, mod, s, mergeKey, retain)
	}
	changes, deletions = diffScalarLists(orig, mod)
	changes, err = orderLike(changes, mod, "", false)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(deletions) > 0 || !reflect.DeepEqual(orig, mod) {
		order = mod
	}
	return changes, deletions, order, nil
}

// elementKind returns the kind of the elements of the lists, which must
// all have the same type and not be lists.
func elementKind(lists ...[]any) (reflect.Kind, error) {
	var first reflect.Type
	started := false
	for _, l := range lists {
		for _, v := range l {
			t := reflect.TypeOf(v)
			if !started {
				if t == nil {
					return 0, errors.New("a list with the merge strategy starts with null")
				}
				if t.Kind() == reflect.Slice {
					return 0, errListOfLists
				}
				first, started = t, true
				continue
			}
			if t != first {
				return 0, fmt.Errorf("list element types are not identical: %v", lists)
			}
		}
	}
	if !started {
		return 0, errors.New("no elements in any of the given slices")
	}
	return first.Kind(), nil
}

// diffObjectLists diffs two non-empty lists of objects merged on mergeKey.
func diffObjectLists(orig, mod []any, s schema, mergeKey string, retain bool) (changes, deletions, order []any, err error) {
	changes, deletions, err = pairObjects(orig, mod, s, mergeKey, retain)
	if err != nil {
		return nil, nil, nil, err
	}
	changes, err = orderLike(changes, mod, mergeKey, true)
	if err != nil {
		return nil, nil, nil, err
	}
	same, err := sameKeyOrder(orig, mod, mergeKey)
	if err != nil {
		return nil, nil, nil, err
	}
	changes = append(changes, deletions...)
	if len(changes) > 0 || !same {
		order = make([]any, len(mod))
		for i, v := range mod {
			order[i] = object{mergeKey: v.(object)[mergeKey]}
		}
	}
	return changes, nil, order, nil
}

// pairObjects walks the two lists sorted by the text of their merge keys
// and returns the diffs of the elements in both, the elements only in mod,
// and delete directives for the elements only in orig.
func pairObjects(orig, mod []any, s schema, mergeKey string, retain bool) (changes, deletions []any, err error) {
	os, err := sortedByKey(orig, mergeKey)
	if err != nil {
		return nil, nil, err
	}
	ms, err := sortedByKey(mod, mergeKey)
	if err != nil {
		return nil, nil, err
	}
	changes = make([]any, 0, len(mod))
	deletions = make([]any, 0, len(orig))
	i, j := 0, 0
	for i < len(os) || j < len(ms) {
		var oe, me object
		var ok, mk any
		var okText, mkText string
		if i < len(os) {
			if oe, ok, err = keyed(os[i].elem, mergeKey); err != nil {
				return nil, nil, err
			}
			okText = os[i].text
		}
		if j < len(ms) {
			if me, mk, err = keyed(ms[j].elem, mergeKey); err != nil {
				return nil, nil, err
			}
			mkText = ms[j].text
		}
		switch {
		case i < len(os) && j < len(ms) && okText == mkText:
			p, err := diffObjects(oe, me, s, retain)
			if err != nil {
				return nil, nil, err
			}
			if len(p) > 0 {
				p[mergeKey] = mk
				changes = append(changes, p)
			}
			i++
			j++
		case i >= len(os) || (j < len(ms) && okText > mkText):
			changes = append(changes, me)
			j++
		default:
			deletions = append(deletions, object{mergeKey: ok, keyDirective: directiveDelete})
			i++
		}
	}
	return changes, deletions, nil
}

// keyed returns element v as an object and its merge key's value.
func keyed(v any, mergeKey string) (object, any, error) {
	m, ok := v.(object)
	if !ok {
		return nil, nil, fmt.Errorf("expected a map[string]interface {}, but received a %T", v)
	}
	k, ok := m[mergeKey]
	if !ok {
		return nil, nil, fmt.Errorf("map: %v does not contain declared merge key: %s", m, mergeKey)
	}
	return m, k, nil
}

// textItem is a list element with the text its order is taken from.
type textItem struct {
	elem any
	text string
}

// byText orders textItems by text, with a comparison that also holds for
// equal texts, as the patches reproduced here were ordered: elements with
// equal keys end up in the order that sort.Sort gives such a comparison,
// which decides how duplicates are paired.
type byText []textItem

func (b byText) Len() int           { return len(b) }
func (b byText) Less(i, j int) bool { return b[i].text <= b[j].text }
func (b byText) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }

// sortedByKey returns a sorted copy of a list of objects, ordered by the
// text of their merge key values.
func sortedByKey(l []any, mergeKey string) ([]textItem, error) {
	if len(l) == 0 {
		return nil, nil
	}
	if _, err := elementKind(l); err != nil {
		return nil, err
	}
	items := make([]textItem, len(l))
	for i, v := range l {
		var k any
		if m, ok := v.(object); ok {
			k = m[mergeKey]
		}
		items[i] = textItem{elem: v, text: fmt.Sprintf("%v", k)}
	}
	sort.Sort(byText(items))
	return items, nil
}

// sortScalars sorts l in place by the text of its values.
func sortScalars(l []any) {
	items := make([]textItem, len(l))
	for i, v := range l {
		items[i] = textItem{elem: v, text: fmt.Sprintf("%v", v)}
	}
	sort.Sort(byText(items))
	for i, it := range items {
		l[i] = it.elem
	}
}

// diffScalarLists returns the values added to and deleted from orig to
// make mod, compared by their text; orig is sorted in place.
func diffScalarLists(orig, mod []any) (added, deleted []any) {
	ms := slices.Clone(mod)
	sortScalars(orig)
	sortScalars(ms)
	added, deleted = []any{}, []any{}
	i, j := 0, 0
	for i < len(orig) || j < len(ms) {
		var ot, mt string
		if i < len(orig) {
			ot = fmt.Sprintf("%v", orig[i])
		}
		if j < len(ms) {
			mt = fmt.Sprintf("%v", ms[j])
		}
		switch {
		case i < len(orig) && j < len(ms) && ot == mt:
			i++
			j++
		case i >= len(orig) || (j < len(ms) && ot > mt):
			added = append(added, ms[j])
			j++
		default:
			deleted = append(deleted, orig[i])
			i++
		}
	}
	return added, dropDuplicates(deleted)
}

// dropDuplicates removes repeated values from l, each time moving the last
// element into the place of the repeat, so that the survivors keep the
// order the deletion directive of the reproduced patches has.
func dropDuplicates(l []any) []any {
	n := len(l)
	for i := 0; i < n-1; i++ {
		for j := i + 1; j < n; {
			if l[i] == l[j] {
				n--
				l[j] = l[n]
				continue
			}
			j++
		}
	}
	return l[:n]
}

// orderLike sorts list (stably) by the position of its elements in
// order, elements compared by their merge key when objects is set and by
// value otherwise; for objects, delete directives go last.
func orderLike(list, order []any, mergeKey string, objects bool) ([]any, error) {
	var deletes []any
	if objects {
		for _, l := range [][]any{list, order} {
			for _, v := range l {
				if _, _, err := keyed(v, mergeKey); err != nil {
					return nil, err
				}
			}
		}
		kept := list[:0:0]
		for _, v := range list {
			if v.(object)[keyDirective] == directiveDelete {
				deletes = append(deletes, v)
			} else {
				kept = append(kept, v)
			}
		}
		list = kept
	}
	value := func(v any) any {
		if objects {
			m, _ := v.(object)
			return m[mergeKey]
		}
		return v
	}
	type positioned struct {
		elem any
		pos  int
	}
	items := make([]positioned, len(list))
	for i, v := range list {
		items[i] = positioned{elem: v, pos: -1}
		if len(list) < 2 {
			// Nothing to sort: positions are not compared.
			break
		}
		for k, o := range order {
			eq, err := comparableEqual(value(v), value(o))
			if err != nil {
				return nil, err
			}
			if eq {
				items[i].pos = k
				break
			}
		}
	}
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].pos >= 0 && items[b].pos >= 0 {
			return items[a].pos < items[b].pos
		}
		return true
	})
	out := make([]any, 0, len(list)+len(deletes))
	for _, it := range items {
		out = append(out, it.elem)
	}
	return append(out, deletes...), nil
}

// sameKeyOrder reports whether the two lists of objects have the same
// merge key values in the same order.
func sameKeyOrder(orig, mod []any, mergeKey string) (bool, error) {
	if len(orig) != len(mod) {
		return false, nil
	}
	for i := range mod {
		if mergeKey == "" {
			// Without a merge key the elements themselves are compared.
			eq, err := comparableEqual(orig[i], mod[i])
			if err != nil || !eq {
				return false, err
			}
			continue
		}
		_, ok, err := keyed(orig[i], mergeKey)
		if err != nil {
			return false, err
		}
		_, mk, err := keyed(mod[i], mergeKey)
		if err != nil {
			return false, err
		}
		eq, err := comparableEqual(ok, mk)
		if err != nil || !eq {
			return false, err
		}
	}
	return true, nil
}

// comparableEqual is a == b for decoded JSON values, an error where that
// comparison would panic (two objects or two lists).
func comparableEqual(a, b any) (bool, error) {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false, nil
	}
	if ta != nil && !ta.Comparable() {
		return false, fmt.Errorf("merge key values of type %s cannot be compared", ta)
	}
	return a == b, nil
}
