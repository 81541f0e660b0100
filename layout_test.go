package qshare_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// module is the module path of go.mod.
const module = "qshare"

// harness reports whether the package with import path p is a harness, not
// product: anything under internal/ (the benchmark, soak, server-process,
// transcript and batch-client harnesses), anything under test/ (the system
// tests), and the conformance suites, each named after the package whose
// contract it tests with "test" added, beside it (store/storetest,
// executor/executortest, executor/gpu/gputest), or in shortNamed.
func harness(p string) bool {
	rel, ok := strings.CutPrefix(p, module+"/")
	if !ok {
		return false
	}
	if strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "test/") {
		return true
	}
	if shortNamed[rel] {
		return true
	}
	dir, base := path.Split(rel)
	return dir != "" && base == path.Base(strings.TrimSuffix(dir, "/"))+"test"
}

// shortNamed are the harnesses beside a package that are named after a
// short name of what it runs on rather than the package's own name.
var shortNamed = map[string]bool{
	"executor/kubernetes/kubetest": true, // the test control plane and played kubelet of executor/kubernetes
}

// allowed reports whether product package from may import harness package
// to. One exception to "never": the binary, cmd/qshare, may import
// internal/, which exists for qshare's own commands (bench, bench soak, the
// demo's private server and transcript, the client commands' batch
// client); it may not import test/ or a suite.
func allowed(from, to string) bool {
	return from == module+"/cmd/qshare" && strings.HasPrefix(to, module+"/internal/")
}

// TestProductImportsNoHarness fails when a product package imports a
// harness package (see harness) in a file that is part of its build, that
// is any .go file but its _test.go files, whatever its build constraints.
// Tests may use harnesses; the product may not, so that what ships holds
// no benchmark, fault injection or test suite. It parses import clauses
// only, so it is fast and needs no build.
func TestProductImportsNoHarness(t *testing.T) {
	checked := 0
	eachGoFile(t, false, func(p, from string, f *ast.File) {
		if harness(from) {
			return
		}
		checked++
		for _, imp := range f.Imports {
			to, _ := strconv.Unquote(imp.Path.Value)
			if harness(to) && !allowed(from, to) {
				t.Errorf("%s: product package %s imports harness package %s", p, from, to)
			}
		}
	})
	if checked < 50 {
		t.Fatalf("checked only %d product files; is the test running at the module root?", checked)
	}
}

// wholeAPI are client-go's packages that import (and, at every start,
// register) every API group that Kubernetes serves: the clientset, its
// scheme and typed clients, the informer factory, listers, apply
// configurations, discovery, and the generated clients' generic client.
// qshare calls a few resources of core/v1 (batch/v1, apps/v1 and rbac/v1
// in its benchmark and tests), through executor/kubernetes/kubeclient.
var wholeAPI = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/listers",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/gentype", // imports client-go's fakes, and 84 packages with them
}

// TestNoWholeKubernetesAPI fails when any file, tests included, imports
// one of wholeAPI: together they cost every qshare start (each job's
// supervisor among them) 1.25 MB of allocation and a third of its page
// faults, and each go test ./... on a fresh cache the vet and compilation
// of some 125 packages.
func TestNoWholeKubernetesAPI(t *testing.T) {
	eachGoFile(t, true, func(p, _ string, f *ast.File) {
		for _, imp := range f.Imports {
			to, _ := strconv.Unquote(imp.Path.Value)
			for _, w := range wholeAPI {
				if to == w || strings.HasPrefix(to, w+"/") {
					t.Errorf("%s imports %s: use qshare/executor/kubernetes/kubeclient's typed clients instead", p, to)
				}
			}
		}
	})
}

// eachGoFile calls fn with the path, import path and import clauses of
// every .go file of the module (its _test.go files too where tests is
// set), whatever its build constraints. It parses import clauses only, so
// it is fast and needs no build.
func eachGoFile(t *testing.T, tests bool, fn func(p, importPath string, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if p != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || (!tests && strings.HasSuffix(name, "_test.go")) {
			return nil
		}
		from := module
		if dir := filepath.ToSlash(filepath.Dir(p)); dir != "." {
			from += "/" + dir
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		fn(p, from, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHarnessRule pins the rule itself, so that a change to harness or
// allowed that would let every import through fails here.
func TestHarnessRule(t *testing.T) {
	for p, want := range map[string]bool{
		"qshare":                             false,
		"qshare/engine":                      false,
		"qshare/cmd/qshare":                  false,
		"qshare/store":                       false,
		"qshare/internal/bench":              true,
		"qshare/internal/bench/slurm":        true,
		"qshare/test/e2e":                    true,
		"qshare/store/storetest":             true,
		"qshare/executor/executortest":       true,
		"qshare/executor/gpu/gputest":        true,
		"qshare/web/latest":                  false,
		"qshare/test":                        false,
		"github.com/stretchr/testify/assert": false,
	} {
		if got := harness(p); got != want {
			t.Errorf("harness(%q) = %v, want %v", p, got, want)
		}
	}
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{"qshare/cmd/qshare", "qshare/internal/bench", true},
		{"qshare/cmd/qshare", "qshare/test/e2e", false},
		{"qshare/cmd/qshare", "qshare/store/storetest", false},
		{"qshare/daemon", "qshare/internal/serveproc", false},
		{"qshare/sqlite", "qshare/store/storetest", false},
	} {
		if got := allowed(c.from, c.to); got != c.want {
			t.Errorf("allowed(%q, %q) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// serverSide are the names of net/http and net that only code answering
// requests uses: a handler, a mux, a server, a listener.
var serverSide = map[string]map[string]bool{
	"net/http": {"Handler": true, "HandlerFunc": true, "ResponseWriter": true, "ServeMux": true, "NewServeMux": true,
		"Server": true, "Serve": true, "ServeTLS": true, "ListenAndServe": true, "ListenAndServeTLS": true, "Handle": true, "HandleFunc": true},
	"net": {"Listen": true, "ListenTCP": true, "ListenUnix": true},
}

// serverOnly are the packages that the server assembles and that the
// binary therefore never needs to import itself.
var serverOnly = map[string]bool{
	module + "/daemon": true, module + "/api": true, "net/http/httputil": true,
}

// TestCommandIsThin keeps cmd/qshare what the README says it is: flag
// wiring, with each command calling a package. The server's assembly
// (routes, guard, leader and standby, TLS) once grew to 1,500 lines there,
// where no package's tests could reach it and each new AWS service would
// have added more; it lives in package server. So cmd/qshare's own files
// may use net/http as a client (the log and plan commands do) but name no
// handler, mux, server or listener, and import neither the daemon nor the
// API's handlers, which only the server wires. A command that must answer
// HTTP belongs in a package of its own, with its own tests.
func TestCommandIsThin(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("cmd", "qshare", "*.go"))
	if err != nil || len(files) < 10 {
		t.Fatalf("cmd/qshare has %d files (%v); is the test running at the module root?", len(files), err)
	}
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if serverOnly[ip] {
				t.Errorf("%s imports %s: only package server wires it", p, ip)
			}
			local := path.Base(ip)
			if imp.Name != nil {
				local = imp.Name.Name
			}
			names[local] = ip
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && serverSide[names[id.Name]][sel.Sel.Name] {
				t.Errorf("%s uses %s.%s: code that answers requests belongs in package server (or a service's package), not in the binary", p, id.Name, sel.Sel.Name)
			}
			return true
		})
	}
}
