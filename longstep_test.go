package qshare_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestLongScenariosRunInCI: every test that skips itself unless
// QSHARE_LONG=1 is set (a call of longtest.Only in the test, or in a
// function of its package that it calls, however deep) is run by a step
// of .ci/run that sets it: the README's command leaves it out, so that
// step is the only place it runs. A test moved out of the README's
// command without a line in .ci/run's long step would run nowhere.
func TestLongScenariosRunInCI(t *testing.T) {
	steps := longSteps(t)
	long := map[string][]string{} // package directory -> its long tests
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		names, err := longTestsIn(p)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			long[filepath.ToSlash(p)] = names
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(long) == 0 {
		t.Fatal("no test calls longtest.Only: this check finds nothing, so it is broken")
	}
	n := 0
	for _, names := range long {
		n += len(names)
	}
	t.Logf("%d long tests in %d packages", n, len(long))
	for dir, names := range long {
		runs, ok := steps[dir]
		if !ok {
			t.Errorf("./%s: %s call longtest.Only, but no step of .ci/run with QSHARE_LONG=1 tests the package", dir, strings.Join(names, ", "))
			continue
		}
		for _, name := range names {
			if !anyMatch(runs, name) {
				t.Errorf("./%s: %s calls longtest.Only, but no -run of .ci/run's steps with QSHARE_LONG=1 for the package names it", dir, name)
			}
		}
	}
}

// longSteps reads the lines of .ci/run that run go test with QSHARE_LONG=1
// and returns, for each package directory they name, the patterns of
// their -run flags' top-level part (a nil pattern: the whole package).
func longSteps(t *testing.T) map[string][]*regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string][]*regexp.Regexp{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "QSHARE_LONG=1 ") || !strings.Contains(line, " go test ") {
			continue
		}
		var run *regexp.Regexp
		var dirs []string
		f := strings.Fields(line)
		for i := 0; i < len(f); i++ {
			switch {
			case f[i] == "-run" && i+1 < len(f):
				i++
				top, _, _ := strings.Cut(strings.Trim(f[i], "'\""), "/")
				if run, err = regexp.Compile(top); err != nil {
					t.Fatalf(".ci/run: %q: %v", line, err)
				}
			case strings.HasPrefix(f[i], "./"):
				dirs = append(dirs, strings.TrimPrefix(f[i], "./"))
			}
		}
		for _, d := range dirs {
			steps[d] = append(steps[d], run)
		}
	}
	if len(steps) == 0 {
		t.Fatal(".ci/run has no step with QSHARE_LONG=1: this check reads it wrong")
	}
	return steps
}

func anyMatch(runs []*regexp.Regexp, name string) bool {
	for _, r := range runs {
		if r == nil || r.MatchString(name) {
			return true
		}
	}
	return false
}

// longTestsIn returns the top-level tests of the package in dir (its test
// files, both packages) that reach a call of longtest.Only.
func longTestsIn(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		return nil, err
	}
	fset := token.NewFileSet()
	calls := map[string]map[string]bool{} // function -> the package's functions it calls
	direct := map[string]bool{}           // functions that call longtest.Only themselves
	var tests []string
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Recv != nil {
				continue
			}
			name := fn.Name.Name
			if strings.HasPrefix(name, "Test") && name != "TestMain" {
				tests = append(tests, name)
			}
			if calls[name] == nil {
				calls[name] = map[string]bool{}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fun := c.Fun.(type) {
				case *ast.Ident:
					calls[name][fun.Name] = true
				case *ast.SelectorExpr:
					if x, ok := fun.X.(*ast.Ident); ok && x.Name == "longtest" && fun.Sel.Name == "Only" {
						direct[name] = true
					}
				}
				return true
			})
		}
	}
	var visit func(fn string, seen map[string]bool) bool
	visit = func(fn string, seen map[string]bool) bool {
		if direct[fn] {
			return true
		}
		if seen[fn] {
			return false
		}
		seen[fn] = true
		for callee := range calls[fn] {
			if visit(callee, seen) {
				return true
			}
		}
		return false
	}
	var long []string
	for _, name := range tests {
		if visit(name, map[string]bool{}) {
			long = append(long, name)
		}
	}
	sort.Strings(long)
	return long, nil
}
