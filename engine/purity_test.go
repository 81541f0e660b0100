package engine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity fails when the engine's code (tests aside) reaches for what it
// must not: I/O, the clock, timers, goroutines or global randomness, in its
// Go files (all of them, whatever their build constraints) and in its
// assembly (which may only prefetch). The
// engine receives time as data and returns decisions; same inputs, same
// outputs.
func TestPurity(t *testing.T) {
	forbiddenImports := map[string]bool{
		"os": true, "net": true, "net/http": true, "database/sql": true, "io/ioutil": true,
		"C": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true, "sync": true, "unsafe": true, "syscall": true,
	}
	forbiddenCalls := map[string]bool{
		"time.Now": true, "time.Sleep": true, "time.After": true, "time.AfterFunc": true,
		"time.NewTimer": true, "time.NewTicker": true, "time.Tick": true, "time.Since": true, "time.Until": true,
	}
	// Every .go file of the package is parsed, whatever its build
	// constraints (prefetch_asm.go, prefetch_other.go): the parser ignores
	// them, so a file built only elsewhere is checked here too.
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
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:linkname") {
					t.Errorf("%s: a //go:linkname directive at %s", name, fset.Position(c.Pos()))
				}
			}
		}
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
	asm, err := filepath.Glob("*.s")
	if err != nil {
		t.Fatal(err)
	}
	if len(asm) == 0 {
		t.Fatal("no assembly files found: the prefetch functions are in prefetch_*.s")
	}
	for _, name := range asm {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range asmProblems(string(src)) {
			t.Errorf("%s:%s", name, p)
		}
	}
}

// asmInstructions are the only instructions the engine's assembly may
// hold: loading a pointer argument into a register, asking the processor
// to load ahead (amd64 PREFETCH*, arm64 PRFM), and returning. A prefetch
// never faults and changes no value, so these functions read nothing the
// engine sees and do nothing else: no CALL, no SYSCALL or SVC, no jump, no
// store, no read of a global symbol or of the clock.
var asmInstructions = map[string]bool{
	"MOVQ": true, "MOVD": true,
	"PREFETCHT0": true, "PREFETCHT1": true, "PREFETCHT2": true, "PREFETCHNTA": true,
	"PRFM": true,
	"RET":  true,
}

// asmProblems returns what the assembly src holds beyond asmInstructions,
// one "line: problem" each.
func asmProblems(src string) []string {
	var out []string
	for i, line := range strings.Split(src, "\n") {
		if k := strings.Index(line, "//"); k >= 0 {
			line = line[:k]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		bad := func(why string) { out = append(out, fmt.Sprintf("%d: %s: %q", i+1, why, line)) }
		if strings.HasPrefix(line, "#") {
			if line != `#include "textflag.h"` {
				bad("a preprocessor line other than #include \"textflag.h\"")
			}
			continue
		}
		op, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch {
		case op == "TEXT":
			// A function of this package (·name), without a frame.
			if !strings.HasPrefix(args, "·") || !strings.Contains(args, "(SB), NOSPLIT, $0-") {
				bad("a TEXT line that is not a frameless NOSPLIT function of the package")
			}
		case !asmInstructions[op]:
			bad("instruction " + op + " is not a prefetch, a move of an argument or RET")
		case op == "MOVQ" || op == "MOVD":
			// Only an argument from the frame pointer into a register.
			src, _, _ := strings.Cut(args, ",")
			if !strings.HasSuffix(strings.TrimSpace(src), "(FP)") {
				bad(op + " that does not load an argument (name+off(FP))")
			}
		case strings.Contains(args, "(SB)"):
			bad("a reference to a global symbol")
		}
	}
	return out
}

// TestAsmProblems shows that the assembly check rejects what the engine's
// assembly must not hold, and accepts the prefetch functions as written.
func TestAsmProblems(t *testing.T) {
	ok := "#include \"textflag.h\"\n// func f(x *uint64)\nTEXT ·f(SB), NOSPLIT, $0-8\n\tMOVQ x+0(FP), AX\n\tPREFETCHT0 (AX)\n\tPRFM (R0), PLDL1KEEP\n\tRET\n"
	if p := asmProblems(ok); len(p) != 0 {
		t.Fatalf("a prefetch function is rejected: %v", p)
	}
	for _, bad := range []string{
		"\tCALL runtime·nanotime(SB)",
		"\tSYSCALL",
		"\tSVC",
		"\tJMP runtime·nanotime(SB)",
		"\tMOVQ runtime·ticks(SB), AX",
		"\tMOVQ AX, (BX)",
		"\tRDTSC",
		"TEXT runtime·f(SB), NOSPLIT, $0-8",
		"TEXT ·f(SB), $16-8",
		"\tPREFETCHT0 runtime·x(SB)",
		"#include \"go_asm.h\"",
	} {
		if p := asmProblems(ok + bad + "\n"); len(p) != 1 {
			t.Errorf("%q: got %d problems, want 1: %v", bad, len(p), p)
		}
	}
}
