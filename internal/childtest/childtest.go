// Package childtest runs a test in a child process of the test binary, for
// what a test must not do to the process that runs the others (lower its
// file size limit, say).
package childtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Run runs the test named child in a child process of the test binary,
// with env set to value, logs the child's output, and fails t unless the
// child ran that test and it passed. With -short it skips t. The child reads
// value with Arg.
func Run(t *testing.T, child, env, value string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+value)
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+child) {
		t.Fatal("the child did not run its test")
	}
}

// Arg returns the value that Run gave the child in env; outside a child
// (env unset) it skips t, a test that only parent names as its child.
func Arg(t *testing.T, env, parent string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("run by %s as its child process", parent)
	}
	return v
}
