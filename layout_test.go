package qshare_test

import (
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
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		from := module
		if dir := filepath.ToSlash(filepath.Dir(p)); dir != "." {
			from += "/" + dir
		}
		if harness(from) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			to, _ := strconv.Unquote(imp.Path.Value)
			if harness(to) && !allowed(from, to) {
				t.Errorf("%s: product package %s imports harness package %s", p, from, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d product files; is the test running at the module root?", checked)
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
