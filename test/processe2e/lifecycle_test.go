package processe2e_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// cpu is the instance type of the tests that need no GPU (0 GPUs each).
const cpu = "ml.m5.xlarge"

// oneShare sets up an environment of n cpu instances and one RESERVE share
// "s" of all of them, in-share preemption as given.
func oneShare(s *server, n int32, inShare bool) {
	s.setup(map[string]int32{cpu: n}, share{name: "s", limits: map[string]int32{cpu: n},
		strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: inShare})
}

// TestSucceedAndRetry: a job that exits 0 succeeds and its output is in its
// log; a job whose first attempt exits 3 is retried because an
// evaluateOnExit rule matches "Essential process exited with code 3", and
// its second attempt, which finds the first one's file in
// SM_CHECKPOINT_DIR, succeeds; a job that exits 4 matches the EXIT rule
// and fails after one attempt.
func TestSucceedAndRetry(t *testing.T) {
	skipShort(t)
	succeedAndRetry(t, serverOpts{})
}

// succeedAndRetry is the body of TestSucceedAndRetry, on a server started with o
// (TestSlurm runs it on the Slurm executor).
func succeedAndRetry(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	oneShare(s, 3, false)
	retry := &types.ServiceJobRetryStrategy{Attempts: aws.Int32(3), EvaluateOnExit: []types.ServiceJobEvaluateOnExit{
		{Action: types.ServiceJobRetryActionRetry, OnStatusReason: aws.String("Essential process exited with code 3")},
		{Action: types.ServiceJobRetryActionExit, OnStatusReason: aws.String("*")},
	}}
	ok := s.submit(job{name: "ok", share: "s",
		script: `echo "hello from $QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT share $QSHARE_QUOTA_SHARE"; echo "bye"`})
	flaky := s.submit(job{name: "flaky", share: "s", retry: retry, script: `
if [ -e "$SM_CHECKPOINT_DIR/first-attempt-ran" ]; then echo "attempt $QSHARE_ATTEMPT: found the first attempt's file"; exit 0; fi
touch "$SM_CHECKPOINT_DIR/first-attempt-ran"; echo "attempt $QSHARE_ATTEMPT: failing with 3"; exit 3`})
	bad := s.submit(job{name: "bad", share: "s", retry: retry, script: `echo "exiting 4"; exit 4`})

	d := s.AwaitStatus(ok, types.ServiceJobStatusSucceeded)
	if got := attemptReasons(d); len(got) != 1 || got[0] != "Essential process exited with code 0" {
		t.Errorf("ok: attempts %q, want one that exited with code 0", got)
	}
	if d.StartedAt == nil || d.StoppedAt == nil {
		t.Errorf("ok: startedAt %v, stoppedAt %v: want both", d.StartedAt, d.StoppedAt)
	}
	if out := s.mustLogs(ok, 1); out != "hello from ok attempt 1 share s\nbye\n" {
		t.Errorf("ok: log %q", out)
	}
	// The latest attempt's log, without ?attempt=, is the same.
	if out := s.mustLogs(ok, 0); !strings.HasSuffix(out, "bye\n") {
		t.Errorf("ok: latest log %q", out)
	}

	d = s.AwaitStatus(flaky, types.ServiceJobStatusSucceeded)
	got := attemptReasons(d)
	if len(got) != 2 || got[0] != "Essential process exited with code 3" || got[1] != "Essential process exited with code 0" {
		t.Errorf("flaky: attempt reasons %q, want code 3 then code 0", got)
	}
	if out := s.mustLogs(flaky, 1); out != "attempt 1: failing with 3\n" {
		t.Errorf("flaky attempt 1: log %q", out)
	}
	if out := s.mustLogs(flaky, 2); out != "attempt 2: found the first attempt's file\n" {
		t.Errorf("flaky attempt 2: log %q", out)
	}
	if d.RetryStrategy == nil || aws.ToInt32(d.RetryStrategy.Attempts) != 3 || len(d.RetryStrategy.EvaluateOnExit) != 2 {
		t.Errorf("flaky: retryStrategy %+v not echoed", d.RetryStrategy)
	}

	d = s.AwaitStatus(bad, types.ServiceJobStatusFailed)
	if got := attemptReasons(d); len(got) != 1 || got[0] != "Essential process exited with code 4" {
		t.Errorf("bad: attempts %q, want one that exited with code 4", got)
	}
	if r := aws.ToString(d.StatusReason); !strings.Contains(r, "Essential process exited with code 4") || !strings.Contains(r, "EXIT") {
		t.Errorf("bad: status reason %q, want the exit code and the EXIT rule", r)
	}
}

