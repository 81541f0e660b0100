package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity fails when the engine's code (tests aside) reaches for what it
// must not: I/O, the clock, timers, goroutines or global randomness. The
// engine receives time as data and returns decisions; same inputs, same
// outputs.
func TestPurity(t *testing.T) {
	forbiddenImports := map[string]bool{
		"os": true, "net": true, "net/http": true, "database/sql": true, "io/ioutil": true,
		"math/rand": true, "math/rand/v2": true, "crypto/rand": true, "sync": true, "unsafe": true, "syscall": true,
	}
	forbiddenCalls := map[string]bool{
		"time.Now": true, "time.Sleep": true, "time.After": true, "time.AfterFunc": true,
		"time.NewTimer": true, "time.NewTicker": true, "time.Tick": true, "time.Since": true, "time.Until": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[p] {
				t.Errorf("%s imports %q", name, p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement at %s", name, fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && forbiddenCalls[x.Name+"."+n.Sel.Name] {
					t.Errorf("%s: %s.%s at %s", name, x.Name, n.Sel.Name, fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no engine source files found")
	}
}
