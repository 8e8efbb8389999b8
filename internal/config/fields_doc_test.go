package config

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

var update = flag.Bool("update", false, "rewrite the generated field table of docs/configuration.md")

const (
	docPath     = "../../docs/configuration.md"
	beginFields = "<!-- BEGIN FIELDS -->\n"
	endFields   = "<!-- END FIELDS -->\n"
)

// fieldsMarkdown renders Fields as the table docs/configuration.md holds,
// with each field's default for a configuration file.
func fieldsMarkdown() string {
	defaults := &kubeletv1beta1.KubeletConfiguration{}
	SetDefaults(defaults)
	root := reflect.ValueOf(defaults).Elem()
	count := map[Support]int{}
	var b strings.Builder
	for _, f := range Fields {
		count[f.Support]++
	}
	fmt.Fprintf(&b, "<!-- Generated from internal/config/fields.go by `go test ./internal/config -run TestFieldsDoc -update`; edit the table there. -->\n\n")
	fmt.Fprintf(&b, "%d fields: %d honoured, %d not yet, %d no-op.\n\n", len(Fields), count[Honoured], count[NotYet], count[NoOp])
	b.WriteString("| field | default | heartlet | note |\n|---|---|---|---|\n")
	for _, f := range Fields {
		def := ""
		if l, ok := leafByPath()[f.Path]; ok {
			if v, ok := l.get(root); ok && !unset(deref(v)) {
				def = "`" + formatValue(v) + "`"
			}
		}
		switch f.Path {
		case "apiVersion":
			def = "`" + APIVersion + "`"
		case "kind":
			def = "`" + Kind + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Path, cell(def), f.Support, cell(f.Note))
	}
	return b.String()
}

// unset: a nil pointer, an empty string, list or map.
func unset(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return false
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// docs/configuration.md holds the table Fields generates, between the
// BEGIN FIELDS and END FIELDS markers; -update rewrites it.
func TestFieldsDoc(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(doc, []byte(beginFields))
	end := bytes.Index(doc, []byte(endFields))
	if start < 0 || end < start {
		t.Fatalf("%s has no %q ... %q section", docPath, strings.TrimSpace(beginFields), strings.TrimSpace(endFields))
	}
	start += len(beginFields)
	want := fieldsMarkdown()
	if string(doc[start:end]) == want {
		return
	}
	if !*update {
		t.Fatalf("%s is stale: the field table differs from internal/config/fields.go; run go test ./internal/config -run TestFieldsDoc -update", docPath)
	}
	out := append(append(append([]byte{}, doc[:start]...), want...), doc[end:]...)
	if err := os.WriteFile(docPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
