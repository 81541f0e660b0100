package storetest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
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

// KillMidway reads what the child cmd (from StartChild) writes to stdout,
// line by line: once the child has written its first line, it kills it
// after the delay given and returns every line the child wrote before it
// died. It fails t if the child writes nothing within a minute, or ends on
// its own before it is killed.
func KillMidway(t testing.TB, cmd *exec.Cmd, stdout io.Reader, stderr *strings.Builder, after time.Duration) []string {
	t.Helper()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	select {
	case l, ok := <-lines:
		if !ok {
			cmd.Wait() //nolint:errcheck // reported below
			t.Fatalf("the child wrote nothing: %s", stderr.String())
		}
		got = append(got, l)
	case <-time.After(time.Minute):
		t.Fatalf("the child wrote nothing within a minute: %s", stderr.String())
	}
	kill := time.After(after)
collect:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break collect
			}
			got = append(got, l)
		case <-kill:
			cmd.Process.Kill() //nolint:errcheck // checked through Wait
			for l := range lines {
				got = append(got, l)
			}
			break collect
		}
	}
	err := cmd.Wait()
	if !Signaled(cmd) {
		t.Fatalf("the child ended on its own (%v) before it was killed: %s", err, stderr.String())
	}
	return got
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
