// Package e2e_test runs the qshare binary's commands against a real qshare
// server, as a user would: it builds the binary once, starts
// `qshare serve --executor simulated` on a free loopback port for each test,
// and checks what the commands print and what they change. It also runs the
// demo, every command example of the docs, and regenerates the tour.
package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/serveproc"
)

// bin is the qshare binary under test; root is the repository root.
var bin, root string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "qshare-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, _ = filepath.Abs("../..")
	bin = filepath.Join(dir, "qshare")
	build := exec.Command("go", "build", "-o", bin, "./cmd/qshare")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's server and working directory.
type env struct {
	t   *testing.T
	srv *serveproc.Server
	dir string
}

// newEnv starts a private server with the simulated executor.
func newEnv(t *testing.T, args ...string) *env {
	t.Helper()
	dir := t.TempDir()
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: append([]string{"--executor", "simulated", "--log-level", "warn"}, args...), StopWait: 10 * time.Second})
	return &env{t: t, srv: srv, dir: dir}
}

// run runs `qshare ARGS...` in the repository root against the server.
func (e *env) run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	stdout, stderr, err := e.srv.Command(bin, root, args...)
	if ee, ok := err.(*exec.ExitError); ok {
		return stdout, stderr, ee.ExitCode()
	}
	if err != nil {
		e.t.Fatalf("qshare %s: %v", strings.Join(args, " "), err)
	}
	return stdout, stderr, 0
}

// ok runs a command that must succeed and returns its standard output.
func (e *env) ok(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(args...)
	if code != 0 {
		e.t.Fatalf("qshare %s exited with %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fail runs a command that must fail with one line on standard error, and
// returns that line.
func (e *env) fail(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.run(args...)
	if code == 0 {
		e.t.Fatalf("qshare %s succeeded, want a failure\n%s", strings.Join(args, " "), out)
	}
	if !strings.HasPrefix(errOut, "qshare: ") {
		e.t.Errorf("qshare %s: standard error %q does not start with \"qshare: \"", strings.Join(args, " "), errOut)
	}
	return strings.TrimPrefix(strings.TrimSpace(errOut), "qshare: ")
}

// oneLine checks that an error message is a single line.
func oneLine(t *testing.T, msg string) {
	t.Helper()
	if strings.Contains(msg, "\n") {
		t.Errorf("error message has more than one line:\n%s", msg)
	}
}

// jsonOf runs a command with -o json and decodes its output.
func (e *env) jsonOf(v any, args ...string) {
	e.t.Helper()
	out := e.ok(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("qshare %s -o json printed what is not JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// write writes a file into the test's directory and returns its path.
func (e *env) write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// applyExample applies the spec's three-share example.
func (e *env) applyExample() {
	e.t.Helper()
	e.ok("apply", "-f", "examples/three-shares.yaml")
}

// submit submits a long simulated job of one ml.g5.xlarge.
func (e *env) submit(share, name string, priority int, extra ...string) string {
	e.t.Helper()
	args := append([]string{"submit", "--queue", "training", "--share", share, "--instance-type", "ml.g5.xlarge",
		"--priority", fmt.Sprint(priority), "--name", name, "--env", "QSHARE_SIM_DURATION=1h"}, extra...)
	return e.ok(args...)
}

// job is the part of DescribeServiceJob the tests read.
type job struct {
	JobID              string `json:"jobId"`
	JobName            string `json:"jobName"`
	Status             string `json:"status"`
	StatusReason       string `json:"statusReason"`
	SchedulingPriority int    `json:"schedulingPriority"`
	QuotaShareName     string `json:"quotaShareName"`
	IsTerminated       bool   `json:"isTerminated"`
	PreemptionSummary  *struct {
		PreemptedAttemptCount int `json:"preemptedAttemptCount"`
	} `json:"preemptionSummary"`
	RetryStrategy *struct {
		Attempts int `json:"attempts"`
	} `json:"retryStrategy"`
	PreemptionConfiguration *struct {
		PreemptionRetriesBeforeTermination *int `json:"preemptionRetriesBeforeTermination"`
	} `json:"preemptionConfiguration"`
	TimeoutConfig *struct {
		AttemptDurationSeconds int `json:"attemptDurationSeconds"`
	} `json:"timeoutConfig"`
	Tags                  map[string]string `json:"tags"`
	ServiceRequestPayload string            `json:"serviceRequestPayload"`
	Attempts              []any             `json:"attempts"`
}

func (j job) preemptions() int {
	if j.PreemptionSummary == nil {
		return 0
	}
	return j.PreemptionSummary.PreemptedAttemptCount
}

// describe returns a job's detail.
func (e *env) describe(ref string) job {
	e.t.Helper()
	var j job
	e.jsonOf(&j, "describe", ref)
	return j
}

// await waits until each named job has the status given.
func (e *env) await(want map[string]string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rows []job
		e.jsonOf(&rows, "jobs", "--queue", "training")
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
		if done {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("jobs did not reach %v within 30s: %v", want, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitReason waits until a job's status reason starts with prefix: the
// scheduler sets a waiting job's reason in the pass after the one that
// requeued it, and a transcript must not catch the moment between.
func (e *env) awaitReason(name, prefix string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := e.describe(name)
		if strings.HasPrefix(j.StatusReason, prefix) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the reason of %s is still %q after 30s, want one starting %q", name, j.StatusReason, prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
