// Package golden compares what a test produced with a golden file under
// the test package's testdata directory, or rewrites that file when the
// test runs with -update. The simulator's and the share view's golden
// tests use it; it holds no qshare logic.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
)

// TB is the part of testing.TB that Check uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Check compares got with the file testdata/name. With update it writes
// got there instead. A missing file fails t at once, a different one fails
// t with both contents; either message says to run `go test ./pkg -update`
// (pkg is the package's directory in the module) to write the file.
func Check(t TB, pkg, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./%s -update to create it)", err, pkg)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./%s -update if the change is intended)\n--- got:\n%s\n--- want:\n%s", name, pkg, got, want)
	}
}