// TestTimeout: an attempt that outlives timeoutConfig.attemptDurationSeconds,
// or the payload's StoppingCondition.MaxRuntimeInSeconds, gets SIGTERM (the
// first job traps it and says so; the second dies of it; the third ignores
// it and is killed when its own 1 s grace ends) and fails with a reason that
// says it timed out. A job with retryStrategy.attempts 2 is retried after a
// timeout, as after any failed attempt, and times out again.
func TestTimeout(t *testing.T) {
	skipShort(t)
	s := startServer(t, newDataDir(t), serverOpts{})
	oneShare(s, 4, false)
	g := newGates(t)
	const trapping = `trap 'echo "SIGTERM: saving"; exit 0' TERM; echo started; ` + waitGate + `echo "not stopped"`
	byTimeout := s.submit(job{name: "by-timeout", share: "s", timeout: 1, env: g.env(), script: trapping})
	byRuntime := s.submit(job{name: "by-max-runtime", share: "s", maxRuntime: 1, env: g.env(),
		script: `echo started; ` + waitGate + `echo "not stopped"`})
	stubborn := s.submit(job{name: "stubborn", share: "s", timeout: 1, env: g.env("QSHARE_STOP_GRACE", "1"),
		script: `trap 'echo "ignoring SIGTERM"' TERM; echo started; ` + waitGate + `echo "not stopped"`})
	retried := s.submit(job{name: "retried", share: "s", timeout: 1, env: g.env(), script: trapping,
		retry: &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)}})

	for id, attempts := range map[string]int{byTimeout: 1, byRuntime: 1, stubborn: 1, retried: 2} {
		d := s.AwaitStatus(id, types.ServiceJobStatusFailed)
		name := aws.ToString(d.JobName)
		if r := aws.ToString(d.StatusReason); !strings.Contains(strings.ToLower(r), "timeout") {
			t.Errorf("%s: status reason %q does not say timeout", name, r)
		}
		got := attemptReasons(d)
		if len(got) != attempts {
			t.Errorf("%s: %d attempts (%q), want %d", name, len(got), got, attempts)
		}
		for n, r := range got {
			if !strings.Contains(strings.ToLower(r), "timeout") {
				t.Errorf("%s: attempt %d reason %q does not say timeout", name, n+1, r)
			}
			out := s.mustLogs(id, n+1)
			if strings.Contains(out, "not stopped") {
				t.Errorf("%s: attempt %d ran to its end: %q", name, n+1, out)
			}
			if (id == byTimeout || id == retried) && !strings.Contains(out, "SIGTERM: saving") {
				t.Errorf("%s: attempt %d was not given SIGTERM: %q", name, n+1, out)
			}
		}
		if aws.ToBool(d.IsTerminated) {
			t.Errorf("%s: a timeout is not a termination, but isTerminated is true", name)
		}
	}
	if out := s.mustLogs(stubborn, 1); !strings.Contains(out, "ignoring SIGTERM") {
		t.Errorf("stubborn: it was not sent SIGTERM before SIGKILL: %q", out)
	}
	// Each attempt gets its own timeout, counted from its own start.
	d := s.Describe(retried)
	if a1, a2 := d.Attempts[0], d.Attempts[1]; aws.ToInt64(a2.StartedAt) < aws.ToInt64(a1.StoppedAt) ||
		aws.ToInt64(a2.StoppedAt)-aws.ToInt64(a2.StartedAt) < 1000 {
		t.Errorf("retried: attempt 2 ran from %d to %d, attempt 1 stopped at %d: want a whole second of its own",
			aws.ToInt64(a2.StartedAt), aws.ToInt64(a2.StoppedAt), aws.ToInt64(a1.StoppedAt))
	}
	d = s.Describe(byTimeout)
	if d.TimeoutConfig == nil || aws.ToInt32(d.TimeoutConfig.AttemptDurationSeconds) != 1 {
		t.Errorf("timeoutConfig %+v not echoed", d.TimeoutConfig)
	}
}

