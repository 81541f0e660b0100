package sqlite

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"
)

// experimentTag is the build tag of measuring builds (experiment.go).
const experimentTag = "qshare_experiment"

// switchFiles returns the package's non-test files that declare the
// link-time variable experiment (what -ldflags "-X
// qshare/sqlite.experiment=..." sets), in a build with the given tags.
func switchFiles(t *testing.T, tags ...string) []string {
	t.Helper()
	ctx := build.Default
	ctx.BuildTags = tags
	pkg, err := ctx.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				if slices.ContainsFunc(s.(*ast.ValueSpec).Names, func(n *ast.Ident) bool { return n.Name == "experiment" }) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// TestProductHasNoExperimentSwitch checks that the product build has no
// measuring switch: none of the files it compiles declares the variable
// that -ldflags -X would set (the linker ignores -X for a name the binary
// lacks), while a build with the tag qshare_experiment does (so the check
// can fail). The product's own store mode is checked by TestPragmas.
func TestProductHasNoExperimentSwitch(t *testing.T) {
	if files := switchFiles(t); len(files) > 0 {
		t.Fatalf("the product build declares the link-time switch sqlite.experiment in %v: keep it behind the %s build tag", files, experimentTag)
	}
	if files := switchFiles(t, experimentTag); !slices.Equal(files, []string{"experiment.go"}) {
		t.Fatalf("a build tagged %s declares sqlite.experiment in %v, want experiment.go", experimentTag, files)
	}
	if sync, noStore, err := storeMode(); sync != "FULL" || noStore || err != nil {
		t.Fatalf("the store mode of this build is %s, nostore %v, %v; want FULL, false, nil", sync, noStore, err)
	}
}
