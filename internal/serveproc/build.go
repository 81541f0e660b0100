package serveproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles the qshare command into dir/qshare and returns its path,
// for the tests that run the real binary. It builds with the cgo setting of
// the go command that runs the tests, so that it reuses the packages go
// test has compiled already: forcing CGO_ENABLED=0 where cgo is on compiles
// the whole dependency graph a second time, about 80 s on a 2-core machine
// with a cold build cache, which put `go test ./...` on a fresh clone over
// five minutes. The release binary is static; .ci/run builds it, and runs
// the suites that run the binary as other users once more with
// CGO_ENABLED=0. It must run inside the qshare module; the error holds the
// compiler's output.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "qshare")
	cmd := exec.Command("go", "build", "-o", bin, "qshare/cmd/qshare")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// WithBinary is the body of a TestMain whose tests run the real binary: it
// builds qshare into a new temporary directory (its name starts with
// prefix), sets *bin to its path, calls run (m.Run) and removes the
// directory. It returns the exit code for os.Exit: run's, or 1, said on
// standard error, when the binary cannot be built.
func WithBinary(prefix string, bin *string, run func() int) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return run()
}

// TB is the part of testing.TB that StartTest uses (so that this package,
// which the qshare command links, need not import testing).
type TB interface {
	Helper()
	Fatal(args ...any)
	Error(args ...any)
	Logf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// StartTest starts a server as Start does, with a background context, for
// the test t: it fails t at once when the server does not come up, stops the
// server when t ends (an error of Stop fails t), and then, when t has
// failed, logs the server's output (kept in memory unless o.Output is set).
func StartTest(t TB, o Options) *Server {
	t.Helper()
	srv, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", srv.Log())
		}
	})
	return srv
}
