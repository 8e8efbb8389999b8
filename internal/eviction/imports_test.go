package eviction

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package decides on interfaces: it must not depend on the packages
// that do the work (stats, the status cache, the runtime), nor on the wiring.
func TestImports(t *testing.T) {
	forbidden := []string{"agent", "podsync", "stats", "status", "runtime", "kubeclient", "nodestatus", "podlifecycle"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, pkg := range forbidden {
				if path == "github.com/heartlet/heartlet/internal/"+pkg {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
	}
}
