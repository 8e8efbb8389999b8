package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/heartlet/heartlet/"

const (
	agentPkg      = "internal/agent"
	serverPkg     = "internal/server"
	podsyncPkg    = "internal/podsync"
	kubeclientPkg = "internal/kubeclient"
)

// kubeclientImporters are the packages besides the agent and the commands
// that may import internal/kubeclient, each with its reason.
var kubeclientImporters = map[string]string{
	// heartlet doctor checks the connection to the API server itself
	// (kubeconfig, credentials, the node's objects): the client is what it
	// examines, not a way to reach a domain's data.
	"internal/doctor": "checks the API server connection that kubeclient makes",
	// Certificate rotation builds a new client from each certificate it
	// gets, with kubeclient's constructor.
	"internal/certificate": "builds a client from each rotated certificate",
}

// deciders are the packages that decide through interfaces they declare:
// each may not import the packages that do the work it drives, with the
// reason.
var deciders = map[string]struct {
	forbidden []string
	reason    string
}{
	"internal/podlifecycle": {
		forbidden: []string{"internal/podsync", "internal/volume", "internal/cgroups", "internal/pleg", "internal/status", "internal/probe", "internal/podstartup"},
		reason:    "the pod lifecycle decides on the interfaces of its types.go, not on the packages that do the work",
	},
	"internal/podresources": {
		forbidden: []string{"internal/podsync", "internal/podlifecycle", "internal/volume", "internal/cgroups", "internal/runtime"},
		reason:    "the resource handlers run through interfaces the package declares, not on the packages that hold the resources or use them",
	},
	"internal/containergc": {
		forbidden: []string{"internal/podsync", "internal/podlifecycle", "internal/podworker", "internal/podconfig", "internal/eviction"},
		reason:    "container garbage collection decides on the interfaces of its types.go, not on the packages that hold the pods",
	},
	"internal/eviction": {
		forbidden: []string{"internal/podsync", "internal/stats", "internal/status", "internal/runtime", "internal/nodestatus", "internal/podlifecycle"},
		reason:    "eviction decides on interfaces, not on the packages that measure, report or act",
	},
}

// graph maps a package (path relative to the module) to the packages of
// the module it imports directly.
type graph map[string][]string

// loadGraph reads the module's import graph, every build tag the
// repository uses included, test files left out.
func loadGraph(t *testing.T) graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "e2e,integration", "-json=ImportPath,Imports", "github.com/heartlet/heartlet/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	g, err := parseGoList(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(g) == 0 {
		t.Fatal("go list found no packages")
	}
	return g
}

// parseGoList turns the JSON stream of `go list -json` into a graph of
// the module's packages.
func parseGoList(r io.Reader) (graph, error) {
	g := graph{}
	dec := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		var to []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				to = append(to, rel)
			}
		}
		g[from] = to
	}
}

// within reports whether pkg is root or below it.
func within(pkg, root string) bool {
	return pkg == root || strings.HasPrefix(pkg, root+"/")
}