// TestTerminate: TerminateServiceJob of a running job stops its whole
// process group (the shell and the children it left in the background),
// politely for a job that dies of SIGTERM and with SIGKILL after the job's
// own QSHARE_STOP_GRACE for one that ignores it; both end FAILED with the
// reason given and isTerminated.
func TestTerminate(t *testing.T) {
	skipShort(t)
	terminate(t, serverOpts{})
}

// terminate is the body of TestTerminate, on a server started with o
// (TestSlurm runs it on the Slurm executor).
func terminate(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	oneShare(s, 2, false)
	g := newGates(t)
	polite := s.submit(job{name: "polite", share: "s", env: g.env(),
		script: `sleep 300 & echo "pid=$$ child=$!"; ` + waitGate})
	stubborn := s.submit(job{name: "stubborn", share: "s", env: g.env("QSHARE_STOP_GRACE", "1"),
		script: `trap 'echo "ignoring SIGTERM"' TERM; sleep 300 & echo "pid=$$ child=$!"; ` + waitGate + `sleep 300`})

	pids := map[string]int{}
	for _, id := range []string{polite, stubborn} {
		s.awaitRunning(id, 1)
		pids[id] = pidIn(t, s.awaitLog(id, 1, "child="))
		if !groupAlive(pids[id]) {
			t.Fatalf("the process group %d of %s is not there while the job runs", pids[id], id)
		}
	}
	const why = "e2e: no longer needed"
	for _, id := range []string{polite, stubborn} {
		_, err := s.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String(why)})
		must(t, err)
	}
	for _, id := range []string{polite, stubborn} {
		d := s.AwaitStatus(id, types.ServiceJobStatusFailed)
		name := aws.ToString(d.JobName)
		if !aws.ToBool(d.IsTerminated) {
			t.Errorf("%s: isTerminated is false", name)
		}
		if r := aws.ToString(d.StatusReason); !strings.Contains(r, why) {
			t.Errorf("%s: status reason %q does not carry the termination's reason", name, r)
		}
		if len(d.Attempts) != 1 || d.Attempts[0].StoppedAt == nil {
			t.Errorf("%s: attempts %+v, want one that stopped", name, d.Attempts)
		}
		// FAILED is reported only once the whole group is gone.
		if groupAlive(pids[id]) {
			t.Errorf("%s: its process group %d is still there after FAILED", name, pids[id])
		}
		if !o.endRecorded(s.attemptDir(id, 1)) {
			t.Errorf("%s: the attempt's end is not recorded", name)
		}
	}
	if out := s.mustLogs(stubborn, 1); !strings.Contains(out, "ignoring SIGTERM") {
		t.Errorf("stubborn: it was not sent SIGTERM before SIGKILL: %q", out)
	}
	if r := attemptReasons(s.Describe(stubborn)); len(r) != 1 || !strings.Contains(r[0], "SIGKILL") {
		t.Errorf("stubborn: attempt reasons %q, want one that says SIGKILL", r)
	}
}

// submitFailing submits, to share "s", three jobs that fail: one that
// writes SageMaker's failure file, one that dies of SIGSEGV and one whose
// program does not exist. It returns their IDs by name.
func submitFailing(s *server) map[string]string {
	return map[string]string{
		"failure-file": s.submit(job{name: "failure-file", share: "s",
			script: `printf 'CUDA out of memory\nTraceback (most recent call last):\n' > "$SM_OUTPUT_DIR/failure"; exit 1`}),
		"segv":    s.submit(job{name: "segv", share: "s", script: `kill -SEGV $$`}),
		"missing": s.submit(job{name: "missing", share: "s", entrypoint: []string{"no-such-program-e2e", "--epochs", "3"}}),
	}
}

