package podresources

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The package runs handlers through interfaces it declares: it must not
// depend on the packages that hold the resources, nor on their users.
func TestImports(t *testing.T) {
	forbidden := []string{"agent", "podsync", "podlifecycle", "volume", "cgroups", "runtime", "kubeclient"}
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