// path returns a chain of imports from `from` to a package within `to`,
// or nil when there is none.
func (g graph) path(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != from && within(p, to) {
			var chain []string
			for q := p; q != ""; q = prev[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range g[p] {
			if _, seen := prev[next]; !seen {
				prev[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// violations lists every arrow of g that runs the wrong way, one line
// each naming the edge and the rule, sorted.
func violations(g graph) []string {
	var out []string
	for from, imports := range g {
		for _, to := range imports {
			switch {
			case within(to, agentPkg) && !within(from, agentPkg) && !within(from, "cmd"):
				out = append(out, fmt.Sprintf("%s -> %s: only the commands may import the agent, which only wires", from, to))
			case within(to, kubeclientPkg) && !within(from, kubeclientPkg) && !within(from, agentPkg) && !within(from, "cmd") && kubeclientImporters[from] == "":
				out = append(out, fmt.Sprintf("%s -> %s: a domain package reaches the API server through an interface it declares, not through kubeclient", from, to))
			case slices.ContainsFunc(deciders[from].forbidden, func(f string) bool { return within(to, f) }):
				out = append(out, fmt.Sprintf("%s -> %s: %s", from, to, deciders[from].reason))
			}
		}
		if within(from, serverPkg) {
			if chain := g.path(from, podsyncPkg); chain != nil {
				out = append(out, fmt.Sprintf("%s: the server depends on function types only, never on podsync", strings.Join(chain, " -> ")))
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestImportGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the whole module")
	}
	g := loadGraph(t)
	for _, p := range []string{agentPkg, serverPkg, podsyncPkg, kubeclientPkg} {
		if _, ok := g[p]; !ok {
			t.Fatalf("go list did not report %s; the rules would check nothing", p)
		}
	}
	for _, v := range violations(g) {
		t.Error(v)
	}
	for p := range deciders {
		if _, ok := g[p]; !ok {
			t.Errorf("go list did not report %s, which has rules of its own; update deciders", p)
		}
	}
	for p := range kubeclientImporters {
		if !slices.Contains(g[p], kubeclientPkg) {
			t.Errorf("%s is listed as allowed to import %s but no longer does; remove the exception", p, kubeclientPkg)
		}
	}
}

// heavyInBinary are packages heartlet's binary must not link, with the
// reason; a prefix ending in "/" covers the packages below it.
var heavyInBinary = map[string]string{
	"k8s.io/client-go/kubernetes":                 "client-go's clientset registers every API group's types in one scheme (with their apply configurations and discovery, about a quarter of the binary and of its resident memory); internal/kubeapi holds the groups heartlet calls",
	"k8s.io/client-go/kubernetes/":                "any typed client imports the all-groups scheme",
	"k8s.io/client-go/informers/":                 "the generated informers import the clientset",
	"k8s.io/client-go/tools/events":               "imports the all-groups scheme",
	"k8s.io/client-go/util/certificate/":          "imports the clientset",
	"k8s.io/client-go/tools/record":               "its event correlator builds a strategic merge patch; internal/kubeclient records heartlet's events itself",
	"k8s.io/apimachinery/pkg/util/strategicpatch": "links kube-openapi's models and gnostic's protobuf descriptors (about 36 packages of resident memory); internal/mergepatch and kubeclient's recorder build heartlet's patches by hand",
	"k8s.io/cri-client/":                          "instruments its gRPC connection with OpenTelemetry (otelgrpc, the otel API, semantic conventions); internal/criclient is heartlet's CRI client",
	"go.opentelemetry.io/contrib/":                "tracing instrumentation heartlet does not use",
}

// isHeavy reports the reason p must not be linked, if it must not.
func isHeavy(p string) (string, bool) {
	for heavy, reason := range heavyInBinary {
		if p == heavy || (strings.HasSuffix(heavy, "/") && strings.HasPrefix(p, heavy)) {
			return reason, true
		}
	}
	return "", false
}

// TestBinaryDependencies checks that cmd/heartlet links none of
// heavyInBinary, naming the chain that brings one in.
func TestBinaryDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the binary's dependencies")
	}
	root := module + "cmd/heartlet"
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		from, to, _ := strings.Cut(strings.TrimSpace(line), ": ")
		imports[from] = strings.Fields(to)
	}
	if len(imports) < 100 {
		t.Fatalf("go list reported %d packages for cmd/heartlet; the check would see nothing", len(imports))
	}
	// Breadth-first from the command, remembering who first imported each
	// package.
	importer := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := importer[q]; !seen {
				importer[q] = p
				queue = append(queue, q)
			}
		}
	}
	for p := range importer {
		if reason, heavy := isHeavy(p); heavy {
			chain := []string{p}
			for cur := importer[p]; cur != ""; cur = importer[cur] {
				chain = append(chain, cur)
			}
			t.Errorf("cmd/heartlet links %s (%s): %s", p, reason, strings.Join(chain, " <- "))
		}
	}
}

func TestViolations(t *testing.T) {
	tests := []struct {
		name string
		g    graph
		want []string
	}{
		{
			name: "the current shape",
			g: graph{
				"cmd/heartlet":     {"internal/agent", "internal/doctor"},
				"internal/agent":   {"internal/kubeclient", "internal/podsync", "internal/server"},
				"internal/doctor":  {"internal/kubeclient"},
				"internal/podsync": {"internal/runtime"},
				"internal/server":  {"internal/metrics"},
			},
		},
		{
			name: "a domain package imports the agent",
			g:    graph{"internal/podsync": {"internal/agent"}, "internal/agent": nil},
			want: []string{"internal/podsync -> internal/agent: only the commands may import the agent, which only wires"},
		},
		{
			name: "the server reaches podsync through another package",
			g: graph{
				"internal/server/auth": {"internal/status"},
				"internal/status":      {"internal/podsync"},
				"internal/podsync":     nil,
			},
			want: []string{"internal/server/auth -> internal/status -> internal/podsync: the server depends on function types only, never on podsync"},
		},
		{
			name: "a deciding package imports what it drives",
			g:    graph{"internal/eviction": {"internal/podworker", "internal/stats"}, "internal/stats": nil, "internal/podworker": nil},
			want: []string{"internal/eviction -> internal/stats: " + deciders["internal/eviction"].reason},
		},
		{
			name: "a domain package imports kubeclient",
			g:    graph{"internal/nodestatus": {"internal/kubeclient"}, "internal/kubeclient": nil},
			want: []string{"internal/nodestatus -> internal/kubeclient: a domain package reaches the API server through an interface it declares, not through kubeclient"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := violations(tc.g); !slices.Equal(got, tc.want) {
				t.Errorf("violations =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestParseGoList(t *testing.T) {
	in := `{"ImportPath": "github.com/heartlet/heartlet/internal/a", "Imports": ["fmt", "github.com/heartlet/heartlet/internal/b"]}
{"ImportPath": "k8s.io/x", "Imports": ["github.com/heartlet/heartlet/internal/a"]}
{"ImportPath": "github.com/heartlet/heartlet/internal/b"}`
	g, err := parseGoList(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 2 || !slices.Equal(g["internal/a"], []string{"internal/b"}) || g["internal/b"] != nil {
		t.Errorf("graph = %v", g)
	}
	if _, err := parseGoList(strings.NewReader("{")); err == nil {
		t.Error("truncated input parsed without error")
	}
}