// awaitFailures waits until each job of ids is FAILED, and checks that its
// one attempt's reason starts with, and the job's status reason holds,
// what want gives for its name.
func (s *server) awaitFailures(ids, want map[string]string) {
	s.t.Helper()
	for name, w := range want {
		d := s.AwaitStatus(ids[name], types.ServiceJobStatusFailed)
		if r := attemptReasons(d); len(r) != 1 || !strings.HasPrefix(r[0], w) {
			s.t.Errorf("%s: attempt reasons %q, want one starting %q", name, r, w)
		}
		if r := aws.ToString(d.StatusReason); !strings.Contains(r, w) {
			s.t.Errorf("%s: status reason %q does not contain %q", name, r, w)
		}
	}
}

// TestFailureReasons: the status reason of a failed attempt is the first
// line of SM_OUTPUT_DIR/failure when the job writes one, names the signal
// that killed the job, or says that the program cannot be run; a payload
// without an entrypoint, or asking for network isolation, is refused at
// submit with a ClientException. A job
// sees the SageMaker variables, its hyperparameters and its own directory.
func TestFailureReasons(t *testing.T) {
	skipShort(t)
	s := startServer(t, newDataDir(t), serverOpts{})
	oneShare(s, 4, false)
	ids := submitFailing(s)
	env := s.submit(job{name: "env", share: "s", payload: map[string]any{"HyperParameters": map[string]string{"learning-rate": "0.01", "epochs": "3"}},
		script: `echo "pwd=$(pwd)"; echo "ckpt=$SM_CHECKPOINT_DIR"; echo "model=$SM_MODEL_DIR"; echo "hp=$SM_HP_LEARNING_RATE,$SM_HP_EPOCHS"
echo "who=$QSHARE_JOB_ID,$QSHARE_ATTEMPT,$QSHARE_QUOTA_SHARE,$SM_CURRENT_HOST,$SM_NUM_GPUS,$CUDA_VISIBLE_DEVICES"; cat "$SM_INPUT_CONFIG_DIR/hyperparameters.json"; echo`})

	s.awaitFailures(ids, map[string]string{
		"failure-file": "CUDA out of memory",
		"segv":         "Essential process terminated by signal SIGSEGV",
		"missing":      "CannotStartError",
	})

	s.AwaitStatus(env, types.ServiceJobStatusSucceeded)
	dir := filepath.Join(s.dataDir, "jobs", env)
	out := s.mustLogs(env, 1)
	ml := dir // where the job sees its directory: /opt/ml, in a mount namespace of its own, as root
	if os.Geteuid() == 0 {
		ml = "/opt/ml"
	}
	for _, want := range []string{"pwd=" + dir + "\n", "ckpt=" + filepath.Join(ml, "checkpoints") + "\n", "model=" + filepath.Join(ml, "model") + "\n",
		"hp=0.01,3\n", "who=" + env + ",1,s,algo-1,0,\n", `"learning-rate"`} {
		if !strings.Contains(out, want) {
			t.Errorf("env: the job's output lacks %q:\n%s", want, out)
		}
	}

	_, err := s.C.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("no-entrypoint"), JobQueue: aws.String("q"),
		QuotaShareName: aws.String("s"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(`{"AlgorithmSpecification":{"TrainingImage":"x"},"ResourceConfig":{"InstanceType":"ml.m5.xlarge","InstanceCount":1}}`)})
	var ce *types.ClientException
	if !errors.As(err, &ce) || !strings.Contains(strings.ToLower(ce.ErrorMessage()), "entrypoint") {
		t.Errorf("a payload without an entrypoint: %v, want a ClientException about the entrypoint", err)
	}
	// Network isolation, which a host process cannot have: refused, not
	// run with the host's network.
	_, err = s.C.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("isolated"), JobQueue: aws.String("q"),
		QuotaShareName: aws.String("s"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(`{"AlgorithmSpecification":{"ContainerEntrypoint":["true"]},"EnableNetworkIsolation":true,"ResourceConfig":{"InstanceType":"ml.m5.xlarge","InstanceCount":1}}`)})
	if !errors.As(err, &ce) || !strings.Contains(ce.ErrorMessage(), "EnableNetworkIsolation") {
		t.Errorf("a payload with EnableNetworkIsolation: %v, want a ClientException naming it", err)
	}
}
