package storetest

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// StartChild runs this test binary again as a child process that runs only
// the tests run matches, with env (NAME=VALUE) added to its environment:
// the way a crash test gets a process it can kill at a moment of its
// choosing. It returns the started child, a pipe from its standard output,
// and what it writes to standard error, for the test's messages. A child
// that still runs when the test ends is killed.
func StartChild(t testing.TB, run string, env ...string) (*exec.Cmd, io.Reader, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) //nolint:errcheck // already dead on the normal path
	return cmd, stdout, &stderr
}

// Signaled reports whether the child, which has been waited for, was ended
// by a signal: where there are none, it reports true.
func Signaled(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool })
	return !ok || ws.Signaled()
}

// runPattern is the -test.run pattern that selects exactly the test named
// name (as t.Name gives it) and its parents.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
