// Package clitest drives the qshare command line against a test's own
// `qshare serve --executor simulated`, as the end-to-end tests (test/e2e)
// and the dashboard's (test/dashboard) do: it starts the server, runs
// `qshare ARGS...` in the repository root against it, decodes what -o json
// prints, and waits for the jobs of the queue "training" to reach a state.
// It is a test harness: no product package imports it.
package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"qshare/internal/serveproc"
)

// Env is one test's server and working directory.
type Env struct {
	// Srv is the server; Dir the test's directory (the server's data
	// directory is Dir/data).
	Srv *serveproc.Server
	Dir string
	// Environ is added to the commands' environment (NAME=VALUE), such as
	// the access key they sign with.
	Environ []string

	t         testing.TB
	bin, root string
}

// New starts a private server of the qshare binary bin with the simulated
// executor (unless args name an --executors file) and args (more flags of
// serve) for the test t, and returns an
// Env that runs bin's commands in the repository root root. The server
// stops when t ends.
func New(t testing.TB, bin, root string, args ...string) *Env {
	t.Helper()
	dir := t.TempDir()
	base := []string{"--log-level", "warn"}
	if !slices.Contains(args, "--executors") { // the file names the executors
		base = append(base, "--executor", "simulated")
	}
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: append(base, args...), StopWait: 10 * time.Second})
	return &Env{Srv: srv, Dir: dir, t: t, bin: bin, root: root}
}

// Run runs `qshare ARGS...` in the repository root against the server and
// returns what it printed and its exit code.
func (e *Env) Run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	stdout, stderr, err := e.Srv.CommandEnv(e.bin, e.root, e.Environ, args...)
	if ee, ok := err.(*exec.ExitError); ok {
		return stdout, stderr, ee.ExitCode()
	}
	if err != nil {
		e.t.Fatalf("qshare %s: %v", strings.Join(args, " "), err)
	}
	return stdout, stderr, 0
}

// OK runs a command that must succeed and returns its standard output.
func (e *Env) OK(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.Run(args...)
	if code != 0 {
		e.t.Fatalf("qshare %s exited with %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// Fail runs a command that must fail with one line on standard error, and
// returns that line.
func (e *Env) Fail(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.Run(args...)
	if code == 0 {
		e.t.Fatalf("qshare %s succeeded, want a failure\n%s", strings.Join(args, " "), out)
	}
	if !strings.HasPrefix(errOut, "qshare: ") {
		e.t.Errorf("qshare %s: standard error %q does not start with \"qshare: \"", strings.Join(args, " "), errOut)
	}
	return strings.TrimPrefix(strings.TrimSpace(errOut), "qshare: ")
}

// JSONOf runs a command with -o json and decodes its output into v.
func (e *Env) JSONOf(v any, args ...string) {
	e.t.Helper()
	out := e.OK(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("qshare %s -o json printed what is not JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// Write writes a file into the test's directory and returns its path.
func (e *Env) Write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// Submit submits to the queue "training" a long simulated job of one
// ml.g5.xlarge, with extra more flags of submit, and returns what submit
// printed.
func (e *Env) Submit(share, name string, priority int, extra ...string) string {
	e.t.Helper()
	args := append([]string{"submit", "--queue", "training", "--share", share, "--instance-type", "ml.g5.xlarge",
		"--priority", fmt.Sprint(priority), "--name", name, "--env", "QSHARE_SIM_DURATION=1h"}, extra...)
	return e.OK(args...)
}

// Await waits, within 30 s, until each named job of the queue "training"
// has the status given and, when more is not nil, more holds too.
func (e *Env) Await(want map[string]string, more func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rows []struct {
			JobName string `json:"jobName"`
			Status  string `json:"status"`
		}
		e.JSONOf(&rows, "jobs", "--queue", "training")
		got := map[string]string{}
		for _, r := range rows {
			got[r.JobName] = r.Status
		}
		done := true
		for n, s := range want {
			if got[n] != s {
				done = false
			}
		}
		if done && (more == nil || more()) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("jobs did not reach %v within 30s: %v", want, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
