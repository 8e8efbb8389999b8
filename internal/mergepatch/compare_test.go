package mergepatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// upstream runs strategicpatch.CreateTwoWayMergePatch, turning a panic
// into panicked.
func upstream(original, modified []byte, dataStruct any) (patch []byte, panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			patch, panicked, err = nil, r, nil
		}
	}()
	patch, err = strategicpatch.CreateTwoWayMergePatch(original, modified, dataStruct)
	return patch, nil, err
}

// comparePatch fails t unless this package's patch from original to
// modified is the one strategicpatch makes, or both fail (this package
// returns an error where strategicpatch panics). It returns the patch
// when both made one.
func comparePatch(t testing.TB, original, modified []byte, dataStruct any) []byte {
	t.Helper()
	want, panicked, wantErr := upstream(original, modified, dataStruct)
	got, err := CreateTwoWayMergePatch(original, modified, dataStruct)
	switch {
	case panicked != nil:
		if err == nil {
			t.Fatalf("strategicpatch panics (%v) but the patch is %s\noriginal: %s\nmodified: %s", panicked, got, original, modified)
		}
		return nil
	case wantErr != nil:
		if err == nil {
			t.Fatalf("strategicpatch fails (%v) but the patch is %s\noriginal: %s\nmodified: %s", wantErr, got, original, modified)
		}
		return nil
	case err != nil:
		t.Fatalf("error %v; strategicpatch's patch is %s\noriginal: %s\nmodified: %s", err, want, original, modified)
	}
	if !bytes.Equal(got, want) && !jsonEqual(got, want) {
		t.Fatalf("patch differs\n got: %s\nwant: %s\noriginal: %s\nmodified: %s", got, want, original, modified)
	}
	return got
}

// checkApplies fails t unless applying patch to original with
// strategicpatch gives modified.
func checkApplies(t testing.TB, original, modified, patch []byte, dataStruct any) {
	t.Helper()
	out, err := strategicpatch.StrategicMergePatch(original, patch, dataStruct)
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	if !jsonEqual(retyped(t, out, dataStruct), retyped(t, modified, dataStruct)) {
		t.Fatalf("applying %s\n  to: %s\nmade: %s\nwant: %s", patch, original, out, modified)
	}
}

// retyped is data decoded into dataStruct's type and encoded again: the
// object the API server would store (a patch removes null fields that the
// encoding of an object has).
func retyped(t testing.TB, data []byte, dataStruct any) []byte {
	t.Helper()
	typ := reflect.TypeOf(dataStruct)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	v := reflect.New(typ).Interface()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return mustJSON(t, v)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(fmt.Errorf("encoding %T: %w", v, err))
	}
	return b
}
