// Package e2e_test runs the qshare binary's commands against a real qshare
// server, as a user would: it builds the binary once, starts
// `qshare serve --executor simulated` on a free loopback port for each test,
// and checks what the commands print and what they change. It also runs the
// demo, every command example of the docs, and regenerates the tour.
// Each test has a server and a directory of its own and mostly waits on
// them, so the tests run in parallel, four at once (longtest.MinParallel).
package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/clitest"
	"qshare/internal/longtest"
	"qshare/internal/serveproc"
)

// bin is the qshare binary under test; root is the repository root.
var bin, root string

func TestMain(m *testing.M) {
	root, _ = filepath.Abs("../..")
	longtest.MinParallel(4)
	os.Exit(serveproc.WithBinary("qshare-e2e-", &bin, m.Run))
}

// env is one test's server and working directory, and the qshare commands
// run against it (clitest.Env's Run, OK, Fail, JSONOf, Write, Submit and
// Await).
type env struct {
	*clitest.Env
	t *testing.T
}

// newEnv starts a private server with the simulated executor.
func newEnv(t *testing.T, args ...string) *env {
	t.Helper()
	return &env{Env: clitest.New(t, bin, root, args...), t: t}
}

// oneLine checks that an error message is a single line.
// failsWith runs the command args, which must fail with a message of one
// line that contains want.
func (e *env) failsWith(want string, args ...string) {
	e.t.Helper()
	msg := e.Fail(args...)
	if strings.Contains(msg, "\n") {
		e.t.Errorf("%v: error message has more than one line:\n%s", args, msg)
	}
	if !strings.Contains(msg, want) {
		e.t.Errorf("%v: %q does not contain %q", args, msg, want)
	}
}

// exampleEnv is newEnv with the spec's three-share example applied.
func exampleEnv(t *testing.T, args ...string) *env {
	t.Helper()
	e := newEnv(t, args...)
	e.applyExample()
	return e
}

// applyExample applies the spec's three-share example.
func (e *env) applyExample() {
	e.t.Helper()
	e.OK("apply", "-f", "examples/three-shares.yaml")
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
	e.JSONOf(&j, "describe", ref)
	return j
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
